//! Scopes and agent keys: the list, the scope editor, key creation and revocation.

pub mod api;
pub(crate) mod edit;
pub mod keys;
mod list;
pub mod read;

pub use edit::{NewScopePage, ScopeEditPage};
pub use list::ScopesPage;
