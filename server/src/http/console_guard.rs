//! Refuses state-changing console requests that did not come from the console's own pages.
//!
//! SameSite=Strict keeps the console cookie from other *sites*, but a page on another port
//! or subdomain of the same site is same-site and gets it, and one admin action (a stdio
//! upstream) starts a command on the host. So every console request other than GET, HEAD
//! and OPTIONS passes these checks, in this order, and is refused (403, nothing changed) at
//! the first that fails:
//!
//! 1. `Sec-Fetch-Site`, when the browser sends it, is `same-origin` or `none`.
//! 2. `Origin`, when present, is the console's own origin (`http://` and the request's
//!    `Host`) or one named with `--public-origin` (a TLS-terminating proxy's address).
//! 3. A form navigation (`Sec-Fetch-Mode: navigate`, or no `Sec-Fetch-Mode` and a body a
//!    form can send) carries the session's form token (`app::csrf`), as a `csrf_token`
//!    field or an `x-csrf-token` header.
//!
//! Background calls of the hydrated page are `fetch`es (mode `cors`): checks 1 and 2 cover
//! them. Page loads get the session's token put into the request, for the page's forms.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use rand::RngCore;
use skillgate_app::components::csrf::FIELD;
use skillgate_app::components::csrf::ssr::{RequestFormToken, SESSION_KEY};
use skillgate_app::shared::ssr::session_user_id;
use subtle::ConstantTimeEq;
use tower_sessions::{Expiry, Session};
use url::{Origin, Url};

/// A session made only to hold the sign-in form's token ends this long after it was made,
/// so anonymous visits do not keep rows in the session table for a whole console day.
const PRE_LOGIN_LIFETIME: time::Duration = time::Duration::hours(1);

/// The largest form body the guard reads to find the token.
pub(crate) const MAX_FORM_BYTES: usize = 8 * 1024 * 1024;

const TOKEN_HEADER: &str = "x-csrf-token";

/// The guard's configuration: origins, besides the request's own, the console is served at.
#[derive(Debug, Clone, Default)]
pub struct ConsoleGuard {
    public_origins: Arc<[Origin]>,
}

impl ConsoleGuard {
    /// `public_origins` are `scheme://host[:port]` as a browser writes them in `Origin`.
    pub fn new(public_origins: &[String]) -> anyhow::Result<Self> {
        let public_origins = public_origins
            .iter()
            .map(|text| parse_configured_origin(text))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            public_origins: public_origins.into(),
        })
    }

    fn allows(&self, origin: &Origin, own: Option<&Origin>) -> bool {
        own == Some(origin) || self.public_origins.contains(origin)
    }
}

fn parse_configured_origin(text: &str) -> anyhow::Result<Origin> {
    let url = Url::parse(text.trim())
        .map_err(|e| anyhow::anyhow!("--public-origin `{text}` is not a URL: {e}"))?;
    anyhow::ensure!(
        matches!(url.scheme(), "http" | "https")
            && url.has_host()
            && url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none(),
        "--public-origin `{text}` must be a scheme and host as a browser sends them in \
         `Origin`, such as https://skillgate.example.com (no path)"
    );
    Ok(url.origin())
}

/// Why a request was refused. The text is what the browser shows.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    CrossSite { site: String },
    Origin { seen: String, own: String },
    FormToken,
    FormTooLarge,
}

impl Refusal {
    fn message(&self) -> String {
        match self {
            Refusal::CrossSite { site } => format!(
                "Refused: your browser says this request came from another site \
                 (Sec-Fetch-Site: {site}). The console accepts changes only from its own \
                 pages.\n"
            ),
            Refusal::Origin { seen, own } => format!(
                "Refused: this request came from {seen}, not from the console at {own}. The \
                 console accepts changes only from its own pages. If it is reached through \
                 a proxy at another address, start skillgate with --public-origin naming \
                 that address.\n"
            ),
            Refusal::FormToken => "Refused: this form did not carry the form token of your \
                 console session (the page is out of date, or the form came from \
                 elsewhere). Reload the page and submit it again.\n"
                .to_owned(),
            Refusal::FormTooLarge => {
                format!("Refused: the form is larger than {MAX_FORM_BYTES} bytes.\n")
            }
        }
    }

