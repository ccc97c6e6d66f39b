//! Server functions of approval holds: the reviewers' queue, one hold, and the approve and
//! deny decisions.
//!
//! Reading needs the viewer role, deciding the reviewer role; the holds service refuses a
//! person deciding a hold raised through an agent key they created. Arguments never cross
//! the wire in clear when the tool marks them sensitive: they arrive as the digest the
//! audit log stores.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::flash::Notice;
use crate::shared::ConsoleError;

/// The longest reason a reviewer may give (the holds service's limit).
pub const MAX_REASON: usize = 2000;

/// The queue's state filters, in the order the page offers them; `pending` is the default.
pub const STATE_FILTERS: [&str; 8] = [
    "pending",
    "approved",
    "denied",
    "expired",
    "executed",
    "refused",
    "withdrawn",
    "all",
];

/// One hold as the queue lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldSummary {
    pub id: String,
    pub session_id: String,
    pub key: String,
    pub scope: String,
    pub role: String,
    pub tool: String,
    pub rule: String,
    /// Where it stands now: a pending or approved hold past its expiry reads `expired`
    /// even before the sweep records it.
    pub state: String,
    pub created_at: String,
    pub expires_at: String,
    /// How long ago it was raised, e.g. `4 min`.
    pub age: String,
    /// `in 11 min` while it can still be decided or run, `passed` after.
    pub expires_in: String,
    pub decided_by: Option<String>,
}

/// One page of the queue, newest first (pending ones first within a page of every state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldsPage {
    /// The state filter in force: one of [`STATE_FILTERS`].
    pub state: String,
    pub rows: Vec<HoldSummary>,
    /// The cursor of the next (older) page (`?before=`), when there is one.
    pub next: Option<String>,
}

/// One argument of the held call: its JSON value exactly as it will run, or, for a
/// sensitive argument, `sha256:<digest>` of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldArgument {
    pub name: String,
    pub value: String,
    pub digest: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldDetail {
    pub summary: HoldSummary,
    pub arguments: Vec<HoldArgument>,
    /// The digest of the canonical arguments: what an approval binds.
    pub arguments_digest: String,
    /// Who created the agent key that raised it (`cli:…` for the command line).
    pub key_created_by: Option<String>,
    /// How long an approval lets the call run.
    pub minutes: u32,
    /// The catalog revision the hold was raised under, and the one in force now.
    pub catalog_revision: String,
    pub current_revision: String,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
    pub decided_revision: Option<String>,
    pub finished_at: Option<String>,
    /// Whether the signed-in user has a console role that decides holds.
    pub can_review: bool,
    /// The session's calls before this one (at most ten, oldest first).
    pub earlier: Vec<EarlierCall>,
    /// Who was told of the hold, and when.
    pub notified: Vec<Notified>,
    /// What a plain (no JavaScript) decision on this page reported.
    pub notice: Option<Notice>,
}

/// One call the hold's session made before it, as its timeline shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierCall {
    pub at: String,
    pub badge: String,
    pub headline: String,
}

/// One announcement of the hold to its approvers, and how its delivery went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notified {
    pub notifier: String,
    /// `hold.created` or `hold.expiring`.
    pub event: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: u32,
    /// When it was delivered, or when it is tried next (failed: the last attempt's time).
    pub at: String,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
}

/// Pending holds for the dashboard: how many (at most one page), and whether there are more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCount {
    pub count: usize,
    pub more: bool,
}

#[server(prefix = "/console/api", endpoint = "list_holds")]
pub async fn list_holds(
    state: Option<String>,
    before: Option<String>,
) -> Result<HoldsPage, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    ssr::list(state, before).await
}

#[server(prefix = "/console/api", endpoint = "get_hold")]
pub async fn get_hold(id: String) -> Result<Option<HoldDetail>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    ssr::detail(&id, user.role.allows(ConsoleRole::Reviewer)).await
}

#[server(prefix = "/console/api", endpoint = "pending_holds")]
pub async fn pending_holds() -> Result<PendingCount, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    ssr::pending().await
}

/// Approves the exact held call: its agent may run it once before the approval expires.
#[server(prefix = "/console/api", endpoint = "approve_hold")]
pub async fn approve_hold(id: String, reason: String) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::decide(&id, true, &reason).await).await
}

/// Denies the held call; what it reserved goes back to its session.
#[server(prefix = "/console/api", endpoint = "deny_hold")]
pub async fn deny_hold(id: String, reason: String) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::decide(&id, false, &reason).await).await
}

