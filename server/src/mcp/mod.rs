//! The enforcing MCP endpoint at `/mcp`: rmcp's streamable HTTP transport, served
//! statelessly behind our own host, origin and agent-key checks, with the gateway's four
//! platform tools.

pub(crate) mod auth;
mod connection;
mod core_tasks;
mod failures;
mod handler;
mod refusals;
mod skills;
mod tasks;
mod tools;
mod trace;
pub mod workspaces;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use skillgate_core::metrics::Metrics;
use skillgate_core::slug::Slug;
use tower_http::limit::RequestBodyLimitLayer;

use self::handler::McpHandler;
use self::workspaces::Workspaces;

pub const MCP_PATH: &str = "/mcp";
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The address the server listens on: a loopback bind turns on the DNS-rebinding check.
    pub bind: SocketAddr,
    /// Admit requests without an `Authorization` header into this scope (loopback only).
    pub anonymous_scope: Option<Slug>,
    /// Browser origins allowed besides loopback ones (`scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    /// Larger request bodies get 413.
    pub max_body_bytes: usize,
    /// The authorization server whose access tokens `/mcp` accepts, when it is on.
    pub oauth: Option<skillgate_core::oauth::OAuthService>,
    /// The company's identity providers whose access tokens (JWTs) `/mcp` accepts
    /// (`serve --trusted-issuers`).
    pub issuers: Option<skillgate_core::issuers::TrustedIssuers>,
    /// Where a 401 points clients for `/mcp`'s resource metadata (RFC 9728), when it is
    /// served.
    pub resource_metadata_url: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum McpOptionsError {
    #[error(
        "--anonymous-scope is only allowed on a loopback bind (127.0.0.1, ::1), not on {0}: \
         anyone who can reach the port would get that scope without a key"
    )]
    AnonymousScopeNotLoopback(SocketAddr),
    #[error("the MCP request body limit must be at least 1 KiB, not {0} bytes")]
    BodyLimitTooSmall(usize),
    #[error(
        "--allowed-origin `{0}` is not an origin; write scheme://host[:port], e.g. https://agents.example.com"
    )]
    BadOrigin(String),
}

impl McpOptions {
    /// Refuses options that would open the endpoint wider than intended; call at startup.
    pub fn validate(&self) -> Result<(), McpOptionsError> {
        if self.anonymous_scope.is_some() && !self.bind.ip().is_loopback() {
            return Err(McpOptionsError::AnonymousScopeNotLoopback(self.bind));
        }
        if self.max_body_bytes < 1024 {
            return Err(McpOptionsError::BodyLimitTooSmall(self.max_body_bytes));
        }
        if let Some(bad) = self.allowed_origins.iter().find(|o| !is_origin(o)) {
            return Err(McpOptionsError::BadOrigin(bad.clone()));
        }
        Ok(())
    }
}

fn is_origin(text: &str) -> bool {
    text.parse::<http::Uri>().is_ok_and(|uri| {
        uri.scheme().is_some()
            && uri.host().is_some()
            && uri.path_and_query().is_none_or(|pq| pq.as_str() == "/")
    })
}

/// The `/mcp` route, ready to merge into the server's router.
///
/// Host, Origin and agent key are checked by our middleware on every request; rmcp's own
/// Host and Origin checks are turned off so there is one policy, and its body limit is set
/// to ours. [`trace`] opens each request's trace span; [`refusals`] audits the governed
/// requests rmcp refuses before the handler runs; innermost, [`core_tasks`] speaks the
/// 2025-11-25 tasks wire, which rmcp does not. rmcp runs without sessions (no worker per client) and answers plain JSON where
/// it can; [`connection`] gives clients the connection label the gateway's fallback needs.
pub fn router(workspaces: Arc<Workspaces>, options: McpOptions) -> Router {
    let gateway_metrics = workspaces.default_workspace().gateway.metrics().clone();
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(options.max_body_bytes);
    // The handler holds nothing: each request carries its workspace's gateway, put there
    // by admission.
    let mcp = StreamableHttpService::new(
        || Ok(McpHandler),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let admission = admission(workspaces, options.oauth.clone(), &options, gateway_metrics);
    Router::new()
        .route_service(MCP_PATH, mcp)
        .route_layer(axum::middleware::from_fn(core_tasks::serve))
        .route_layer(axum::middleware::from_fn(refusals::audit))
        .route_layer(axum::middleware::from_fn(trace::request_span))
        .route_layer(axum::middleware::from_fn_with_state(
            options.max_body_bytes,
            connection::label,
        ))
        .route_layer(RequestBodyLimitLayer::new(options.max_body_bytes))
        .route_layer(axum::middleware::from_fn_with_state(admission, auth::admit))
}

/// The admission checks of `/mcp` (Host, Origin, agent key), shared with `/api/v1`.
pub(crate) fn admission(
    workspaces: Arc<Workspaces>,
    oauth: Option<skillgate_core::oauth::OAuthService>,
    options: &McpOptions,
    metrics: Arc<Metrics>,
) -> Arc<auth::Admission> {
    Arc::new(auth::Admission {
        metrics,
        workspaces,
        loopback_bind: options.bind.ip().is_loopback(),
        allowed_origins: options.allowed_origins.clone(),
        anonymous_scope: options.anonymous_scope.clone(),
        oauth,
        issuers: options.issuers.clone(),
        resource_metadata_url: options.resource_metadata_url.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(bind: &str) -> McpOptions {
        McpOptions {
            bind: bind.parse().unwrap(),
            anonymous_scope: None,
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            oauth: None,
            issuers: None,
            resource_metadata_url: None,
        }
    }

    #[test]
    fn an_anonymous_scope_is_refused_on_a_non_loopback_bind() {
        let mut public = options("0.0.0.0:3000");
        public.anonymous_scope = Some(Slug::parse("support").unwrap());
        assert_eq!(
            public.validate(),
            Err(McpOptionsError::AnonymousScopeNotLoopback(public.bind))
        );
        let mut local = options("127.0.0.1:3000");
        local.anonymous_scope = Some(Slug::parse("support").unwrap());
        assert_eq!(local.validate(), Ok(()));
        let mut v6 = options("[::1]:3000");
        v6.anonymous_scope = Some(Slug::parse("support").unwrap());
        assert_eq!(v6.validate(), Ok(()));
    }

    #[test]
    fn allowed_origins_must_be_origins() {
        let mut opts = options("0.0.0.0:3000");
        opts.allowed_origins = vec!["https://agents.example.com".into(), "http://h:8080".into()];
        assert_eq!(opts.validate(), Ok(()));
        opts.allowed_origins = vec!["agents.example.com".into()];
        assert!(matches!(
            opts.validate(),
            Err(McpOptionsError::BadOrigin(_))
        ));
        opts.allowed_origins = vec!["https://a.example.com/path".into()];
        assert!(matches!(
            opts.validate(),
            Err(McpOptionsError::BadOrigin(_))
        ));
    }

    #[test]
    fn a_body_limit_below_one_kibibyte_is_refused() {
        let mut opts = options("127.0.0.1:0");
        assert_eq!(opts.validate(), Ok(()));
        opts.max_body_bytes = 10;
        assert_eq!(opts.validate(), Err(McpOptionsError::BodyLimitTooSmall(10)));
    }
}