    fn into_response(self, request: &RequestSummary) -> Response {
        tracing::warn!(
            method = %request.method,
            path = %request.path,
            origin = request.origin.as_deref().unwrap_or("-"),
            sec_fetch_site = request.site.as_deref().unwrap_or("-"),
            refusal = ?self,
            "refused a console request that did not come from the console's pages"
        );
        let status = match self {
            Refusal::FormTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::FORBIDDEN,
        };
        (
            status,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                ),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
            ],
            self.message(),
        )
            .into_response()
    }
}

/// What the refusal log names about a request.
struct RequestSummary {
    method: Method,
    path: String,
    origin: Option<String>,
    site: Option<String>,
}

fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap_or("(not text)"))
}

/// `http://` and the request's `Host`: the binary serves plain HTTP, so that is the origin
/// of the pages a browser got from it directly.
fn own_origin(request: &Request) -> Option<Origin> {
    let authority = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|host| host.parse::<http::uri::Authority>().ok())
        .or_else(|| request.uri().authority().cloned())?;
    if authority.as_str().contains('@') {
        return None;
    }
    Url::parse(&format!("http://{authority}"))
        .ok()
        .map(|url| url.origin())
}

/// Checks 1 and 2 of the module documentation.
fn check_origin(guard: &ConsoleGuard, request: &Request) -> Result<(), Refusal> {
    let headers = request.headers();
    if let Some(site) = header_text(headers, "sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return Err(Refusal::CrossSite {
            site: site.to_owned(),
        });
    }
    let Some(seen) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let seen_text = seen.to_str().unwrap_or("(not text)");
    let own = own_origin(request);
    // `Origin: null` and anything else that is not a URL never match.
    let seen_origin = Url::parse(seen_text).ok().map(|url| url.origin());
    match seen_origin {
        Some(origin) if origin.is_tuple() && guard.allows(&origin, own.as_ref()) => Ok(()),
        _ => Err(Refusal::Origin {
            seen: seen_text.to_owned(),
            own: own.map_or_else(
                || "(no Host header)".to_owned(),
                |o| o.ascii_serialization(),
            ),
        }),
    }
}

/// True for a request a browser sends as a form navigation, or that a form could have
/// sent: those must carry the form token. Fails closed on anything unknown.
fn needs_form_token(headers: &HeaderMap) -> bool {
    match header_text(headers, "sec-fetch-mode") {
        Some(mode) => !matches!(mode, "cors" | "same-origin"),
        None => {
            let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
                return true;
            };
            let essence = content_type
                .to_str()
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            matches!(
                essence.as_str(),
                "application/x-www-form-urlencoded" | "multipart/form-data" | "text/plain" | ""
            )
        }
    }
}

/// The token a request carries: the header, or else the first `csrf_token` field of a
/// url-encoded or multipart body.
async fn submitted_token(headers: &HeaderMap, body: &axum::body::Bytes) -> Option<String> {
    if let Some(token) = headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(token.to_owned());
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())?
        .trim();
    // Media types compare without case; a multipart boundary does not.
    let essence = content_type.to_ascii_lowercase();
    if essence.starts_with("application/x-www-form-urlencoded") {
        return form_urlencoded::parse(body)
            .find(|(name, _)| name == FIELD)
            .map(|(_, value)| value.into_owned());
    }
    if essence.starts_with("multipart/form-data") {
        return multipart_token(content_type, body.clone()).await;
    }
    None
}

/// The first `csrf_token` field of a multipart body (forms put it first; file fields before
/// it are skipped, not kept). `None` for a body that is not well-formed multipart.
async fn multipart_token(content_type: &str, body: axum::body::Bytes) -> Option<String> {
    let boundary = multer::parse_boundary(content_type).ok()?;
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    while let Ok(Some(field)) = form.next_field().await {
        if field.name() == Some(FIELD) {
            return field.text().await.ok();
        }
    }
    None
}

