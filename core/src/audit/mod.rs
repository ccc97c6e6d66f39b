//! The tamper-evident audit log: one hash chain of every init, learn, decision, result,
//! feedback and admin change.
//!
//! # The hash, precisely (for verifiers outside Skillgate)
//!
//! Each event `n` stores `seq, at, session_id, kind, actor, payload, prev_hash, hash`, and
//!
//! ```text
//! hash(n)      = lowercase_hex( SHA-256( canonical(n) || bytes(prev_hash(n)) ) )
//! prev_hash(n) = hash(n - 1);  prev_hash(1) = "0" × 64 (the genesis)
//! ```
//!
//! where `bytes(prev_hash)` is the 32 raw bytes the 64 hex digits stand for, and
//! `canonical(n)` is the UTF-8 canonical JSON of the object with exactly the keys
//! `actor, at, kind, payload, seq, session_id`:
//!
//! - object keys sorted by Unicode code point (= UTF-8 byte order), at every depth;
//! - no whitespace outside strings;
//! - strings: `"` and `\` escaped as `\"` and `\\`; U+0008, U+000C, U+000A, U+000D, U+0009
//!   as `\b \f \n \r \t`; other characters below U+0020 as `\u00xx` (lowercase hex);
//!   everything else, including non-ASCII, as raw UTF-8;
//! - numbers written as their JSON literal, unchanged (Skillgate never rewrites a number;
//!   a verifier must keep the literal text, e.g. `2.50` stays `2.50`);
//! - `seq` a plain decimal integer; `at` an RFC 3339 UTC string with microseconds and `Z`
//!   (`2026-11-30T05:44:42.123456Z`); `kind` the snake_case event kind; `session_id` and
//!   `actor` a string or `null`.
//!
//! For example `{"actor":"support-key","at":"2026-11-30T05:44:42.123456Z","kind":"call_allowed","payload":{"role":"refunds","tool":"issue_refund"},"seq":7,"session_id":"s-1"}`.
//! The stored `payload` column holds the canonical payload text, so a JSONL export's
//! `payload` re-canonicalizes to the same bytes. Python reproduces this with
//! `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` as long as
//! numbers are kept as literals.
//!
//! Verification ([`chain::ChainVerifier`]) names the first event that was changed, removed
//! or reordered. What a chain alone cannot show (its newest events deleted, its oldest
//! deleted behind a hand-made retention anchor) the signed checkpoints and prune events of
//! [`checkpoint`] do: [`verify_integrity`] checks both.

pub mod chain;
pub mod checkpoint;
mod event;
pub mod export;
mod log;
mod redact;

pub use chain::{BadEvent, BadReason, ChainVerifier, GENESIS_HASH, VerifyReport, canonical_json};
pub use checkpoint::{
    CheckpointProblem, CheckpointReport, CheckpointSigner, Extent, IntegrityReport, KeyError,
    KeyOrigin, PruneError, PrunedRange, PublicKey, TrustedKeys, verify_integrity,
};
pub use event::{AppendedEvent, AuditEvent, CallOutcome, FindingRecord, InspectedPart, NewEvent};
pub use export::{ExportFilter, ExportFormat, verify_exported_jsonl, verify_exported_jsonl_from};
pub use log::{AuditError, AuditLog, Change};
pub use redact::{redact_sensitive, redact_sensitive_fields};

pub use crate::names::{EventKind, UnknownKind};
pub use crate::store::audit::{Anchor, AuditRow, Checkpoint, Pruned, TipCheckpoint};
