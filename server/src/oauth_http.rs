//! The authorization server's HTTP face: RFC 8414 and RFC 9728 metadata, registration,
//! the authorization and token endpoints, revocation, and the consent form's post.
//!
//! The machine endpoints (everything but the consent post) are served outside the
//! console's cookie layers, with CORS open to any origin: they authenticate nothing by
//! cookie, and browser-based MCP clients must be able to reach them. The consent post is a
//! console form like sign-in: it passes the console guard (origin and form token) and
//! needs a signed-in user.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine as _;
use leptos::prelude::*;
use serde::Deserialize;
use serde_json::Value;
use skillgate_app::api::ssr::session_user_id;
use skillgate_core::oauth::{
    AuthorizeError, AuthorizeRequest, ClientAuth, ConsentDecision, OAuthError, OAuthService,
    TokenRequest,
};
use skillgate_core::slug::Slug;
use tower_http::cors::{Any, CorsLayer};
use tower_sessions::Session;

use crate::serve::AppState;

/// The largest registration or token request body read.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// The public endpoints, on their own state.
pub fn router(oauth: OAuthService) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([http::Method::GET, http::Method::POST])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            "mcp-protocol-version".parse().expect("a header name"),
        ]);
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource_metadata),
        )
        .route("/oauth/register", post(register))
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
        .layer(cors)
        .route("/oauth/authorize", get(authorize))
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

async fn protected_resource_metadata(State(oauth): State<OAuthService>) -> Response {
    Json(oauth.settings().resource_metadata()).into_response()
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
    // Rendered by Leptos, which escapes the two values like every console page's text.
    let (description, code) = (error.description(), error.code());
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
