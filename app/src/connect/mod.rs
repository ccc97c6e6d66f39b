//! Connect an agent: a key, the client configuration, and a first call tried in place.

pub mod api;
#[cfg(feature = "ssr")]
mod configs;
mod page;

pub use page::ConnectPage;
