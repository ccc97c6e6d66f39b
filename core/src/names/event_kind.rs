//! The kind of an audit event, the one place its stored (and exported) name is spelled.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What happened. Stored, hashed and serialized as its [`EventKind::as_str`] name, e.g.
/// `call_allowed`; readers parse that name back with [`FromStr`] and match on variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    SessionStarted,
    LearnGranted,
    LearnDenied,
    CallAllowed,
    CallDenied,
    CallResult,
    Feedback,
    AdminChange,
    /// Retention deleted a range of older events (see `audit::NewEvent::audit_pruned`).
    AuditPruned,
    /// A call every limit allowed but that waits for a reviewer's approval.
    CallHeld,
    HoldApproved,
    HoldDenied,
    /// A hold that was not decided, or not run once approved, in time; its usage is released.
    HoldExpired,
    /// A key read a skill file through the MCP Skills extension (outside any session:
    /// reading unlocks nothing).
    SkillRead,
    /// An admin-side request that was refused and changed nothing (a catalog file or a
    /// skill bundle that is too big, malformed or not allowed): who tried what, and why.
    /// Not an `admin_change`, so an entity's change log lists only changes.
    AdminRefused,
    /// What the content inspectors found in one governed call's arguments or result: each
    /// finding's inspector, kind, place and the action taken; a secret only by fingerprint.
    InspectionFinding,
    /// The agent withdrew a hold by cancelling the task that waited on it; its usage is
    /// released and nothing ran.
    HoldWithdrawn,
    /// Someone replayed the audit against a proposed catalog (what-if): who, over which
    /// window, against which file, and what it found. It changed nothing.
    WhatIfReplay,
    /// An announcement of a hold to its approvers (a webhook) could not be delivered after
    /// every retry. It changed no decision.
    HoldNotificationFailed,
}

impl EventKind {
    pub const ALL: [EventKind; 19] = [
        EventKind::SessionStarted,
        EventKind::LearnGranted,
        EventKind::LearnDenied,
        EventKind::CallAllowed,
        EventKind::CallDenied,
        EventKind::CallResult,
        EventKind::Feedback,
        EventKind::AdminChange,
        EventKind::AuditPruned,
        EventKind::CallHeld,
        EventKind::HoldApproved,
        EventKind::HoldDenied,
        EventKind::HoldExpired,
        EventKind::SkillRead,
        EventKind::AdminRefused,
        EventKind::InspectionFinding,
        EventKind::HoldWithdrawn,
        EventKind::WhatIfReplay,
        EventKind::HoldNotificationFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SessionStarted => "session_started",
            EventKind::LearnGranted => "learn_granted",
            EventKind::LearnDenied => "learn_denied",
            EventKind::CallAllowed => "call_allowed",
            EventKind::CallDenied => "call_denied",
            EventKind::CallResult => "call_result",
            EventKind::Feedback => "feedback",
            EventKind::AdminChange => "admin_change",
            EventKind::AuditPruned => "audit_pruned",
            EventKind::CallHeld => "call_held",
            EventKind::HoldApproved => "hold_approved",
            EventKind::HoldDenied => "hold_denied",
            EventKind::HoldExpired => "hold_expired",
            EventKind::SkillRead => "skill_read",
            EventKind::AdminRefused => "admin_refused",
            EventKind::InspectionFinding => "inspection_finding",
            EventKind::HoldWithdrawn => "hold_withdrawn",
            EventKind::WhatIfReplay => "what_if_replay",
            EventKind::HoldNotificationFailed => "hold_notification_failed",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit event kind `{0}`")]
pub struct UnknownKind(pub String);

impl FromStr for EventKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

impl From<EventKind> for &'static str {
    fn from(kind: EventKind) -> Self {
        kind.as_str()
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_stored_name() {
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>().unwrap(), kind);
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
            assert_eq!(
                serde_json::from_value::<EventKind>(serde_json::json!(kind.as_str())).unwrap(),
                kind
            );
        }
        assert!("CallAllowed".parse::<EventKind>().is_err());
    }

    #[test]
    fn the_stored_names_are_the_ones_existing_chains_hold() {
        let names: Vec<&str> = EventKind::ALL.iter().map(|kind| kind.as_str()).collect();
        assert_eq!(
            names,
            [
                "session_started",
                "learn_granted",
                "learn_denied",
                "call_allowed",
                "call_denied",
                "call_result",
                "feedback",
                "admin_change",
                "audit_pruned",
                "call_held",
                "hold_approved",
                "hold_denied",
                "hold_expired",
                "skill_read",
                "admin_refused",
                "inspection_finding",
                "hold_withdrawn",
                "what_if_replay",
                "hold_notification_failed",
            ]
        );
    }
}
