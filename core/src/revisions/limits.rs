//! Per-key rate limits of the writes agents make for curators: `feedback_skill` and skill
//! proposals. The defaults sit far above what an agent doing real work produces (a rating
//! per skill per task, a few proposals a day) and far below what a loop produces.
//!
//! The slots live in the database (`rate_limit_slots`, a sliding window), so the limit is
//! exact across replicas; see [`crate::store::Store::reserve_rate_slot`].

use std::fmt;
use std::time::Duration;

/// At most `max` actions in any `window` (sliding) per agent key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// The stored name of the action, e.g. `feedback_skill`.
    pub action: &'static str,
    /// What the agent is told it did too often.
    pub what: &'static str,
    pub max: u32,
    pub window: Duration,
}

/// `feedback_skill` calls per key: 60 a minute.
pub const FEEDBACK: RateLimit = RateLimit {
    action: "feedback_skill",
    what: "`feedback_skill` calls",
    max: 60,
    window: Duration::from_secs(60),
};

/// Skill proposals (`propose_skill_revision`, and `POST /api/v1/skills/{skill}/candidates`,
/// which runs it) per key: 20 an hour.
pub const PROPOSALS: RateLimit = RateLimit {
    action: "propose_skill_revision",
    what: "skill proposals",
    max: 20,
    window: Duration::from_secs(3600),
};

impl RateLimit {
    /// Reserves one slot of this limit for `subject` at `now`, exactly across replicas.
    pub async fn reserve(
        &self,
        store: &crate::store::Store,
        subject: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Slot, crate::store::StoreError> {
        store
            .reserve_rate_slot(subject, (self.action, self.max, self.window), now)
            .await
    }

    /// `at most 60 `feedback_skill` calls per key per minute`.
    pub fn sentence(&self) -> String {
        format!(
            "at most {} {} per key per {}",
            self.max,
            self.what,
            Span(self.window)
        )
    }

    /// The refusal an agent reads: the limit and when to retry.
    pub fn refusal(&self, retry_in: Duration) -> String {
        format!(
            "rate limit: {}; retry in {}",
            self.sentence(),
            Wait(retry_in)
        )
    }
}

/// The rate limit subject of an agent key.
pub fn key_subject(key_name: &str) -> String {
    format!("key:{key_name}")
}

pub use crate::store::revisions::Slot;

/// A wait in whole seconds, rounded up and never 0: what `Retry-After` and
/// `retry_after_secs` say.
pub fn retry_after_secs(retry_in: Duration) -> u64 {
    (retry_in.as_secs() + u64::from(retry_in.subsec_nanos() > 0)).max(1)
}

/// A window length as the sentence reads it: `minute`, `hour`, `10 minutes`.
struct Span(Duration);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_secs() {
            60 => f.write_str("minute"),
            3600 => f.write_str("hour"),
            86_400 => f.write_str("day"),
            s if s % 3600 == 0 => write!(f, "{} hours", s / 3600),
            s if s % 60 == 0 => write!(f, "{} minutes", s / 60),
            s => write!(f, "{s} seconds"),
        }
    }
}

/// A wait, rounded up to whole seconds (never `0 s`).
struct Wait(Duration);

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = retry_after_secs(self.0);
        if secs >= 120 {
            write!(f, "{} minutes", secs.div_ceil(60))
        } else {
            write!(f, "{secs} s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_limit_and_when_to_retry() {
        assert_eq!(
            FEEDBACK.refusal(Duration::from_millis(12_300)),
            "rate limit: at most 60 `feedback_skill` calls per key per minute; retry in 13 s"
        );
        assert_eq!(
            PROPOSALS.refusal(Duration::from_secs(1501)),
            "rate limit: at most 20 skill proposals per key per hour; retry in 26 minutes"
        );
        assert!(FEEDBACK.refusal(Duration::ZERO).ends_with("retry in 1 s"));
    }
}
