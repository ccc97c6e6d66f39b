//! The state the console's routers share. It sits below every router and command and
//! imports only the core (and Leptos's options): routers extract it, `serve` builds it.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;
use skillgate_core::admin::AdminService;
use skillgate_core::oauth::OAuthService;
use skillgate_core::revisions::Revisions;
use skillgate_core::store::Store;
use skillgate_core::users::Users;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub store: Store,
    pub users: Users,
    pub revisions: Revisions,
    /// The one door for admin changes (the retention form posts through it).
    pub admin: Arc<AdminService>,
    /// The authorization server (the consent form posts to it).
    pub oauth: OAuthService,
}
