//! Console sign-in, sign-out, and the guard that sends anonymous browsers to `/login`.
//!
//! Sign-in is a plain HTML form post handled here (not a server function) so it behaves
//! identically with JavaScript off, and so the session id can be cycled before the
//! response leaves. Like every console post, it first passes `console_guard` (origin and
//! form token).

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use serde::Deserialize;
use skillgate_app::shared::ssr::{USER_ID_KEY, session_user_id};
use skillgate_core::users::{ConsoleUser, Password, UserError};
use tower_sessions::Session;

use crate::client_addr::ClientAddr;
use crate::http::console_guard::{self, is_public};
use crate::state::AppState;

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    /// Where to go after signing in (the page that sent the browser to `/login`).
    #[serde(default)]
    next: Option<String>,
}

/// `next` if it is a path of this console, else `/`: a sign-in must never send the browser
/// to another site (`//evil.example`, `/\evil.example` and absolute URLs are refused).
pub(crate) fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.starts_with("/\\")
                && !path.chars().any(|c| c.is_control() || c == '\\') =>
        {
            path
        }
        _ => "/",
    }
}

/// The sign-in page, asked to come back to `path_and_query` afterwards.
fn login_then(path_and_query: &str) -> String {
    if path_and_query == "/" {
        return "/login".to_owned();
    }
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("next", path_and_query)
        .finish();
    format!("/login?{query}")
}

/// The console's sign-in form posts and sign-out.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/login", post(login))
        .route("/logout", post(logout))
}

