//! What-if: the audited calls decided again under a proposed catalog, to see what a change
//! would break (or open) before it is applied.
//!
//! The audit holds every decision with its inputs (the session's scope and key, the roles it
//! learned, each call's tool and arguments, what ran and whether it succeeded, each hold's
//! fate), and `decide` is pure with the clock passed in. [`replay`] walks a log in order and
//! runs each session twice through the same simulation: under the catalog in force and
//! under the proposed one, each with its own session state (learned roles, usage toward
//! caps, step-guard history, holds), so a call that changes outcome changes the usage the
//! session's later calls are decided with. A call is reported when the two simulations
//! disagree and the proposed outcome differs from what the log recorded. Comparing two
//! simulations, rather than one simulation against the log, cancels what no replay can
//! know and no catalog decided (an inspector's block, an upstream's failure).
//!
//! What a replay cannot know it does not guess: a call is *not decidable* when one of its
//! arguments is stored only as a digest (a sensitive argument) and what reads it differs
//! between the catalogs, or when the catalogs disagree on it and a step-order guard of the
//! call waits on a call that ran only in the replay (its success is unknown) or reads a
//! prerequisite's result the proposal reads differently (the log keeps results only as
//! digests; where the catalog in force let a call past such a guard, the log proves the
//! result matched, and both simulations are given that success).
//!
//! Replay reads: it never writes the catalog or the sessions, and [`replay_stored`] writes
//! only its own `what_if_replay` audit event.

mod render;
mod replay;
mod report;
mod run;
mod window;

pub use render::Group;
pub use replay::{Replayer, replay};
pub use report::{Change, ReplayReport, Subject, Undecidable, Verdict};
pub use run::{ReplayRequest, replay_stored};
pub use window::Window;

use crate::audit::AuditError;
use crate::store::StoreError;

/// Why a replay was not run; nothing was changed or audited.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error(
        "`{0}` is not a window: write a whole number of hours or days, e.g. 1h, 24h, 7d or 30d (at most 366d)"
    )]
    BadWindow(String),
    #[error("no audited calls in the last {window} (since {from}): there is nothing to replay")]
    EmptyWindow { window: String, from: String },
    #[error(
        "the window starts at {from}, but the audit keeps events only from {kept} on (older ones were pruned): choose a shorter window"
    )]
    BeyondRetention { from: String, kept: String },
    #[error("no session `{0}` in the audit")]
    UnknownSession(String),
    #[error("name at least one session to replay")]
    NoSessions,
    #[error("the audit could not be read: {0}")]
    Store(#[from] StoreError),
    #[error("the replay could not be audited: {0}")]
    Audit(#[from] AuditError),
}
