//! The authorization server's HTTP face: RFC 8414 and RFC 9728 metadata, registration,
//! the authorization and token endpoints, revocation, and the consent form's post.
//!
//! The machine endpoints (everything but the consent post) are served outside the
//! console's cookie layers, with CORS open to any origin: they authenticate nothing by
//! cookie, and browser-based MCP clients must be able to reach them. The consent post is a
//! console form like sign-in: it passes the console guard (origin and form token) and
//! needs a signed-in user.
//!
//! The endpoints that act for anyone who asks (registration, authorization, token,
//! revocation) are rate-limited per client address ([`RateLimits`]; the address as
//! `--trusted-proxies` decides it, see `client_addr`). The slots live in the database, so
//! the budget is one across replicas. The metadata documents are not limited: they are
//! constant, read nothing and cost less to serve than a slot would to take.

use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine as _;
use leptos::prelude::*;
use serde::Deserialize;
use serde_json::Value;
use skillgate_app::shared::ssr::session_user_id;
use skillgate_core::oauth::{
    AuthorizeError, AuthorizeRequest, ClientAuth, ConsentDecision, OAuthError, OAuthService,
    TokenRequest,
};
use skillgate_core::revisions::limits::{Slot, retry_after_secs};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use tower_http::cors::{Any, CorsLayer};
use tower_sessions::Session;

use crate::client_addr::ClientAddr;
use crate::state::AppState;

/// The largest registration or token request body read.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// Default budget of client registrations per client address (`--oauth-register-limit`),
/// per [`REGISTER_WINDOW`]: a client registers once per installation, so an office behind
/// one address stays far below it, and a loop filling the database stops at it.
pub const DEFAULT_REGISTER_LIMIT: u32 = 20;
pub const REGISTER_WINDOW: Duration = Duration::from_secs(3600);
/// Default budget of authorization, token and revocation requests per client address
/// (`--oauth-request-limit`), per [`REQUEST_WINDOW`]: a sign-in is one authorization and
/// one token request, and a client refreshes its token every few minutes.
pub const DEFAULT_REQUEST_LIMIT: u32 = 120;
pub const REQUEST_WINDOW: Duration = Duration::from_secs(60);

/// One per-address budget: at most `max` requests per `window` (sliding).
#[derive(Clone, Copy, Debug)]
struct AddressLimit {
    /// The stored name of the slots (`rate_limit_slots.action`).
    action: &'static str,
    /// What the refusal says was asked too often.
    what: &'static str,
    max: u32,
    window: Duration,
}

/// The per-address rate limits of the OAuth endpoints, kept in `store`.
#[derive(Clone, Debug)]
pub struct RateLimits {
    store: Store,
    register: AddressLimit,
    requests: AddressLimit,
}

impl RateLimits {
    /// `register` registrations an hour and `requests` authorization, token and revocation
    /// requests a minute, per client address.
    pub fn new(store: Store, register: u32, requests: u32) -> Self {
        Self {
            store,
            register: AddressLimit {
                action: "oauth_register",
                what: "client registrations",
                max: register,
                window: REGISTER_WINDOW,
            },
            requests: AddressLimit {
                action: "oauth_request",
                what: "authorization, token and revocation requests",
                max: requests,
                window: REQUEST_WINDOW,
            },
        }
    }
}

/// What the slots of `ip` are counted under: the address itself for IPv4; for IPv6 its
/// /64, the block one subscriber or host is usually given, so a client cannot take a
/// fresh budget from each of its 2^64 addresses.
pub(crate) fn subject(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => format!("addr:{v4}"),
        std::net::IpAddr::V6(v6) => {
            let net = ipnet::Ipv6Net::new(v6, 64).map_or(v6, |net| net.network());
            format!("addr:{net}/64")
        }
    }
}

/// Takes a slot of `limit` for the client's address before the endpoint runs; a client
/// whose budget is spent gets 429 with `Retry-After`, and the endpoint does not run.
async fn limited(
    State((store, limit)): State<(Store, AddressLimit)>,
    ClientAddr(ip): ClientAddr,
    request: Request,
    next: Next,
) -> Response {
    let slot = store
        .reserve_rate_slot(
            &subject(ip),
            (limit.action, limit.max, limit.window),
            chrono::Utc::now(),
        )
        .await;
    match slot {
        Ok(Slot::Reserved) => next.run(request).await,
        Ok(Slot::Refused { retry_in }) => {
            let secs = retry_after_secs(retry_in);
            tracing::warn!(
                client = %ip,
                action = limit.action,
                retry_after = secs,
                "oauth rate limit reached"
            );
            let description = format!(
                "too many {} from this address: at most {} per {} s; retry in {secs} s",
                limit.what,
                limit.max,
                limit.window.as_secs()
            );
            let mut response = if request.uri().path() == "/oauth/authorize" {
                page(StatusCode::TOO_MANY_REQUESTS, &description, "rate_limited")
            } else {
                let body = serde_json::json!({
                    "error": "rate_limited",
                    "error_description": description,
                });
                (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response()
            };
            no_store(response.headers_mut());
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            response
        }
        Err(error) => {
            tracing::error!(%error, "cannot take an oauth rate limit slot");
            let body = serde_json::json!({
                "error": "temporarily_unavailable",
                "error_description": "the server cannot take this request right now; retry later",
            });
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

/// The public endpoints, on their own state.
pub fn router(oauth: OAuthService, limits: RateLimits) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([http::Method::GET, http::Method::POST])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            "mcp-protocol-version".parse().expect("a header name"),
        ]);
    let limit = |limit: AddressLimit| {
        axum::middleware::from_fn_with_state((limits.store.clone(), limit), limited)
    };
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server_metadata),
        )
        .route(
            "/oauth/register",
            post(register).layer(limit(limits.register)),
        )
        .route("/oauth/token", post(token).layer(limit(limits.requests)))
        .route("/oauth/revoke", post(revoke).layer(limit(limits.requests)))
        .layer(cors)
        .route(
            "/oauth/authorize",
            get(authorize).layer(limit(limits.requests)),
        )
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(oauth)
}

