//! Admission to `/mcp`, checked on every request in this order: the `Host` header
//! (DNS rebinding, loopback binds only), the `Origin` header, then the bearer credential:
//! an agent key, checked in the workspace it names ([`super::workspaces`]), an OAuth
//! access token of Skillgate's own authorization server, or an access token of a trusted
//! issuer (the company's identity provider, [`skillgate_core::issuers`]), served by the
//! workspace its claims map to. An admitted request carries its caller and its workspace's
//! gateway.
//!
//! Every request re-authenticates, so a revoked key or grant stops working at once, open
//! MCP sessions included. A 401 names the protected resource metadata (RFC 9728) when the
//! authorization server is on, which is how an MCP client finds where to sign in.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::json;
use skillgate_core::admin::ExternalAdmission;
use skillgate_core::gateway::AgentIdentity;
use skillgate_core::issuers::{ExternalCaller, TokenRefusal, TrustedIssuers};
use skillgate_core::keys::{KeyError, workspace_of_key};
use skillgate_core::metrics::{Metrics, Phase};
use skillgate_core::oauth::{ACCESS_TOKEN_PREFIX, OAuthService};
use skillgate_core::slug::Slug;

use super::workspaces::{CallerGateway, Workspaces};

/// The key id of agents admitted without a key into the anonymous scope.
pub const ANONYMOUS_KEY_ID: i64 = 0;
pub const ANONYMOUS_KEY_NAME: &str = "anonymous";

/// The authenticated agent, put into the request's extensions for the MCP handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCaller {
    pub key_id: i64,
    pub key_name: String,
    pub scope: Slug,
}

impl AgentCaller {
    pub fn identity(&self, connection: Option<String>) -> AgentIdentity {
        AgentIdentity {
            key_id: self.key_id,
            key_name: self.key_name.clone(),
            scope: self.scope.clone(),
            connection,
        }
    }
}

/// Who may reach the endpoint, from [`super::McpOptions`].
#[derive(Debug, Clone)]
pub struct Admission {
    /// Where a key is checked: the workspace it names (`default` when it names none).
    pub workspaces: Arc<Workspaces>,
    pub loopback_bind: bool,
    pub allowed_origins: Vec<String>,
    pub anonymous_scope: Option<Slug>,
    /// The authorization server whose access tokens this endpoint accepts (`/mcp` only:
    /// its tokens are bound to that resource).
    pub oauth: Option<OAuthService>,
    /// The company's identity providers whose access tokens (JWTs) this endpoint accepts.
    pub issuers: Option<TrustedIssuers>,
    /// Where a 401 points clients for the resource metadata, when it is served.
    pub resource_metadata_url: Option<String>,
    /// Where the key check's time, refusals and whole-request times are recorded.
    pub metrics: Arc<Metrics>,
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

fn is_loopback_name(host: &str) -> bool {
    LOOPBACK_NAMES
        .iter()
        .any(|name| host.eq_ignore_ascii_case(name))
}

/// True when the request's `Host` (or, without one, the URI's authority) is a loopback
/// name with any port.
fn host_is_loopback(headers: &HeaderMap, uri: &http::Uri) -> bool {
    let authority = match headers.get(header::HOST) {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| http::uri::Authority::try_from(text).ok()),
        None => uri.authority().cloned(),
    };
    authority.is_some_and(|authority| is_loopback_name(authority.host()))
}

/// `scheme://host[:port]`, lowercased, without a trailing slash.
fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

impl Admission {
    fn origin_is_allowed(&self, origin: &str) -> bool {
        let origin = normalize_origin(origin);
        if self
            .allowed_origins
            .iter()
            .any(|allowed| normalize_origin(allowed) == origin)
        {
            return true;
        }
        self.loopback_bind && is_loopback_origin(&origin)
    }
}

fn is_loopback_origin(origin: &str) -> bool {
    let Ok(uri) = origin.parse::<http::Uri>() else {
        return false;
    };
    let web_scheme = matches!(uri.scheme_str(), Some("http" | "https"));
    let bare = uri.path_and_query().is_none_or(|pq| pq.as_str() == "/");
    web_scheme && bare && uri.host().is_some_and(is_loopback_name)
}

