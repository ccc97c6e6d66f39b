//! Limits of a role or a scope: the editor both editors embed, and its server functions.

pub mod api;
pub(crate) mod editor;
