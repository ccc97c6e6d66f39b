//! Console users: the list, add, change role, disable.

pub mod api;
mod page;

pub use page::UsersPage;
