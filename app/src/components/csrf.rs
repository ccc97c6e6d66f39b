//! The console's form token: one random value per browser session, kept in the session
//! (so every replica sees it) and sent back as a hidden field by every form that posts.
//!
//! The server (`console_guard` in the binary) refuses a form navigation whose token is
//! missing or not the session's. Background posts of the hydrated page carry no token
//! (`ActionForm` rebuilds the body from the server function's arguments); the origin check
//! covers them.

use leptos::prelude::*;

/// The form field (and, for programs, the `x-csrf-token` header) that carries the token.
pub const FIELD: &str = "csrf_token";

/// This page's form token, as rendered into its forms.
#[derive(Clone)]
struct FormToken(String);

/// Makes the session's form token available to every form of the app. Call once, at the
/// top of the root component: the value is computed on the server and handed to the
/// hydrating client with the page, so both render the same hidden field.
pub fn provide_form_token() {
    let token = SharedValue::new(rendered_token);
    provide_context(FormToken(token.into_inner()));
}

#[cfg(feature = "ssr")]
fn rendered_token() -> String {
    ssr::current()
}

// On the client the value always comes from the server's page; this runs only if it is
// missing, and an empty token is refused by the server (fail closed).
#[cfg(not(feature = "ssr"))]
fn rendered_token() -> String {
    String::new()
}

/// The hidden field with the form token; every console `<form method="post">` holds one.
#[component]
pub fn CsrfField() -> impl IntoView {
    let token = use_context::<FormToken>().map(|t| t.0).unwrap_or_default();
    view! { <input type="hidden" name=FIELD value=token /> }
}

#[cfg(feature = "ssr")]
pub mod ssr {
    /// The session key under which the form token is stored.
    pub const SESSION_KEY: &str = "console_form_token";

    /// The form token of the request's session, put into the request's extensions by the
    /// server before a page renders.
    #[derive(Clone)]
    pub struct RequestFormToken(pub String);

    /// The token of the request being rendered, or empty when the server put none there
    /// (an anonymous page other than sign-in, which has no forms that post).
    pub(super) fn current() -> String {
        leptos::prelude::use_context::<http::request::Parts>()
            .and_then(|parts| {
                parts
                    .extensions
                    .get::<RequestFormToken>()
                    .map(|t| t.0.clone())
            })
            .unwrap_or_default()
    }
}
