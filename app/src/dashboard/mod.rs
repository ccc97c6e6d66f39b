//! The dashboard: who is signed in, the gateway's health, pending work.

pub mod api;
mod page;

pub use page::Dashboard;