/// The consent form's post, for the console router.
pub fn console_routes() -> Router<AppState> {
    Router::new().route("/oauth/consent", post(consent))
}

async fn authorization_server_metadata(State(oauth): State<OAuthService>) -> Response {
    Json(oauth.settings().metadata()).into_response()
}

/// RFC 9728 protected resource metadata of `/mcp`, open to any origin: served when this
/// server's authorization server is on (`own`), or trusted issuers are configured, or both.
pub fn resource_metadata_router(oauth: OAuthService, own: bool) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([http::Method::GET])
        .allow_headers([
            header::AUTHORIZATION,
            "mcp-protocol-version".parse().expect("a header name"),
        ]);
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource_metadata),
        )
        .layer(cors)
        .with_state((oauth, own))
}

async fn protected_resource_metadata(State((oauth, own)): State<(OAuthService, bool)>) -> Response {
    Json(oauth.settings().resource_metadata(own)).into_response()
}

/// An error of the token, registration or revocation endpoint (RFC 6749 §5.2).
fn oauth_error(error: &OAuthError) -> Response {
    if error.status() >= 500 {
        tracing::error!(%error, "oauth request failed");
    } else {
        tracing::info!(code = error.code(), %error, "oauth request refused");
    }
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut response = (status, Json(error.body())).into_response();
    no_store(response.headers_mut());
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Basic realm="skillgate""#),
        );
    }
    response
}

fn no_store(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

#[tracing::instrument(skip_all)]
async fn register(State(oauth): State<OAuthService>, body: axum::body::Bytes) -> Response {
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(value @ Value::Object(_)) => value,
        _ => {
            return oauth_error(&OAuthError::InvalidClientMetadata(
                "the registration must be a JSON object".into(),
            ));
        }
    };
    match oauth.register(parsed).await {
        Ok(client) => {
            let mut response = (StatusCode::CREATED, Json(client)).into_response();
            no_store(response.headers_mut());
            response
        }
        Err(error) => oauth_error(&error),
    }
}

#[tracing::instrument(skip_all)]
async fn authorize(
    State(oauth): State<OAuthService>,
    query: Result<Query<AuthorizeRequest>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(request)) = query else {
        return refusal_page(&OAuthError::InvalidRequest(
            "the authorization request's query is malformed".into(),
        ));
    };
    match oauth.authorize(request).await {
        Ok(id) => Redirect::to(&format!("/oauth/consent/{id}")).into_response(),
        Err(AuthorizeError::Redirect(url)) => Redirect::to(&url).into_response(),
        Err(AuthorizeError::Show(error)) => refusal_page(&error),
    }
}

/// The page a refused authorization request shows when it cannot be sent back to the
/// client (unknown client, unregistered redirect URI).
fn refusal_page(error: &OAuthError) -> Response {
    tracing::info!(code = error.code(), %error, "oauth authorization request refused");
    let status = if error.status() >= 500 {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::BAD_REQUEST
    };
    page(status, &error.description(), error.code())
}

/// The page the browser is shown instead of the authorization it asked for.
fn page(status: StatusCode, description: &str, code: &str) -> Response {
    // Rendered by Leptos, which escapes the two values like every console page's text.
    let (description, code) = (description.to_owned(), code.to_owned());
    let body = view! {
        <main class="login">
            <div class="card login-card">
                <h1>"Skillgate"</h1>
                <p class="notice error" role="alert" id="oauth-error">{description}</p>
                <p class="muted">
                    "The application that sent you here made a request Skillgate cannot accept ("
                    {code}
                    "). Nothing was shared with it."
                </p>
            </div>
        </main>
    }
    .to_html();
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Sign-in refused</title><link rel=\"stylesheet\" href=\"/pkg/skillgate.css\">\
         </head><body>{body}</body></html>"
    );
    (status, Html(page)).into_response()
}

