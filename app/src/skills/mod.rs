//! Skills: the list, one skill, its editor and its versions.

pub mod api;
mod edit;
mod list;
pub mod read;

pub use edit::{SkillEditPage, SkillVersionPage};
pub use list::{SkillPage, SkillsPage};
