//! Connect an agent: a key, the client configuration, and a first call tried in place.

pub mod api;
mod page;

pub use page::ConnectPage;
