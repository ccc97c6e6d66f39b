//! UI shared by the features: the console frame and its navigation, forms, flash notices,
//! the CSRF field, catalog building blocks, and the loading and error states every page
//! shows. Components import only `shared`, never a feature.

pub mod catalog;
pub mod csrf;
pub mod flash;
pub mod forms;
mod layout;
mod loading;
pub mod markdown;
mod nav;
mod not_found;

pub use layout::{ConsoleLayout, Routing};
pub use loading::{ErrorNotice, Loading, RoutingProgress};
pub use not_found::NotFound;
