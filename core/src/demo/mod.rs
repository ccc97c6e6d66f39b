//! The demo catalog: the customer-support company of the Skilder paper.

pub mod catalog;
pub mod tools;