fn tokens_match(expected: Option<&str>, submitted: Option<&str>) -> bool {
    match (expected, submitted) {
        (Some(expected), Some(submitted)) if !expected.is_empty() => {
            bool::from(expected.as_bytes().ct_eq(submitted.as_bytes()))
        }
        _ => false,
    }
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Gives the session a fresh form token; sign-in calls it, so the token a browser held
/// before signing in is not the one of the signed-in session.
pub async fn rotate_form_token(session: &Session) -> Result<(), tower_sessions::session::Error> {
    session.insert(SESSION_KEY, new_token()).await
}

/// The token for a page's forms: the session's, made now for the sign-in page and for
/// signed-in sessions that have none yet; none for other anonymous pages (they redirect to
/// sign-in), so a stray visit creates no session.
async fn page_token(
    session: &Session,
    sign_in_page: bool,
) -> Result<Option<String>, tower_sessions::session::Error> {
    if let Some(token) = session.get::<String>(SESSION_KEY).await? {
        return Ok(Some(token));
    }
    let signed_in = session_user_id(session).await?.is_some();
    if !signed_in && !sign_in_page {
        return Ok(None);
    }
    let token = new_token();
    session.insert(SESSION_KEY, &token).await?;
    if !signed_in {
        session.set_expiry(Some(Expiry::OnInactivity(PRE_LOGIN_LIFETIME)));
    }
    Ok(Some(token))
}

fn internal(error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "console guard cannot read the session");
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// The middleware: see the module documentation.
pub async fn guard(
    State(guard): State<ConsoleGuard>,
    session: Session,
    mut request: Request,
    next: Next,
) -> Response {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        let path = request.uri().path();
        let sign_in_page = path == "/login";
        if sign_in_page || !is_public(path) {
            match page_token(&session, sign_in_page).await {
                Ok(Some(token)) => {
                    request.extensions_mut().insert(RequestFormToken(token));
                }
                Ok(None) => {}
                Err(error) => return internal(error),
            }
        }
        return next.run(request).await;
    }

    let summary = RequestSummary {
        method: request.method().clone(),
        path: request.uri().path().to_owned(),
        origin: header_text(request.headers(), "origin").map(str::to_owned),
        site: header_text(request.headers(), "sec-fetch-site").map(str::to_owned),
    };
    if let Err(refusal) = check_origin(&guard, &request) {
        return refusal.into_response(&summary);
    }
    if !needs_form_token(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM_BYTES).await else {
        return Refusal::FormTooLarge.into_response(&summary);
    };
    let expected = match session.get::<String>(SESSION_KEY).await {
        Ok(expected) => expected,
        Err(error) => return internal(error),
    };
    let submitted = submitted_token(&parts.headers, &bytes).await;
    if !tokens_match(expected.as_deref(), submitted.as_deref()) {
        if summary.path == "/login" {
            // Same origin, but the form outlived its pre-login session: say so on the page.
            tracing::info!("sign-in form with a stale token; sent back to sign in");
            return Redirect::to("/login?error=expired").into_response();
        }
        return Refusal::FormToken.into_response(&summary);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Paths anyone may reach: the sign-in page, health, built assets, and the machine
/// endpoints that authenticate on their own (MCP with agent keys, server functions that
/// check the console role themselves).
pub(crate) fn is_public(path: &str) -> bool {
    const PREFIXES: &[&str] = &["/pkg/", "/mcp", "/api/", "/console/api/", "/auth/sso/"];
    const EXACT: &[&str] = &["/login", "/logout", "/healthz"];
    EXACT.contains(&path)
        || PREFIXES.iter().any(|p| path.starts_with(p))
        || path
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri("/console/api/revoke_key");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::empty()).unwrap()
    }

    fn check(guard: &ConsoleGuard, headers: &[(&str, &str)]) -> Result<(), Refusal> {
        check_origin(guard, &request(headers))
    }

    #[test]
    fn only_the_consoles_own_origin_or_a_configured_one_is_accepted() {
        let plain = ConsoleGuard::default();
        let host = ("host", "127.0.0.1:3000");
        assert_eq!(
            check(&plain, &[host, ("origin", "http://127.0.0.1:3000")]),
            Ok(())
        );
        for other in [
            "http://127.0.0.1:1",
            "https://127.0.0.1:3000",
            "http://localhost:3000",
            "http://evil.example",
            "null",
            "not a url",
        ] {
            let refusal = check(&plain, &[host, ("origin", other)]).unwrap_err();
            assert!(
                matches!(&refusal, Refusal::Origin { seen, own } if seen == other && own == "http://127.0.0.1:3000"),
                "{other}: {refusal:?}"
            );
        }
        // Default ports and letter case do not matter.
        assert_eq!(
            check(
                &plain,
                &[
                    ("host", "Console.Example:80"),
                    ("origin", "http://console.example")
                ]
            ),
            Ok(())
        );
        // Without a Host header nothing is the console's own origin.
        assert!(check(&plain, &[("origin", "http://127.0.0.1:3000")]).is_err());

        let proxied = ConsoleGuard::new(&["https://skillgate.example.com".to_owned()]).unwrap();
        let internal_host = ("host", "10.0.0.5:3000");
        assert_eq!(
            check(
                &proxied,
                &[
                    internal_host,
                    ("origin", "https://skillgate.example.com:443")
                ]
            ),
            Ok(())
        );
        assert!(
            check(
                &proxied,
                &[internal_host, ("origin", "http://skillgate.example.com")]
            )
            .is_err()
        );
    }

    #[test]
    fn fetch_metadata_from_another_site_is_refused_even_without_origin() {
        let guard = ConsoleGuard::default();
        let host = ("host", "127.0.0.1:3000");
        for site in ["cross-site", "same-site", "something-new"] {
            assert_eq!(
                check(&guard, &[host, ("sec-fetch-site", site)]),
                Err(Refusal::CrossSite {
                    site: site.to_owned()
                })
            );
        }
        for site in ["same-origin", "none"] {
            assert_eq!(check(&guard, &[host, ("sec-fetch-site", site)]), Ok(()));
        }
        // No Origin and no Fetch Metadata: a program, not a browser; the token check decides.
        assert_eq!(check(&guard, &[host]), Ok(()));
    }

    #[test]
    fn form_navigations_and_form_bodies_need_the_token_and_fetches_do_not() {
        let headers = |pairs: &[(&str, &str)]| request(pairs).headers().clone();
        assert!(needs_form_token(&headers(&[(
            "sec-fetch-mode",
            "navigate"
        )])));
        assert!(needs_form_token(&headers(&[("sec-fetch-mode", "no-cors")])));
        assert!(!needs_form_token(&headers(&[("sec-fetch-mode", "cors")])));
        assert!(!needs_form_token(&headers(&[(
            "sec-fetch-mode",
            "same-origin"
        )])));
        for form in [
            "application/x-www-form-urlencoded",
            "Multipart/Form-Data; boundary=x",
            "text/plain;charset=UTF-8",
        ] {
            assert!(
                needs_form_token(&headers(&[("content-type", form)])),
                "{form}"
            );
        }
        assert!(needs_form_token(&headers(&[])));
        assert!(!needs_form_token(&headers(&[(
            "content-type",
            "application/json"
        )])));
    }

    #[tokio::test]
    async fn the_token_is_read_from_the_header_or_the_form_field_and_compared_exactly() {
        let bytes = |b: &'static [u8]| axum::body::Bytes::from_static(b);
        let form = request(&[("content-type", "application/x-www-form-urlencoded")]);
        let body = bytes(b"name=victim&csrf_token=abc%20def");
        assert_eq!(
            submitted_token(form.headers(), &body).await.as_deref(),
            Some("abc def")
        );
        let header = request(&[("x-csrf-token", "from-header")]);
        assert_eq!(
            submitted_token(header.headers(), &bytes(b"csrf_token=ignored"))
                .await
                .as_deref(),
            Some("from-header")
        );
        let json = request(&[("content-type", "application/json")]);
        assert_eq!(
            submitted_token(json.headers(), &bytes(b"csrf_token=x")).await,
            None
        );
        let multipart = request(&[("content-type", "multipart/form-data; boundary=XyZ")]);
        let body = bytes(
            b"--XyZ\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"a.zip\"\r\n\r\nPK\x03\x04\r\n\
              --XyZ\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\ntok\r\n--XyZ--\r\n",
        );
        assert_eq!(
            submitted_token(multipart.headers(), &body).await.as_deref(),
            Some("tok")
        );
        assert_eq!(
            submitted_token(multipart.headers(), &bytes(b"not multipart")).await,
            None
        );

        assert!(tokens_match(Some("abc"), Some("abc")));
        assert!(!tokens_match(Some("abc"), Some("abd")));
        assert!(!tokens_match(Some("abc"), Some("ab")));
        assert!(!tokens_match(Some("abc"), None));
        assert!(!tokens_match(None, Some("abc")));
        assert!(!tokens_match(Some(""), Some("")));
    }

    #[test]
    fn a_configured_public_origin_must_be_a_bare_origin() {
        assert!(ConsoleGuard::new(&["https://console.example".to_owned()]).is_ok());
        for bad in [
            "console.example",
            "https://console.example/console",
            "ftp://console.example",
            "https://user@console.example",
        ] {
            assert!(ConsoleGuard::new(&[bad.to_owned()]).is_err(), "{bad}");
        }
    }
}
