//! OAuth: the consent page and the connected clients (grants) page.

pub mod api;
mod connected;
mod consent;

pub use connected::ConnectedPage;
pub use consent::ConsentPage;