#[cfg(feature = "ssr")]
mod ssr {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde_json::Value;
    use skillgate_core::audit::redact_sensitive;
    use skillgate_core::holds::{
        self, Decider, HoldError, Holds, MAX_ID, sensitive_arguments, shown_state,
    };
    use skillgate_core::store::holds::{HoldRow, HoldState};
    use skillgate_core::users::ConsoleRole;

    use super::*;
    use crate::shared::ssr::{context, internal, require};

    const _: () = assert!(MAX_REASON == holds::MAX_REASON);

    /// The holds service the server provides next to the console context.
    fn service() -> Holds {
        expect_context::<Holds>()
    }

    /// Refusals the reviewer can act on become sentences; failures stay on the server.
    fn error(e: HoldError) -> ConsoleError {
        match e {
            HoldError::Reason => ConsoleError::Field {
                field: "reason".to_owned(),
                message: e.to_string(),
            },
            e if e.is_user_error() => ConsoleError::Invalid(e.to_string()),
            e => internal(e),
        }
    }

    fn stamp(at: DateTime<Utc>) -> String {
        at.to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// A span of time as a reviewer reads it: `just now`, `4 min`, `2 h 5 min`, `3 d 2 h`.
    pub(super) fn span(seconds: i64) -> String {
        let minutes = seconds.max(0) / 60;
        match minutes {
            0 => "under a minute".to_owned(),
            m if m < 60 => format!("{m} min"),
            m if m < 24 * 60 => match m % 60 {
                0 => format!("{} h", m / 60),
                rest => format!("{} h {rest} min", m / 60),
            },
            m => match (m / 60) % 24 {
                0 => format!("{} d", m / (24 * 60)),
                hours => format!("{} d {hours} h", m / (24 * 60)),
            },
        }
    }

    fn summary(hold: &HoldRow, now: DateTime<Utc>) -> HoldSummary {
        let state = shown_state(hold, now);
        HoldSummary {
            id: hold.id.clone(),
            session_id: hold.session_id.clone(),
            key: hold.key_name.clone(),
            scope: hold.scope.clone(),
            role: hold.role.clone(),
            tool: hold.tool.clone(),
            rule: hold.rule.clone(),
            state: state.as_str().to_owned(),
            created_at: stamp(hold.created_at),
            expires_at: stamp(hold.expires_at),
            age: span((now - hold.created_at).num_seconds()),
            expires_in: if state.reserves() {
                format!("in {}", span((hold.expires_at - now).num_seconds()))
            } else {
                "passed".to_owned()
            },
            decided_by: hold.decided_by.clone(),
        }
    }

    /// The held call's arguments with every argument named in `sensitive` replaced by its
    /// digest (the holds service says which: see [`sensitive_arguments`]).
    pub(super) fn arguments(arguments: &Value, sensitive: &[String]) -> Vec<HoldArgument> {
        let Value::Object(redacted) = redact_sensitive(arguments, sensitive) else {
            return Vec::new();
        };
        redacted
            .into_iter()
            .map(|(name, value)| {
                let digest = sensitive.contains(&name);
                let value = match (&value, digest) {
                    (Value::Object(o), true) => format!(
                        "sha256:{}",
                        o.get("sha256").and_then(Value::as_str).unwrap_or_default()
                    ),
                    _ => value.to_string(),
                };
                HoldArgument {
                    name,
                    value,
                    digest,
                }
            })
            .collect()
    }

    /// The filter in force (`pending` when none is asked for) and the states it lists.
    fn state_filter(state: Option<String>) -> Result<(String, Option<HoldState>), ConsoleError> {
        let state = state
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "pending".to_owned());
        let parsed = holds::state_filter(&state).map_err(error)?;
        Ok((state, parsed))
    }

    pub async fn list(
        state: Option<String>,
        before: Option<String>,
    ) -> Result<HoldsPage, ConsoleError> {
        let (shown, state) = state_filter(state)?;
        let before = before.as_deref().map(str::trim).filter(|b| !b.is_empty());
        if before.is_some_and(|b| b.chars().count() > MAX_ID) {
            return Err(ConsoleError::Invalid(
                "That page cursor is not a hold id.".to_owned(),
            ));
        }
        let holds = service().list(state, before).await.map_err(error)?;
        let now = Utc::now();
        let next = (holds.len() == holds::PAGE as usize)
            .then(|| holds.last().map(|h| h.id.clone()))
            .flatten();
        let mut rows: Vec<HoldSummary> = holds.iter().map(|h| summary(h, now)).collect();
        // Within a page of every state, what waits for a reviewer comes first; the sort is
        // stable, so each group stays newest first.
        rows.sort_by_key(|r| r.state != HoldState::Pending.as_str());
        Ok(HoldsPage {
            state: shown,
            rows,
            next,
        })
    }