#[tracing::instrument(skip_all, fields(user = %form.name, %address))]
pub async fn login(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    let outcome = state
        .users
        .login(
            form.name.trim(),
            Password::new(form.password),
            &address.to_string(),
            chrono::Utc::now(),
        )
        .await;
    match outcome {
        // With single sign-on on, a password may be limited to break-glass admins, or off.
        Ok(user)
            if state
                .sso
                .as_ref()
                .is_some_and(|sso| !sso.config().password_sign_in.allows(user.role)) =>
        {
            tracing::info!("console sign-in with a password refused: single sign-on only");
            Redirect::to(&again(form.next.as_deref(), "password_off")).into_response()
        }
        Ok(user) => {
            if let Err(error) = start_session(&session, &user).await {
                tracing::error!(%error, "cannot store the console session");
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            tracing::info!(role = %user.role, "console sign-in");
            Redirect::to(local_path(form.next.as_deref())).into_response()
        }
        Err(UserError::InvalidCredentials) => {
            tracing::info!("console sign-in refused");
            Redirect::to(&again(form.next.as_deref(), "invalid")).into_response()
        }
        Err(UserError::Throttled { .. }) => {
            tracing::warn!("console sign-in throttled");
            Redirect::to(&again(form.next.as_deref(), "throttled")).into_response()
        }
        Err(error) => {
            tracing::error!(%error, "console sign-in failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Makes `session` the signed-in session of `user`, by password or through the provider.
pub(crate) async fn start_session(
    session: &Session,
    user: &ConsoleUser,
) -> Result<(), tower_sessions::session::Error> {
    // A fresh id at privilege change defeats session fixation.
    session.cycle_id().await?;
    session.insert(USER_ID_KEY, user.id.to_string()).await?;
    // Kept as text, as the user id is (see USER_ID_KEY).
    session
        .insert(
            SIGNED_IN_KEY,
            chrono::Utc::now().timestamp_millis().to_string(),
        )
        .await?;
    // The token of the anonymous sign-in page does not carry over into the session.
    console_guard::rotate_form_token(session).await
}

/// The sign-in page again with `error`, keeping where to go afterwards.
fn again(next: Option<&str>, error: &str) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("error", error);
    let next = local_path(next);
    if next != "/" {
        query.append_pair("next", next);
    }
    format!("/login?{}", query.finish())
}

pub async fn logout(session: Session) -> Response {
    if let Err(error) = session.flush().await {
        tracing::error!(%error, "cannot end the console session");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    Redirect::to("/login?signed_out=1").into_response()
}

/// When a signed-in session last had its expiry pushed back (milliseconds since the epoch).
const TOUCHED_KEY: &str = "touched_at_ms";
/// When the session was signed in (milliseconds since the epoch).
const SIGNED_IN_KEY: &str = "signed_in_at_ms";

/// The console's inactivity timeout, how often a session in use is saved to push its
/// expiry back, and how long a session may last however busy (single sign-on's maximum
/// session age: a person whose group was removed at the provider is out within it).
#[derive(Clone, Copy, Debug)]
pub struct SessionLimits {
    every: Duration,
    max_age: Option<Duration>,
}

impl SessionLimits {
    /// Saving at most once a minute (a quarter of the timeout when that is shorter) keeps
    /// the database out of most requests; the session then ends between the timeout less
    /// that interval and the timeout after its last use.
    pub fn new(idle: Duration) -> Self {
        Self {
            every: (idle / 4).min(Duration::from_secs(60)),
            max_age: None,
        }
    }

    /// Ends every console session `max_age` after its sign-in.
    pub fn with_max_age(mut self, max_age: Option<Duration>) -> Self {
        self.max_age = max_age;
        self
    }
}

/// Keeps a signed-in console session alive while it is used. tower-sessions saves a
/// session, and so pushes back its inactivity expiry, only when the request changed it; a
/// session only read would end the timeout after sign-in however busy its user was. So a
/// request of a signed-in user (a page, a server function, an upload; not a built asset)
/// writes the time of use whenever the last write is older than the interval. It runs
/// before the handler, so a sign-out's flush still empties the session.
pub async fn keep_alive(
    State(limits): State<SessionLimits>,
    session: Session,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let used = !is_public(path) || path.starts_with("/console/api/");
    if used && let Err(error) = touch(&session, limits).await {
        tracing::error!(%error, "cannot extend the console session");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    next.run(request).await
}

async fn touch(
    session: &Session,
    limits: SessionLimits,
) -> Result<(), tower_sessions::session::Error> {
    if session_user_id(session).await?.is_none() {
        return Ok(());
    }
    let now = chrono::Utc::now().timestamp_millis();
    if let Some(max_age) = limits.max_age {
        // A session without its sign-in time predates the limit: it ends too.
        let signed_in = session
            .get::<String>(SIGNED_IN_KEY)
            .await?
            .and_then(|ms| ms.parse::<i64>().ok());
        let max_ms = i64::try_from(max_age.as_millis()).unwrap_or(i64::MAX);
        if signed_in.is_none_or(|at| now.saturating_sub(at) >= max_ms) {
            tracing::info!("console session ended: its maximum age passed");
            return session.flush().await;
        }
    }
    // Kept as text: a JSON number does not survive the store's MessagePack encoding while
    // serde_json's arbitrary precision is on in the workspace.
    let last = session
        .get::<String>(TOUCHED_KEY)
        .await?
        .and_then(|ms| ms.parse::<i64>().ok())
        .unwrap_or(0);
    let every = i64::try_from(limits.every.as_millis()).unwrap_or(i64::MAX);
    if now.saturating_sub(last) >= every {
        session.insert(TOUCHED_KEY, now.to_string()).await?;
    }
    Ok(())
}

/// Sends browsers without a console session to `/login`. The account is looked up on
/// every page load, so disabling or deleting a user ends their session at once, as it does
/// for server functions.
pub async fn require_console_login(
    State(state): State<AppState>,
    session: Session,
    request: Request,
    next: Next,
) -> Response {
    if is_public(request.uri().path()) {
        return next.run(request).await;
    }
    // A page asked for while signed out (an OAuth consent page, a bookmark) is shown after
    // sign-in; a post is not replayed.
    let back_to = match request.method() {
        &http::Method::GET => request
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_owned(),
        _ => "/".to_owned(),
    };
    let id = match session_user_id(&session).await {
        Ok(Some(id)) => id,
        Ok(None) => return Redirect::to(&login_then(&back_to)).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot read the console session");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    match state.users.get(id).await {
        Ok(Some(user)) if !user.disabled => next.run(request).await,
        Ok(_) => {
            if let Err(error) = session.flush().await {
                tracing::error!(%error, "cannot end the console session of a disabled user");
            }
            Redirect::to("/login").into_response()
        }
        Err(error) => {
            tracing::error!(%error, "cannot look up the console user");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_public, login_then};

    #[test]
    fn sign_in_returns_only_to_a_path_of_this_console() {
        use super::local_path;
        assert_eq!(
            local_path(Some("/oauth/consent/abc?x=1")),
            "/oauth/consent/abc?x=1"
        );
        for outside in [
            "//evil.example/",
            "/\\evil.example",
            "https://evil.example/",
            "evil",
            "/a\nb",
            "",
        ] {
            assert_eq!(local_path(Some(outside)), "/", "{outside:?}");
        }
        assert_eq!(local_path(None), "/");
        assert_eq!(
            login_then("/oauth/consent/abc?x=1"),
            "/login?next=%2Foauth%2Fconsent%2Fabc%3Fx%3D1"
        );
        assert_eq!(login_then("/"), "/login");
    }

    #[test]
    fn console_pages_need_a_login_but_assets_and_machine_endpoints_do_not() {
        for private in ["/", "/roles", "/users", "/nope"] {
            assert!(!is_public(private), "{private}");
        }
        for public in [
            "/login",
            "/healthz",
            "/pkg/skillgate.wasm",
            "/favicon.ico",
            "/mcp",
        ] {
            assert!(is_public(public), "{public}");
        }
    }
}
