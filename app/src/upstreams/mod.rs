//! Upstreams: the list, health checks, registration and tool sync.

pub mod api;
mod page;

pub use page::UpstreamsPage;
