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
//! What a replay cannot know it does not guess: a call whose outcome the two catalogs
//! disagree on is *not decidable* when one of its arguments is stored only as a digest
//! (a sensitive argument), or when a step-order guard of the call waits on a call that ran
//! only in the replay (its success is unknown) or reads a prerequisite's result (the log
//! keeps only its digest).
//!
//! Replay reads: it never writes the catalog, the sessions or the audit.

mod replay;
mod report;

pub use replay::replay;
pub use report::{Change, ReplayReport, Subject, Undecidable, Verdict};
