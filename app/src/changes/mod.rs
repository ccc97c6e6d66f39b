//! The change log of one catalog entity.

pub mod api;
mod page;

pub use page::ChangesPage;
