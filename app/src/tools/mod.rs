//! Tools: the list, one tool, its sensitive arguments and its pin.

pub mod api;
pub(crate) mod edit;
mod list;
pub mod pins;
pub mod read;

pub use list::{ToolPage, ToolsPage};
