//! Skillgate's own OAuth 2.1 authorization server, for its own `/mcp` only.
//!
//! MCP clients that follow the specification's authorization (discovery from a 401, client
//! registration, a browser sign-in with PKCE) get a token without anyone pasting a key:
//!
//! - **Clients** register dynamically (RFC 7591) or are known by a Client ID Metadata
//!   Document (the `client_id` is an https URL the server fetches); either can be turned
//!   off. Redirect URIs match exactly, except the port of an `http` loopback one (RFC 8252).
//! - **Authorization code with PKCE S256 only.** The request is checked, kept server-side,
//!   and the person signs in to the console and consents there, picking one of the scopes
//!   an admin allowed them ([`crate::admin::AdminService::set_user_scopes`]).
//! - **A consent is a credential**: an `agent_keys` row of kind `oauth`, so sessions,
//!   holds, rate limits and the audit see a grant exactly as a key, and revoking it (by the
//!   person, an admin, or the client) ends its tokens on the next request.
//! - **Tokens are opaque** 256-bit secrets stored as SHA-256, like keys: an access token is
//!   looked up on every request anyway, to honour revocation at once, so a signed token
//!   would add key management and no speed. Access tokens are short-lived and bound to this
//!   server's `/mcp` (RFC 8707); refresh tokens rotate, and a replayed one revokes its grant.

mod client;
mod error;
mod service;

pub use client::{ClientInfo, Registration};
pub use error::{AuthorizeError, OAuthError};
pub use service::{
    AuthorizeRequest, ClientAuth, ConsentDecision, ConsentRequest, OAuthCaller, OAuthService,
    TokenRequest, TokenResponse,
};

use std::time::Duration;

/// Prefixes of the secrets the authorization server makes (see [`crate::keys`]).
pub const ACCESS_TOKEN_PREFIX: &str = "sga_";
pub const REFRESH_TOKEN_PREFIX: &str = "sgr_";
const CODE_PREFIX: &str = "sgo_";
const CLIENT_ID_PREFIX: &str = "sgc_";
const CLIENT_SECRET_PREFIX: &str = "sgs_";

/// How the authorization server is configured (`serve --oauth-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The issuer: the address clients reach Skillgate at, without a trailing slash
    /// (`https://skillgate.example.com`). The protected resource is `{issuer}/mcp`.
    pub issuer: String,
    /// Dynamic client registration (RFC 7591) at `/oauth/register`.
    pub dynamic_registration: bool,
    /// Clients identified by a Client ID Metadata Document URL.
    pub metadata_documents: bool,
    /// Also fetch metadata documents from `http://` loopback URLs (development only).
    pub loopback_metadata_documents: bool,
    pub access_token_ttl: Duration,
    pub refresh_token_ttl: Duration,
    /// The company's identity providers `/mcp` also accepts tokens of
    /// (`serve --trusted-issuers`), listed in the resource metadata beside this server.
    pub external_issuers: Vec<String>,
}

impl OAuthSettings {
    /// Settings for `issuer` with the defaults: both registrations on, 15-minute access
    /// tokens, 30-day refresh tokens.
    pub fn new(issuer: &str) -> Self {
        Self {
            issuer: issuer.trim_end_matches('/').to_owned(),
            dynamic_registration: true,
            metadata_documents: true,
            loopback_metadata_documents: false,
            access_token_ttl: Duration::from_secs(15 * 60),
            refresh_token_ttl: Duration::from_secs(30 * 24 * 3600),
            external_issuers: Vec::new(),
        }
    }

    /// The one resource tokens are issued for: this server's MCP endpoint.
    pub fn resource(&self) -> String {
        format!("{}/mcp", self.issuer)
    }

    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }

    /// RFC 8414 authorization server metadata.
    pub fn metadata(&self) -> serde_json::Value {
        let mut metadata = serde_json::json!({
            "issuer": self.issuer,
            "authorization_endpoint": self.endpoint("/oauth/authorize"),
            "token_endpoint": self.endpoint("/oauth/token"),
            "revocation_endpoint": self.endpoint("/oauth/revoke"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported":
                ["none", "client_secret_post", "client_secret_basic"],
            "revocation_endpoint_auth_methods_supported":
                ["none", "client_secret_post", "client_secret_basic"],
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": self.metadata_documents,
            "service_documentation": self.endpoint("/connect"),
        });
        if self.dynamic_registration {
            metadata["registration_endpoint"] = self.endpoint("/oauth/register").into();
        }
        metadata
    }

    /// RFC 9728 protected resource metadata of `/mcp`: this server's authorization server
    /// when `on`, and the trusted external issuers.
    pub fn resource_metadata(&self, on: bool) -> serde_json::Value {
        let servers: Vec<&str> = on
            .then_some(self.issuer.as_str())
            .into_iter()
            .chain(self.external_issuers.iter().map(String::as_str))
            .collect();
        serde_json::json!({
            "resource": self.resource(),
            "authorization_servers": servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "Skillgate",
            "resource_documentation": self.endpoint("/connect"),
        })
    }

    /// Where a 401 from `/mcp` points clients (`WWW-Authenticate: … resource_metadata`).
    pub fn resource_metadata_url(&self) -> String {
        self.endpoint("/.well-known/oauth-protected-resource/mcp")
    }
}
