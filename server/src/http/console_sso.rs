//! Single sign-on to the console through the company's OpenID provider (issue #52):
//! `GET /auth/sso/start` sends the browser to the provider, `GET /auth/sso/callback`
//! takes it back, signs the person in and lands them where they were going.
//!
//! Two cookies, for two reasons. The console session's cookie is `SameSite=Strict`, so a
//! browser does not send it on the provider's redirect back (another site); the sign-in
//! under way is therefore in the database, bound to the browser by its own `Lax` cookie,
//! scoped to `/auth/sso/` and gone after ten minutes. And for the same reason, the page
//! the callback answers moves on with a `<meta http-equiv=refresh>`: a navigation this
//! site starts, on which the new Strict session cookie is sent.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use skillgate_core::admin::SsoSignIn;
use skillgate_core::console_sso::{CALLBACK_PATH, Callback, ConsoleSso, SsoRefusal};
use skillgate_core::revisions::limits::{Slot, retry_after_secs};
use skillgate_core::users::ConsoleUser;
use tower_sessions::Session;

use crate::client_addr::ClientAddr;
use crate::http::console_auth::{self, local_path};
use crate::state::AppState;

/// The cookie that binds a sign-in under way to the browser that started it.
const BROWSER_COOKIE: &str = "skillgate_sso";
const BROWSER_COOKIE_PATH: &str = "/auth/sso/";
/// As long as a sign-in under way is kept (core's PENDING_TTL).
const BROWSER_COOKIE_SECONDS: i64 = 600;
/// The audit's actor of a callback that verified nobody.
const UNVERIFIED: &str = "unverified-sso";
/// Sign-in starts and callbacks per client address and minute. Each start writes a row and
/// each callback may reach the provider: an anonymous flood must not do either without
/// bound. A person needs two per sign-in.
const PER_ADDRESS_PER_MINUTE: u32 = 30;

