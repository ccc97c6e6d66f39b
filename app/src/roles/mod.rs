//! Roles: the list, one role, and its editor.

pub mod api;
mod edit;
mod list;
pub mod read;

pub use edit::{NewRolePage, RoleEditPage};
pub use list::{RolePage, RolesPage};