/// A refusal: status and a short JSON body.
fn refuse(status: StatusCode, error: &str, message: &str) -> Response {
    (status, Json(json!({"error": error, "message": message}))).into_response()
}

/// How long a client is asked to wait before it retries a request the database could not
/// serve: about what a PostgreSQL restart takes.
const RETRY_AFTER_SECONDS: HeaderValue = HeaderValue::from_static("2");

/// A 503 for a credential the store could not check (the database is away, or no pool
/// connection came free within its wait): the request went no further, so nothing ran.
fn unavailable(credentials: &str) -> Response {
    let message = format!(
        "{credentials} cannot be checked right now: the gateway's database did not serve the \
         check, so nothing was executed. Try again shortly."
    );
    let mut response = refuse(StatusCode::SERVICE_UNAVAILABLE, "unavailable", &message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, RETRY_AFTER_SECONDS);
    response
}

impl Admission {
    /// A 401 with the bearer challenge: where to find the authorization server when it is
    /// on (RFC 9728 §5.1), and `invalid_token` when a credential was presented and refused
    /// (RFC 6750 §3.1), so a client with a stale token refreshes or signs in again.
    fn unauthorized(&self, presented: bool) -> Response {
        let message = match (&self.oauth, &self.issuers) {
            (None, None) => "a valid agent key is required: Authorization: Bearer sgk_…",
            (Some(_), None) => {
                "a valid agent key (Authorization: Bearer sgk_…) or OAuth access token is required"
            }
            (_, Some(_)) => {
                "a valid agent key (Authorization: Bearer sgk_…) or access token of a trusted \
                 issuer is required"
            }
        };
        self.unauthorized_with(presented, message, None)
    }

