//! The authorization server's errors: each is one of the error codes of RFC 6749 §5.2,
//! RFC 7591 §3.2.2 or RFC 8707, with a description for the client's developer.

use crate::admin::AdminError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidClient(String),
    #[error("{0}")]
    InvalidGrant(String),
    #[error("{0}")]
    UnauthorizedClient(String),
    #[error("{0}")]
    UnsupportedGrantType(String),
    #[error("{0}")]
    UnsupportedResponseType(String),
    #[error("{0}")]
    InvalidScope(String),
    /// RFC 8707: the `resource` is not this server's `/mcp`.
    #[error("{0}")]
    InvalidTarget(String),
    #[error("{0}")]
    AccessDenied(String),
    #[error("{0}")]
    InvalidRedirectUri(String),
    #[error("{0}")]
    InvalidClientMetadata(String),
    /// The registration kind the request needs is turned off on this server.
    #[error("{0}")]
    Disabled(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Admin(#[from] AdminError),
}

impl OAuthError {
    /// The `error` code of the response.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidClient(_) => "invalid_client",
            Self::InvalidGrant(_) => "invalid_grant",
            Self::UnauthorizedClient(_) => "unauthorized_client",
            Self::UnsupportedGrantType(_) => "unsupported_grant_type",
            Self::UnsupportedResponseType(_) => "unsupported_response_type",
            Self::InvalidScope(_) => "invalid_scope",
            Self::InvalidTarget(_) => "invalid_target",
            Self::AccessDenied(_) => "access_denied",
            Self::InvalidRedirectUri(_) => "invalid_redirect_uri",
            Self::InvalidClientMetadata(_) => "invalid_client_metadata",
            Self::Disabled(_) => "unauthorized_client",
            Self::Store(_) | Self::Admin(_) => "server_error",
        }
    }

    /// The HTTP status of the response at the token, registration and revocation endpoints.
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidClient(_) => 401,
            Self::Store(_) => 500,
            Self::Admin(error) if !error.is_user_error() => 500,
            _ => 400,
        }
    }

    /// The `error_description`: never a database detail.
    pub fn description(&self) -> String {
        match self {
            Self::Store(_) => "the authorization server cannot answer right now".to_owned(),
            Self::Admin(error) if !error.is_user_error() => {
                "the authorization server cannot answer right now".to_owned()
            }
            other => other.to_string(),
        }
    }

    /// The JSON error body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": self.code(), "error_description": self.description()})
    }
}

/// How a refused authorization request is answered.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// Shown to the person, never redirected: the client or its redirect URI could not be
    /// trusted, so sending the browser there would make Skillgate an open redirector.
    #[error("{0}")]
    Show(OAuthError),
    /// Sent back to the client: the redirect URI (error, description, state and issuer in
    /// its query).
    #[error("redirect to the client with an error")]
    Redirect(String),
}
