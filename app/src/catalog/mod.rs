//! What the catalog features (roles, skills, tools, scopes, limits) share: the read-only
//! server functions over the live snapshot, the editors' wire types, and the server-side
//! helpers their server functions use. Nothing here imports a feature.

pub mod api;
#[cfg(feature = "ssr")]
pub mod authoring;
mod editing;

pub use editing::*;