    pub async fn detail(id: &str, can_review: bool) -> Result<Option<HoldDetail>, ConsoleError> {
        let id = id.trim();
        if id.is_empty() || id.chars().count() > MAX_ID {
            return Ok(None);
        }
        let hold = match service().get(id).await {
            Ok(hold) => hold,
            Err(HoldError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(error(e)),
        };
        let ctx = context();
        let catalog = ctx.catalog.load();
        let sensitive = sensitive_arguments(&hold, &catalog);
        let key_created_by = ctx
            .store
            .agent_key_by_id(hold.key_id)
            .await
            .map_err(internal)?
            .and_then(|k| k.created_by);
        let around = service().surroundings(&hold).await.map_err(error)?;
        let earlier = around
            .earlier
            .into_iter()
            .map(|e| EarlierCall {
                at: e.at,
                badge: e.badge,
                headline: e.headline,
            })
            .collect();
        let notified = around
            .notified
            .into_iter()
            .map(|n| Notified {
                at: stamp(n.delivered_at.unwrap_or(n.next_attempt_at)),
                notifier: n.notifier,
                event: n.event,
                state: n.state,
                attempts: n.attempts,
                last_status: n.last_status,
                last_error: n.last_error,
            })
            .collect();
        let now = Utc::now();
        Ok(Some(HoldDetail {
            earlier,
            notified,
            summary: summary(&hold, now),
            arguments: arguments(&hold.arguments, &sensitive),
            arguments_digest: hold.arguments_digest.clone(),
            key_created_by,
            minutes: hold.minutes,
            catalog_revision: hold.catalog_revision.clone(),
            current_revision: catalog.revision().to_owned(),
            decided_at: hold.decided_at.map(stamp),
            reason: hold.reason.clone(),
            decided_revision: hold.decided_revision.clone(),
            finished_at: hold.finished_at.map(stamp),
            can_review,
            notice: crate::components::flash::ssr::take().await?,
        }))
    }

    pub async fn pending() -> Result<PendingCount, ConsoleError> {
        let holds = service()
            .list(Some(HoldState::Pending), None)
            .await
            .map_err(error)?;
        let now = Utc::now();
        Ok(PendingCount {
            count: holds.iter().filter(|h| !h.is_due(now)).count(),
            more: holds.len() == holds::PAGE as usize,
        })
    }

    pub async fn decide(id: &str, approve: bool, reason: &str) -> Result<Notice, ConsoleError> {
        let user = require(ConsoleRole::Reviewer).await?;
        let id = id.trim();
        if id.is_empty() || id.chars().count() > MAX_ID {
            return Err(ConsoleError::Invalid(format!("There is no hold “{id}”.")));
        }
        let holds = service();
        let now = Utc::now();
        if approve {
            holds
                .approve(&Decider::console(&user.name), id, reason, now)
                .await
                .map_err(error)?;
            let hold = holds.get(id).await.map_err(error)?;
            Ok(Notice::ok(format!(
                "Approved: the agent may run this exact call of {} once, until {}.",
                hold.tool,
                hold.expires_at.format("%Y-%m-%d %H:%M UTC")
            )))
        } else {
            holds
                .deny(&Decider::console(&user.name), id, reason, now)
                .await
                .map_err(error)?;
            Ok(Notice::ok(
                "Denied: the call will not run, and what it reserved is released.",
            ))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn a_sensitive_argument_is_shown_only_as_its_digest() {
            let args = json!({"amount": 300, "token": "tok_4111111111111111"});
            let shown = arguments(&args, &["token".to_owned()]);
            let token = shown.iter().find(|a| a.name == "token").unwrap();
            assert!(token.digest);
            assert!(token.value.starts_with("sha256:"), "{}", token.value);
            assert!(!token.value.contains("4111"));
            let amount = shown.iter().find(|a| a.name == "amount").unwrap();
            assert_eq!((amount.value.as_str(), amount.digest), ("300", false));
        }

        #[test]
        fn a_span_reads_in_the_largest_sensible_units() {
            assert_eq!(span(-5), "under a minute");
            assert_eq!(span(59), "under a minute");
            assert_eq!(span(4 * 60 + 30), "4 min");
            assert_eq!(span(2 * 3600), "2 h");
            assert_eq!(span(2 * 3600 + 5 * 60), "2 h 5 min");
            assert_eq!(span(3 * 86400 + 2 * 3600), "3 d 2 h");
        }
    }
}