    /// A 401 saying `message`, its challenge naming the resource metadata where it is
    /// served; with a presented credential, `error="invalid_token"`, and `description` as
    /// `error_description` (RFC 6750 §3) where there is one to give, so a client learns
    /// why its token was refused.
    fn unauthorized_with(
        &self,
        presented: bool,
        message: &str,
        description: Option<&str>,
    ) -> Response {
        let mut challenge = match &self.resource_metadata_url {
            Some(url) => format!(r#"Bearer resource_metadata="{url}""#),
            None => r#"Bearer realm="skillgate""#.to_owned(),
        };
        if presented {
            challenge.push_str(r#", error="invalid_token""#);
        }
        if let Some(description) = description {
            // A quoted-string of visible ASCII: whatever else the text holds is left out.
            let quoted: String = description
                .chars()
                .filter(|c| (c.is_ascii_graphic() || *c == ' ') && *c != '"' && *c != '\\')
                .collect();
            challenge.push_str(&format!(r#", error_description="{quoted}""#));
        }
        let mut response = refuse(StatusCode::UNAUTHORIZED, "unauthorized", message);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The token of an `Authorization: Bearer …` header; `Err` for any other shape.
pub(crate) fn bearer_token(value: &HeaderValue) -> Result<&str, ()> {
    let text = value.to_str().map_err(|_| ())?;
    let (scheme, token) = text.split_once(' ').ok_or(())?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(());
    }
    let token = token.trim();
    if token.is_empty() { Err(()) } else { Ok(token) }
}

/// The middleware: admits a request into `/mcp` or refuses it.
#[tracing::instrument(skip_all, fields(method = %request.method()))]
pub async fn admit(
    State(admission): State<Arc<Admission>>,
    mut request: Request,
    next: Next,
) -> Response {
    match check(&admission, request.headers(), request.uri()).await {
        Ok((caller, gateway)) => {
            tracing::debug!(key = %caller.key_name, scope = %caller.scope, "admitted");
            request.extensions_mut().insert(caller);
            request.extensions_mut().insert(gateway);
            let started = std::time::Instant::now();
            let response = next.run(request).await;
            admission.metrics.observe_request(started.elapsed());
            response
        }
        Err(refusal) => {
            admission
                .metrics
                .count_refusal(status_word(refusal.status()));
            refusal
        }
    }
}

fn status_word(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "401",
        StatusCode::FORBIDDEN => "403",
        StatusCode::SERVICE_UNAVAILABLE => "503",
        _ => "other",
    }
}

/// The caller a request is admitted as and the gateway of its workspace, or the refusal to
/// answer with.
async fn check(
    admission: &Admission,
    headers: &HeaderMap,
    uri: &http::Uri,
) -> Result<(AgentCaller, CallerGateway), Response> {
    if admission.loopback_bind && !host_is_loopback(headers, uri) {
        tracing::warn!("refused /mcp request with a non-loopback Host (DNS rebinding?)");
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the Host header is not allowed",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .is_ok_and(|origin| admission.origin_is_allowed(origin));
        if !allowed {
            tracing::warn!(origin = ?origin, "refused /mcp request from a disallowed Origin");
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the Origin header is not allowed",
            ));
        }
    }
    // Anonymous callers and OAuth access tokens are the default workspace's.
    let default = || CallerGateway(admission.workspaces.default_workspace().gateway.clone());
    let caller = match headers.get(header::AUTHORIZATION) {
        None => match &admission.anonymous_scope {
            Some(scope) => AgentCaller {
                key_id: ANONYMOUS_KEY_ID,
                key_name: ANONYMOUS_KEY_NAME.to_owned(),
                scope: scope.clone(),
            },
            None => {
                tracing::debug!("refused /mcp request without an agent key");
                return Err(admission.unauthorized(false));
            }
        },
        Some(value) => {
            let Ok(token) = bearer_token(value) else {
                tracing::debug!("refused /mcp request with a malformed Authorization header");
                return Err(admission.unauthorized(true));
            };
            if let Some(issuers) = admission
                .issuers
                .as_ref()
                .filter(|_| TrustedIssuers::is_jwt(token))
            {
                return external_caller(admission, issuers, token).await;
            }
            if let Some(oauth) = admission
                .oauth
                .as_ref()
                .filter(|_| token.starts_with(ACCESS_TOKEN_PREFIX))
            {
                return Ok((oauth_caller(admission, oauth, token).await?, default()));
            }
            let started = std::time::Instant::now();
            // The default workspace's keys, most of them, are checked without a lookup.
            let opened;
            let served = match workspace_of_key(token) {
                None => admission.workspaces.default_workspace(),
                Some(name) => match admission.workspaces.get(name).await {
                    Ok(Some(served)) => {
                        opened = served;
                        &opened
                    }
                    Ok(None) => {
                        tracing::info!(
                            "refused /mcp request with a key of no workspace served here"
                        );
                        return Err(admission.unauthorized(true));
                    }
                    Err(error) => {
                        tracing::error!(%error, "cannot open the workspace a key names");
                        return Err(unavailable("agent keys"));
                    }
                },
            };
            let checked = served.keys.authenticate(token, Utc::now()).await;
            admission.metrics.observe(Phase::Auth, started.elapsed());
            match checked {
                Ok(info) => {
                    let caller = AgentCaller {
                        key_id: info.id,
                        key_name: info.name,
                        scope: info.scope,
                    };
                    return Ok((caller, CallerGateway(served.gateway.clone())));
                }
                Err(KeyError::Store(error)) => {
                    tracing::error!(%error, "cannot check an agent key");
                    return Err(unavailable("agent keys"));
                }
                Err(_) => {
                    tracing::info!("refused /mcp request with an invalid, revoked or expired key");
                    return Err(admission.unauthorized(true));
                }
            }
        }
    };
    Ok((caller, default()))
}

/// Why a token of a trusted issuer was not admitted.
enum ExternalRefusal {
    Token(TokenRefusal),
    /// The claims map to a workspace this server does not serve.
    NoWorkspace(Slug),
    /// The claims map to a scope the workspace's catalog lacks.
    UnknownScope,
    /// An admin revoked the subject's credential.
    Revoked,
}

impl ExternalRefusal {
    fn code(&self) -> &'static str {
        match self {
            Self::Token(refusal) => refusal.code(),
            Self::NoWorkspace(_) => "no_workspace",
            Self::UnknownScope => "unknown_scope",
            Self::Revoked => "revoked",
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Token(refusal) => refusal.to_string(),
            Self::NoWorkspace(workspace) => {
                format!(
                    "the token's claims map to workspace `{workspace}`, which is not served here"
                )
            }
            Self::UnknownScope => "the token's claims map to a scope this workspace lacks".into(),
            Self::Revoked => "the token's subject was revoked here".into(),
        }
    }
}

/// The caller an access token of a trusted issuer is admitted as: the credential of its
/// subject in the workspace its claims map to, made on its first token. A refusal is
/// audited in the platform's chain before it is answered (a 503 instead if that fails):
/// an `admin_refused` of action `mcp.token` naming the subject if the token verified, the
/// issuer it claims, and the reason.
async fn external_caller(
    admission: &Admission,
    issuers: &TrustedIssuers,
    token: &str,
) -> Result<(AgentCaller, CallerGateway), Response> {
    let started = std::time::Instant::now();
    let verified = issuers.authenticate(token).await;
    let outcome = match &verified {
        Ok(caller) => admit_external(admission, caller).await,
        Err(refusal) => Ok(Err(ExternalRefusal::Token(refusal.clone()))),
    };
    admission.metrics.observe(Phase::Auth, started.elapsed());
    let refusal = match outcome {
        Ok(Ok(admitted)) => return Ok(admitted),
        Ok(Err(refusal)) => refusal,
        Err(response) => return Err(response),
    };
    let actor = match &verified {
        Ok(caller) => skillgate_core::admin::external_credential_name(caller),
        Err(_) => "unverified-token".to_owned(),
    };
    let issuer = match &verified {
        Ok(caller) => caller.issuer.clone(),
        Err(_) => TrustedIssuers::claimed_issuer(token).unwrap_or_default(),
    };
    let message = refusal.message();
    tracing::info!(code = refusal.code(), %issuer, "refused /mcp request with an external token");
    let recorded = admission
        .workspaces
        .default_workspace()
        .admin
        .record_refusal(
            &actor,
            "mcp.token",
            &format!("issuer:{issuer}"),
            refusal.code(),
            &message,
        )
        .await;
    if let Err(error) = recorded {
        tracing::error!(%error, "cannot audit a refused external token");
        return Err(unavailable("access tokens"));
    }
    Err(match refusal {
        ExternalRefusal::Token(TokenRefusal::IssuerUnavailable(_)) => {
            let mut response = refuse(StatusCode::SERVICE_UNAVAILABLE, "unavailable", &message);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, RETRY_AFTER_SECONDS);
            response
        }
        _ => admission.unauthorized_with(true, &message, Some(&message)),
    })
}