/// `Ok` when the client at `ip` is within its budget; else the 429 to answer.
async fn within_budget(state: &AppState, ip: std::net::IpAddr) -> Result<(), Response> {
    let slot = state
        .store
        .reserve_rate_slot(
            &crate::http::oauth::subject(ip),
            (
                "console_sso",
                PER_ADDRESS_PER_MINUTE,
                std::time::Duration::from_secs(60),
            ),
            chrono::Utc::now(),
        )
        .await;
    match slot {
        Ok(Slot::Reserved) => Ok(()),
        Ok(Slot::Refused { retry_in }) => {
            let secs = retry_after_secs(retry_in);
            tracing::warn!(client = %ip, retry_after = secs, "console sign-in rate limit reached");
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many sign-ins from this address. Try again in {secs} s.\n"),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            Err(response)
        }
        Err(error) => {
            tracing::error!(%error, "cannot take a console sign-in rate limit slot");
            Err(StatusCode::SERVICE_UNAVAILABLE.into_response())
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/auth/sso/start", get(start))
        .route(CALLBACK_PATH, get(callback))
}

#[derive(Deserialize)]
pub struct StartQuery {
    next: Option<String>,
}

fn browser_cookie(value: &str, max_age: i64, secure: bool) -> HeaderValue {
    let cookie = tower_sessions::cookie::Cookie::build((BROWSER_COOKIE, value.to_owned()))
        .path(BROWSER_COOKIE_PATH)
        .http_only(true)
        .secure(secure)
        // Lax: sent on the provider's top-level redirect back, never on a cross-site post.
        .same_site(tower_sessions::cookie::SameSite::Lax)
        .max_age(time::Duration::seconds(max_age))
        .build();
    HeaderValue::from_str(&cookie.to_string()).expect("the cookie's text is a header value")
}

fn browser_secret(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(tower_sessions::cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == BROWSER_COOKIE)
        .map(|cookie| cookie.value().to_owned())
}

/// Back to the sign-in page, saying why single sign-on failed.
fn refused(code: &str, secure: bool) -> Response {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("error", "sso")
        .append_pair("code", code)
        .finish();
    let mut response = Redirect::to(&format!("/login?{query}")).into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, browser_cookie("", 0, secure));
    response
}

#[tracing::instrument(skip_all)]
pub async fn start(
    State(state): State<AppState>,
    ClientAddr(ip): ClientAddr,
    Query(query): Query<StartQuery>,
) -> Response {
    let Some(sso) = &state.sso else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Err(refused) = within_budget(&state, ip).await {
        return refused;
    }
    let next = local_path(query.next.as_deref());
    match sso.begin(next, chrono::Utc::now()).await {
        Ok(started) => {
            let mut response = Redirect::to(started.redirect.as_str()).into_response();
            response.headers_mut().append(
                header::SET_COOKIE,
                browser_cookie(
                    started.browser.expose(),
                    BROWSER_COOKIE_SECONDS,
                    state.secure_cookies,
                ),
            );
            response
        }
        Err(refusal) => {
            tracing::warn!(%refusal, "cannot start a sign-in through the provider");
            refused(refusal.code(), state.secure_cookies)
        }
    }
}

#[tracing::instrument(skip_all)]
pub async fn callback(
    State(state): State<AppState>,
    ClientAddr(ip): ClientAddr,
    session: Session,
    headers: HeaderMap,
    Query(answer): Query<Callback>,
) -> Response {
    let Some(sso) = &state.sso else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Err(refused) = within_budget(&state, ip).await {
        return refused;
    }
    let secure = state.secure_cookies;
    let browser = browser_secret(&headers);
    let identity = match sso
        .finish(answer, browser.as_deref(), chrono::Utc::now())
        .await
    {
        Ok(identity) => identity,
        Err(SsoRefusal::Store(error)) => {
            tracing::error!(%error, "single sign-on: the store failed");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        Err(refusal) => {
            return refuse(
                &state,
                sso,
                UNVERIFIED,
                &refusal.to_string(),
                refusal.code(),
            )
            .await;
        }
    };
    let Some(role) = identity.role else {
        let reason = SsoRefusal::NoRole(identity.name.clone()).to_string();
        return refuse(&state, sso, &identity.name, &reason, "no_role").await;
    };
    let user = match state.admin.sso_sign_in(&identity, role).await {
        Ok(SsoSignIn::SignedIn(user)) => user,
        Ok(SsoSignIn::Refused { code, reason }) => {
            return refuse(&state, sso, &identity.name, &reason, code).await;
        }
        Err(error) => {
            tracing::error!(%error, "single sign-on: cannot sign the person in");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    if let Err(error) = console_auth::start_session(&session, &user).await {
        tracing::error!(%error, "cannot store the console session");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    tracing::info!(user = %user.name, role = %user.role, "console sign-in through the provider");
    landing(&user, &identity.next, secure)
}

/// Audits a refused sign-in (before the person hears of it) and sends them back to the
/// sign-in page.
async fn refuse(
    state: &AppState,
    sso: &ConsoleSso,
    actor: &str,
    reason: &str,
    code: &str,
) -> Response {
    tracing::info!(%actor, code, %reason, "console sign-in through the provider refused");
    let target = format!("issuer:{}", sso.config().issuer.issuer);
    if let Err(error) = state
        .admin
        .record_refusal(actor, "console.sso", &target, code, reason)
        .await
    {
        tracing::error!(%error, "cannot audit a refused sign-in");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    refused(code, state.secure_cookies)
}

/// The page that moves the signed-in browser on to `next` (see the module's note on
/// Strict cookies), and drops the sign-in cookie.
fn landing(user: &ConsoleUser, next: &str, secure: bool) -> Response {
    let next = html_escape(next);
    let name = html_escape(&user.name);
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={next}\"><title>Signed in</title></head>\
         <body><p>Signed in as {name}. <a href=\"{next}\">Continue to the console</a>.</p></body></html>"
    );
    let mut response = Html(page).into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, browser_cookie("", 0, secure));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_landing_page_escapes_what_it_writes() {
        assert_eq!(
            html_escape("/a?b=\"c\"&d=<e>'"),
            "/a?b=&quot;c&quot;&amp;d=&lt;e&gt;&#39;"
        );
    }

    #[test]
    fn the_browser_cookie_is_lax_http_only_and_scoped_to_the_sign_in_paths() {
        let cookie = browser_cookie("v", 600, true);
        let text = cookie.to_str().unwrap();
        for part in [
            "skillgate_sso=v",
            "HttpOnly",
            "SameSite=Lax",
            "Secure",
            "Path=/auth/sso/",
            "Max-Age=600",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; skillgate_sso=secret; b=2"),
        );
        assert_eq!(browser_secret(&headers).as_deref(), Some("secret"));
    }
}
