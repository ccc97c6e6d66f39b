//! `/api/v1`: the HTTP API. Two kinds of caller, each with its own credential:
//!
//! - agents propose skill revisions ([`candidates`]) with their agent key, admitted by the
//!   same Host, Origin and key checks as `/mcp`;
//! - people and their automation list and decide approval holds ([`holds`]) with a console
//!   user's API token. The API takes no cookie, so it needs no CSRF token.

mod candidates;
mod error;
mod holds;

use std::sync::Arc;

use axum::Router;
use skillgate_core::api_tokens::ApiTokens;
use skillgate_core::holds::Holds;
use skillgate_core::metrics::Metrics;

use crate::mcp::McpOptions;
use crate::mcp::workspaces::Workspaces;

/// The `/api/v1` routes, ready to merge into the server's router. Holds are the `default`
/// workspace's, as the console's are, until people belong to workspaces (issue #59).
pub fn router(
    workspaces: Arc<Workspaces>,
    options: &McpOptions,
    metrics: Arc<Metrics>,
    holds: Holds,
    tokens: ApiTokens,
) -> Router {
    candidates::router(workspaces, options, metrics).merge(holds::router(holds, tokens))
}