/// A verified external caller, admitted into its workspace: `Ok(Err(_))` for a refusal,
/// `Err` for a response already made (the database could not answer).
async fn admit_external(
    admission: &Admission,
    caller: &ExternalCaller,
) -> Result<Result<(AgentCaller, CallerGateway), ExternalRefusal>, Response> {
    let served = match admission.workspaces.get(caller.workspace.as_str()).await {
        Ok(Some(served)) => served,
        Ok(None) => return Ok(Err(ExternalRefusal::NoWorkspace(caller.workspace.clone()))),
        Err(error) => {
            tracing::error!(%error, "cannot open the workspace a token maps to");
            return Err(unavailable("access tokens"));
        }
    };
    match served.admin.external_credential(caller).await {
        Ok(ExternalAdmission::Admitted(info)) => Ok(Ok((
            AgentCaller {
                key_id: info.id,
                key_name: info.name,
                scope: info.scope,
            },
            CallerGateway(served.gateway.clone()),
        ))),
        Ok(ExternalAdmission::Revoked) => Ok(Err(ExternalRefusal::Revoked)),
        Ok(ExternalAdmission::UnknownScope) => Ok(Err(ExternalRefusal::UnknownScope)),
        Err(error) => {
            tracing::error!(%error, "cannot admit an external subject");
            Err(unavailable("access tokens"))
        }
    }
}

