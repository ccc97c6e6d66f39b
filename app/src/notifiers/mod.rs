//! Notifications: where approvers hear of holds (signed webhooks), and the delivery log.

pub mod api;
mod page;

pub use page::NotifiersPage;
