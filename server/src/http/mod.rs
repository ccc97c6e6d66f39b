//! The HTTP side of `serve`: one router per area (the console's sign-in, exports and
//! uploads, compliance, OAuth, the REST API, health, metrics), merged with the `/mcp` router
//! by [`router`] under the console's and the whole server's layers.

pub mod api;
pub mod bundle_upload;
pub mod compliance;
pub mod console_auth;
pub mod console_body;
pub mod console_errors;
pub mod console_guard;
pub mod console_sso;
pub mod export;
pub mod health;
pub mod metrics;
pub mod oauth;

use std::sync::Arc;

use axum::Router;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use skillgate_app::connect::api::ssr::ConnectContext;
use skillgate_app::preload::ssr::SplitManifest;
use skillgate_app::shared::ssr::ConsoleContext;
use skillgate_app::{App, shell};
use skillgate_core::audit::{CheckpointSigner, TrustedKeys};
use skillgate_core::holds::Holds;
use skillgate_core::metrics::Metrics;
use skillgate_core::oauth::OAuthService;
use skillgate_core::revisions::Revisions;
use skillgate_core::store::ConsoleSessionStore;
use tower_http::trace::TraceLayer;
use tower_sessions::SessionManagerLayer;

use crate::client_addr::{self, TrustedProxies};
use crate::state::AppState;

/// What [`router`] serves: the console's state and contexts, its session and guard
/// settings, and the routers built beside it.
pub struct Parts {
    pub state: AppState,
    /// Provided to the console's pages and server functions.
    pub console: ConsoleContext,
    pub revisions: Revisions,
    pub holds: Holds,
    pub trusted_keys: TrustedKeys,
    pub connect: ConnectContext,
    /// Which bundle modules each lazy page needs; `None` when the site has no split bundle.
    pub split_manifest: Option<SplitManifest>,
    pub sessions: SessionManagerLayer<ConsoleSessionStore>,
    pub session_limits: console_auth::SessionLimits,
    pub origin_guard: console_guard::ConsoleGuard,
    /// Signs the compliance pages' checkpoints.
    pub signer: Arc<CheckpointSigner>,
    /// `/mcp` (crate::mcp::router).
    pub mcp: Router,
    /// The authorization server's endpoints, when `--oauth` is on.
    pub oauth: Option<(OAuthService, oauth::RateLimits)>,
    /// `/mcp`'s resource metadata, when `--oauth` is on (the flag) or trusted issuers are
    /// configured.
    pub resource_metadata: Option<(OAuthService, bool)>,
    /// `/api/v1`.
    pub api: Router,
    pub metrics: Arc<Metrics>,
    pub trusted_proxies: TrustedProxies,
}

/// The whole server's router: the console under its session, guard and login layers; `/mcp`,
/// OAuth, the API and metrics beside it; the client's address resolved for all.
pub fn router(parts: Parts) -> Router {
    let state = parts.state;
    let leptos_options = state.leptos_options.clone();
    let routes = generate_route_list(App);
    let provide = {
        let console = parts.console;
        let revisions = parts.revisions;
        let holds = parts.holds;
        let trusted_keys = parts.trusted_keys;
        let connect = parts.connect;
        let split_manifest = parts.split_manifest;
        move || {
            provide_context(console.clone());
            provide_context(revisions.clone());
            provide_context(holds.clone());
            provide_context(trusted_keys.clone());
            provide_context(connect.clone());
            if let Some(manifest) = &split_manifest {
                provide_context(manifest.for_render());
            }
        }
    };
    Router::new()
        .merge(health::router())
        .merge(console_auth::router())
        .merge(console_sso::router())
        .merge(oauth::console_routes())
        .merge(export::router())
        .merge(bundle_upload::router())
        .merge(compliance::router(parts.signer))
        .leptos_routes_with_context(&state, routes, provide.clone(), {
            let options = leptos_options.clone();
            move || shell(options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(provide, shell))
        // Leptos reads a server function's body through axum's extractor, whose own 2 MiB
        // default would answer 500 between it and the console's limit: one limit for both.
        .layer(axum::extract::DefaultBodyLimit::max(
            console_guard::MAX_FORM_BYTES,
        ))
        // Innermost: a server function's body is bounded before Leptos reads it, and its
        // error answered with the status it means.
        .layer(axum::middleware::from_fn(console_errors::status))
        .layer(axum::middleware::from_fn(console_body::limit))
        .layer(static_asset_compression())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            console_auth::require_console_login,
        ))
        // After the guard: a refused request does not keep a session alive.
        .layer(axum::middleware::from_fn_with_state(
            parts.session_limits,
            console_auth::keep_alive,
        ))
        // Before the login check, so posts to public paths (/login, server functions) pass it.
        .layer(axum::middleware::from_fn_with_state(
            parts.origin_guard,
            console_guard::guard,
        ))
        .layer(parts.sessions)
        // Outermost: a body declared past the console's limit costs no session lookup.
        .layer(axum::middleware::from_fn(console_body::declared_limit))
        .with_state(state)
        // Merged after the console layers: /mcp authenticates agent keys, not cookies.
        .merge(parts.mcp)
        .merge(match parts.oauth {
            Some((oauth, limits)) => oauth::router(oauth, limits),
            None => Router::new(),
        })
        .merge(match parts.resource_metadata {
            Some((oauth, own)) => oauth::resource_metadata_router(oauth, own),
            None => Router::new(),
        })
        .merge(parts.api)
        .merge(metrics::router(parts.metrics))
        // Outermost: every handler reads the client's address it decided.
        .layer(axum::middleware::from_fn_with_state(
            parts.trusted_proxies,
            client_addr::resolve,
        ))
        .layer(TraceLayer::new_for_http())
}

/// The console's static files leave gzipped when the browser accepts it: the main wasm
/// module is 800 KB raw and 300 KB gzipped. Pages, server functions and exports are sent as
/// they are (an export streams hundreds of megabytes; compressing it is the client's call).
fn static_asset_compression()
-> tower_http::compression::CompressionLayer<impl tower_http::compression::Predicate> {
    use tower_http::compression::predicate::{DefaultPredicate, Predicate as _};

    let static_asset =
        |_: http::StatusCode, _: http::Version, headers: &http::HeaderMap, _: &http::Extensions| {
            headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|t| t.to_str().ok())
                .is_some_and(|t| {
                    [
                        "application/wasm",
                        "text/javascript",
                        "application/javascript",
                        "text/css",
                    ]
                    .iter()
                    .any(|asset| t.starts_with(asset))
                })
        };
    tower_http::compression::CompressionLayer::new()
        .compress_when(DefaultPredicate::new().and(static_asset))
}