/// The caller an OAuth access token is admitted as: its grant's credential row, named
/// after the person and the client.
async fn oauth_caller(
    admission: &Admission,
    oauth: &OAuthService,
    token: &str,
) -> Result<AgentCaller, Response> {
    let started = std::time::Instant::now();
    let checked = oauth.authenticate(token, Utc::now()).await;
    admission.metrics.observe(Phase::Auth, started.elapsed());
    match checked {
        Ok(Some(caller)) => Ok(AgentCaller {
            key_id: caller.key_id,
            key_name: caller.key_name,
            scope: caller.scope,
        }),
        Ok(None) => {
            tracing::info!("refused /mcp request with an invalid, expired or revoked access token");
            Err(admission.unauthorized(true))
        }
        Err(error) => {
            tracing::error!(%error, "cannot check an oauth access token");
            Err(unavailable("access tokens"))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::extract::Extension;
    use axum::routing::post;
    use http::Request;
    use skillgate_core::admin::AdminService;
    use skillgate_core::audit::AuditLog;
    use skillgate_core::gateway::{Gateway, GatewayOptions};
    use skillgate_core::keys::AgentKeys;
    use skillgate_core::policy::CatalogHandle;
    use skillgate_core::store::Store;
    use skillgate_core::upstream::UpstreamPool;
    use tower::ServiceExt as _;

    use super::super::workspaces::Served;
    use super::*;

    struct Fixture {
        keys: AgentKeys,
        gateway: Arc<Gateway>,
        admin: Arc<AdminService>,
        store: Store,
        key: String,
    }

    async fn fixture() -> Fixture {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let keys = AgentKeys::new(store.clone());
        let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
        let audit = AuditLog::new(store.clone());
        let admin = Arc::new(AdminService::new(
            store.clone(),
            audit.clone(),
            catalog.clone(),
        ));
        let gateway = Arc::new(Gateway::new(
            store.clone(),
            catalog,
            audit,
            Arc::new(UpstreamPool::default()),
            GatewayOptions::default(),
        ));
        let support = Slug::parse("support").unwrap();
        let (_, key) = keys
            .create("bot", &support, std::slice::from_ref(&support), None, None)
            .await
            .unwrap();
        Fixture {
            keys,
            gateway,
            admin,
            store,
            key: key.expose().to_owned(),
        }
    }

    fn admission(f: &Fixture, loopback_bind: bool) -> Admission {
        Admission {
            metrics: Arc::new(Metrics::new()),
            workspaces: Arc::new(Workspaces::default_only(Served {
                keys: f.keys.clone(),
                gateway: f.gateway.clone(),
                admin: f.admin.clone(),
            })),
            loopback_bind,
            allowed_origins: vec!["https://console.example.com".into()],
            anonymous_scope: None,
            oauth: None,
            issuers: None,
            resource_metadata_url: None,
        }
    }

    /// The middleware around a stub that answers with the admitted caller.
    fn app(admission: Admission) -> Router {
        async fn whoami(Extension(caller): Extension<AgentCaller>) -> String {
            format!("{}:{}:{}", caller.key_id, caller.key_name, caller.scope)
        }
        Router::new()
            .route("/mcp", post(whoami))
            .route_layer(axum::middleware::from_fn_with_state(
                Arc::new(admission),
                admit,
            ))
    }

    fn request(host: &str, auth: Option<&str>, origin: Option<&str>) -> Request<Body> {
        let mut builder = Request::post("/mcp").header(header::HOST, host);
        if let Some(auth) = auth {
            builder = builder.header(header::AUTHORIZATION, auth);
        }
        if let Some(origin) = origin {
            builder = builder.header(header::ORIGIN, origin);
        }
        builder.body(Body::empty()).unwrap()
    }

    async fn send(app: Router, request: Request<Body>) -> (StatusCode, HeaderMap, String) {
        let response = app.oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 16).await.unwrap();
        (
            parts.status,
            parts.headers,
            String::from_utf8(bytes.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn a_valid_key_is_admitted_as_its_key_and_scope() {
        let f = fixture().await;
        let bearer = format!("Bearer {}", f.key);
        for host in ["127.0.0.1:3000", "localhost", "LOCALHOST:1", "[::1]:8080"] {
            let (status, _, body) =
                send(app(admission(&f, true)), request(host, Some(&bearer), None)).await;
            assert_eq!(status, StatusCode::OK, "{host}");
            assert!(body.ends_with(":bot:support"), "{body}");
        }
    }

    #[tokio::test]
    async fn a_missing_malformed_unknown_or_revoked_key_is_refused_with_a_bearer_challenge() {
        let f = fixture().await;
        let unknown = format!("Bearer sgk_{}", "A".repeat(43));
        let basic = format!("Basic {}", f.key);
        for auth in [
            None,
            Some("Bearer"),
            Some(basic.as_str()),
            Some(unknown.as_str()),
        ] {
            let (status, headers, body) =
                send(app(admission(&f, true)), request("127.0.0.1:1", auth, None)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?}");
            // A credential that was presented and refused is `invalid_token` (RFC 6750).
            let challenge = match auth {
                None => r#"Bearer realm="skillgate""#,
                Some(_) => r#"Bearer realm="skillgate", error="invalid_token""#,
            };
            assert_eq!(headers[header::WWW_AUTHENTICATE], challenge);
            assert!(body.contains("\"unauthorized\""), "{body}");
        }
        f.keys.revoke("bot").await.unwrap();
        let bearer = format!("Bearer {}", f.key);
        let (status, _, _) = send(
            app(admission(&f, true)),
            request("127.0.0.1:1", Some(&bearer), None),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn a_non_loopback_host_is_forbidden_on_a_loopback_bind_even_with_a_valid_key() {
        let f = fixture().await;
        let bearer = format!("Bearer {}", f.key);
        for host in [
            "evil.example.com",
            "127.0.0.1.nip.io:3000",
            "localhost.evil:80",
        ] {
            let (status, _, _) =
                send(app(admission(&f, true)), request(host, Some(&bearer), None)).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{host}");
        }
        let (status, _, _) = send(
            app(admission(&f, false)),
            request("gateway.example.com", Some(&bearer), None),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn origins_are_checked_against_loopback_and_the_allowed_list() {
        let f = fixture().await;
        let bearer = format!("Bearer {}", f.key);
        let cases = [
            ("http://localhost:5173", true, StatusCode::OK),
            ("http://127.0.0.1", true, StatusCode::OK),
            ("https://console.example.com", true, StatusCode::OK),
            ("https://Console.Example.com/", false, StatusCode::OK),
            ("http://localhost:5173", false, StatusCode::FORBIDDEN),
            ("https://evil.example.com", true, StatusCode::FORBIDDEN),
            ("null", true, StatusCode::FORBIDDEN),
            ("http://localhost.evil.com", true, StatusCode::FORBIDDEN),
        ];
        for (origin, loopback, expected) in cases {
            let host = if loopback {
                "127.0.0.1:3000"
            } else {
                "gw.example.com"
            };
            let (status, _, _) = send(
                app(admission(&f, loopback)),
                request(host, Some(&bearer), Some(origin)),
            )
            .await;
            assert_eq!(status, expected, "{origin} loopback={loopback}");
        }
    }

    #[tokio::test]
    async fn without_a_key_an_anonymous_scope_admits_as_key_zero_but_a_bad_key_is_still_refused() {
        let f = fixture().await;
        let mut anonymous = admission(&f, true);
        anonymous.anonymous_scope = Some(Slug::parse("support").unwrap());
        let (status, _, body) = send(
            app(anonymous.clone()),
            request("localhost:3000", None, None),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "0:anonymous:support");
        let (status, _, _) = send(
            app(anonymous),
            request("localhost:3000", Some("Bearer sgk_nope"), None),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn a_store_failure_is_service_unavailable_not_unauthorized() {
        let f = fixture().await;
        // The database answers, but not with keys: a failure, not a refusal.
        sqlx::query("DROP TABLE agent_keys")
            .execute(f.store.test_pool())
            .await
            .unwrap();
        let bearer = format!("Bearer {}", f.key);
        let (status, headers, body) = send(
            app(admission(&f, true)),
            request("127.0.0.1:3000", Some(&bearer), None),
        )
        .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(headers[header::RETRY_AFTER], "2");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], "unavailable");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("nothing was executed")),
            "{body}"
        );
    }
}
