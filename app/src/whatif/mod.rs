//! "What would change": the panel beside a policy editor's save button. The edit is
//! replayed against the last days of audited calls before it is saved, and the calls whose
//! outcome would flip are shown grouped by rule, role, tool and key, each linking to its
//! place in the session's timeline.

pub mod api;
mod panel;

pub use panel::WhatIf;
