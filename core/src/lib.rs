//! Skillgate's domain core.
//!
//! Everything the two doors (the MCP endpoint and the admin console) share lives here:
//! the catalog model, limits, the pure policy engine, governance sessions, the audit
//! chain, skill revisions, the store (all SQL) and upstream connectors. Nothing in this
//! crate knows about HTTP, Leptos or MCP framing.

pub mod admin;
pub mod api_tokens;
pub mod audit;
pub mod catalog_code;
pub mod compliance;
pub mod console_sso;
pub mod demo;
pub mod gateway;
pub mod holds;
pub mod inspect;
pub mod issuers;
pub mod keys;
pub mod limited_read;
pub mod metrics;
pub mod model;
pub mod names;
pub mod oauth;
pub mod policy;
pub mod revisions;
pub mod slug;
pub mod store;
pub mod trace;
pub mod upstream;
pub mod users;
pub mod whatif;
