//! Upstream connectors: the gateway's MCP client side, which runs downstream tools on real
//! MCP servers (stdio child processes or streamable HTTP endpoints) through rmcp.

mod client;
mod config;
mod connection;
mod error;
mod http;
mod identity;
mod pool;

pub use client::{CallOutcome, IdentityHook, UpstreamClient, UpstreamOptions};
pub use config::{
    CredentialSummary, InProcessServer, Secret, StoredUpstreamConfig, UpstreamConfig,
    UpstreamCredentials, check_extra_header,
};
pub use error::UpstreamError;
pub use http::{
    PooledHttp, install_crypto_provider, keep_alive_client, keep_alive_client_trusting,
    parse_ca_bundle,
};
pub use identity::spki_sha256;
pub use pool::UpstreamPool;
pub use rmcp::model::{CallToolResult, JsonObject};
