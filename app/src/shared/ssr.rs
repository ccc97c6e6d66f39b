//! Server-side plumbing shared by the server functions and the server binary.

use http::StatusCode;
use leptos::prelude::*;
use leptos_axum::ResponseOptions;
use std::sync::Arc;

use skillgate_core::admin::AdminService;
use skillgate_core::keys::AgentKeys;
use skillgate_core::oauth::OAuthService;
use skillgate_core::policy::CatalogHandle;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, ConsoleUser, Users};

use crate::shared::ConsoleError;

/// The session key under which the signed-in console user's id is stored.
///
/// The id is stored as a *string*: the workspace enables serde_json's
/// `arbitrary_precision` (exact decimal amounts in the policy engine), which encodes
/// JSON numbers as a private struct that the session store's MessagePack codec
/// cannot read back.
pub const USER_ID_KEY: &str = "console_user_id";

/// The signed-in console user's id, if any.
pub async fn session_user_id(
    session: &tower_sessions::Session,
) -> Result<Option<i64>, tower_sessions::session::Error> {
    Ok(session
        .get::<String>(USER_ID_KEY)
        .await?
        .and_then(|id| id.parse().ok()))
}

/// Core services the console needs, provided to every render and server function.
#[derive(Clone)]
pub struct ConsoleContext {
    pub store: Store,
    pub users: Users,
    pub keys: AgentKeys,
    /// The compiled catalog the MCP endpoint decides with; swapped on every save.
    pub catalog: Arc<CatalogHandle>,
    /// Catalog saves: validate, store, audit, swap the snapshot above.
    pub authoring: Arc<AdminService>,
    /// Health checks and tool sync of the gateway's upstream connections.
    pub upstreams: Arc<dyn UpstreamOps>,
    /// The authorization server: consent requests, grants, per-user scopes.
    pub oauth: OAuthService,
    /// What the sign-in page offers (single sign-on, passwords).
    pub sign_in: crate::login::SignInOptions,
    pub version: &'static str,
}

/// What the console may ask of the running gateway's upstream connections. The server
/// binary implements it, because the connection pool and the sync live there.
pub trait UpstreamOps: Send + Sync {
    /// Pings the upstream (starting it if needed): round-trip milliseconds, or why not.
    fn health(
        &self,
        upstream: String,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<u64, String>> + Send>>;
    /// What the last sync of this server process reported (empty before the first).
    fn last_sync(&self) -> Vec<crate::shared::SyncSummary>;
    /// Lists every upstream's tools, saves them and swaps the catalog snapshot.
    fn sync(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Vec<crate::shared::SyncSummary>> + Send>>;
}

pub fn context() -> ConsoleContext {
    expect_context::<ConsoleContext>()
}

/// Logs the cause on the server and gives the browser nothing but a generic message.
pub fn internal(error: impl std::fmt::Display) -> ConsoleError {
    tracing::error!(%error, "console server function failed");
    ConsoleError::Internal
}

fn set_status(status: StatusCode) {
    if let Some(response) = use_context::<ResponseOptions>() {
        response.set_status(status);
    }
}

pub async fn current_user() -> Result<Option<ConsoleUser>, ConsoleError> {
    let session: tower_sessions::Session = leptos_axum::extract().await.map_err(internal)?;
    let Some(id) = session_user_id(&session).await.map_err(internal)? else {
        return Ok(None);
    };
    let user = context().users.get(id).await.map_err(internal)?;
    Ok(user.filter(|u| !u.disabled))
}

/// The signed-in user if their console role includes `needed`; otherwise an error, and
/// the page's HTTP status becomes 401 or 403.
pub async fn require(needed: ConsoleRole) -> Result<ConsoleUser, ConsoleError> {
    match current_user().await? {
        None => {
            set_status(StatusCode::UNAUTHORIZED);
            Err(ConsoleError::Unauthorized)
        }
        Some(user) if !user.role.allows(needed) => {
            let refused = ConsoleError::Forbidden {
                needed: needed.to_string(),
                actual: user.role.to_string(),
            };
            audit_forbidden(&user, &refused).await?;
            set_status(StatusCode::FORBIDDEN);
            Err(refused)
        }
        Some(user) => Ok(user),
    }
}

/// Puts a signed-in user's request that their console role does not allow on the record
/// (`admin_refused`, action `console.call`, the request's path as target), before they
/// hear of it; if it cannot be recorded, they get an internal error instead.
async fn audit_forbidden(user: &ConsoleUser, refused: &ConsoleError) -> Result<(), ConsoleError> {
    let path = use_context::<http::request::Parts>()
        .map(|parts| parts.uri.path().to_owned())
        .unwrap_or_default();
    context()
        .authoring
        .record_refusal(
            &user.name,
            "console.call",
            &format!("console:{path}"),
            "FORBIDDEN",
            &refused.to_string(),
        )
        .await
        .map_err(internal)
}
