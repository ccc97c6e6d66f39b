//! Notifications: where approvers hear of holds (signed webhooks, email), and the delivery
//! log.

pub mod api;
mod forms;
mod page;

pub use page::NotifiersPage;
