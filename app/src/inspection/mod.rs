//! Inspectors: the catalog's inspection policy, its effective defaults and its rules.

pub mod api;
mod page;
mod sources;

pub use page::InspectorsPage;
