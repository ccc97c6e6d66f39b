//! Compliance: sessions, their timelines, the audit log and its verification.

pub mod api;
pub(crate) mod charts;
mod sessions;

pub use sessions::{AuditPage, SessionPage, SessionsPage};