/// The client's credentials: HTTP Basic (RFC 6749 §2.3.1, both parts form-encoded), or
/// the form's `client_id` and `client_secret`. Both at once is refused.
fn client_auth(
    headers: &HeaderMap,
    client_id: Option<String>,
    client_secret: Option<String>,
) -> Result<ClientAuth, OAuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(ClientAuth {
            client_id,
            secret: client_secret,
            basic: false,
        });
    };
    let malformed =
        || OAuthError::InvalidClient("the Basic authorization header is malformed".into());
    let text = value.to_str().map_err(|_| malformed())?;
    let (scheme, encoded) = text.split_once(' ').ok_or_else(malformed)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(malformed());
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| malformed())?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (id, secret) = decoded.split_once(':').ok_or_else(malformed)?;
    let decode = |part: &str| {
        form_urlencoded::parse(format!("v={part}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let (id, secret) = (decode(id), decode(secret));
    if client_secret.is_some() || client_id.as_deref().is_some_and(|c| c != id) {
        return Err(OAuthError::InvalidRequest(
            "send the client's credentials one way: Basic or the form, not both".into(),
        ));
    }
    Ok(ClientAuth {
        client_id: Some(id),
        secret: Some(secret),
        basic: true,
    })
}

#[tracing::instrument(skip_all)]
async fn token(
    State(oauth): State<OAuthService>,
    headers: HeaderMap,
    form: Result<Form<TokenRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(mut request)) = form else {
        return oauth_error(&OAuthError::InvalidRequest(
            "the token request must be an application/x-www-form-urlencoded form".into(),
        ));
    };
    let auth = match client_auth(
        &headers,
        request.client_id.take(),
        request.client_secret.take(),
    ) {
        Ok(auth) => auth,
        Err(error) => return oauth_error(&error),
    };
    match oauth.token(request, auth).await {
        Ok(tokens) => {
            let mut response = Json(tokens).into_response();
            no_store(response.headers_mut());
            response
        }
        Err(error) => oauth_error(&error),
    }
}

#[derive(Deserialize)]
struct RevokeForm {
    token: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
}

#[tracing::instrument(skip_all)]
async fn revoke(
    State(oauth): State<OAuthService>,
    headers: HeaderMap,
    form: Result<Form<RevokeForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return oauth_error(&OAuthError::InvalidRequest(
            "the revocation request must be an application/x-www-form-urlencoded form".into(),
        ));
    };
    let Some(token) = form.token.filter(|t| !t.is_empty()) else {
        return oauth_error(&OAuthError::InvalidRequest("token is missing".into()));
    };
    let auth = match client_auth(&headers, form.client_id, form.client_secret) {
        Ok(auth) => auth,
        Err(error) => return oauth_error(&error),
    };
    match oauth.revoke(&token, auth).await {
        Ok(()) => {
            let mut response = StatusCode::OK.into_response();
            no_store(response.headers_mut());
            response
        }
        Err(error) => oauth_error(&error),
    }
}

#[derive(Deserialize)]
pub struct ConsentForm {
    request: String,
    scope: Option<String>,
    decision: String,
}

/// The consent page's answer: sends the browser to the client with a code (or with
/// `access_denied`), or back to the consent page with the reason it was refused.
#[tracing::instrument(skip_all)]
async fn consent(
    State(state): State<AppState>,
    session: Session,
    Form(form): Form<ConsentForm>,
) -> Response {
    let user = match session_user_id(&session).await {
        Ok(Some(id)) => state
            .users
            .get(id)
            .await
            .ok()
            .flatten()
            .filter(|u| !u.disabled),
        Ok(None) => None,
        Err(error) => {
            tracing::error!(%error, "cannot read the console session");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let back = |message: &str| {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("error", message)
            .finish();
        Redirect::to(&format!(
            "/oauth/consent/{}?{query}",
            form_urlencoded::byte_serialize(form.request.as_bytes()).collect::<String>()
        ))
        .into_response()
    };
    let Some(user) = user else {
        return Redirect::to("/login").into_response();
    };
    let decision = match form.decision.as_str() {
        "deny" => ConsentDecision::Deny,
        "approve" => match form.scope.as_deref().map(Slug::parse) {
            Some(Ok(scope)) => ConsentDecision::Approve { scope },
            _ => return back("pick the scope the application may act in"),
        },
        _ => return back("approve or deny the request"),
    };
    match state.oauth.decide(&form.request, &user, decision).await {
        Ok(url) => Redirect::to(&url).into_response(),
        Err(error) => {
            tracing::info!(code = error.code(), %error, "oauth consent refused");
            back(&error.description())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::subject;

    #[test]
    fn an_ipv6_client_is_counted_by_its_64_and_an_ipv4_client_by_its_address() {
        let v6 = |text: &str| subject(text.parse().unwrap());
        assert_eq!(v6("2001:db8:1:2:aaaa::1"), v6("2001:db8:1:2:ffff::9"));
        assert_eq!(v6("2001:db8:1:2::1"), "addr:2001:db8:1:2::/64");
        assert_ne!(v6("2001:db8:1:3::1"), v6("2001:db8:1:2::1"));
        assert_eq!(v6("192.0.2.1"), "addr:192.0.2.1");
        assert_ne!(v6("192.0.2.1"), v6("192.0.2.2"));
    }
}
