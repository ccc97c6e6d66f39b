//! Holds: calls waiting for a person's decision.

pub mod api;
mod page;

pub use page::{HoldPage, HoldsPage};
