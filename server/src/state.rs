//! The state the console's routers share. It sits below every router and command and
//! imports only the core (and Leptos's options): routers extract it, `serve` builds it.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;
use skillgate_core::admin::AdminService;
use skillgate_core::console_sso::ConsoleSso;
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
    /// Single sign-on to the console through the company's provider (`--console-sso`).
    pub sso: Option<ConsoleSso>,
    /// Whether cookies are `Secure` (`--secure-cookies`): the sign-in cookie follows the
    /// console's.
    pub secure_cookies: bool,
}
