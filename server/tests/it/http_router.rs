//! The whole router as `serve` builds it (`cmd::serve::build`: a SQLite file in a temporary
//! directory and the real services), driven in process with `tower::ServiceExt::oneshot`:
//! no socket, no binary. What the layers decide before any handler runs is checked here:
//! health, the `/mcp` bearer challenge, console refusals, unknown paths and body limits.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, Response, StatusCode, header};
use clap::Parser as _;
use serde_json::Value;
use skillgate::cmd::cli::{Cli, Command};
use tempfile::TempDir;
use tower::ServiceExt as _;

/// The address MCP clients reach the server at: the OAuth issuer its challenge names.
const PUBLIC_URL: &str = "https://gateway.example.com";
const HOST: &str = "127.0.0.1:3000";
/// The console's form and server-function body limit (8 MiB).
const CONSOLE_BODY_LIMIT: usize = 8 * 1024 * 1024;

/// The router of `skillgate serve --bind 127.0.0.1:3000 --public-url https://gateway.example.com`
/// on a fresh SQLite file; the directory lives as long as the router is used.
async fn router() -> (Router, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", dir.path().join("skillgate.db").display());
    let site_root = dir.path().join("site");
    let cli = Cli::try_parse_from([
        "skillgate",
        "--database-url",
        &database_url,
        "serve",
        "--bind",
        HOST,
        "--public-url",
        PUBLIC_URL,
        "--site-root",
        site_root.to_str().unwrap(),
    ])
    .unwrap();
    let Some(Command::Serve(args)) = cli.command else {
        panic!("`serve` parses as the serve command");
    };
    let (router, _checkpoints) = skillgate::cmd::serve::build(&database_url, &args)
        .await
        .unwrap();
    (router, dir)
}

/// A request as the listener hands it over: with the peer's address.
fn request(method: Method, path: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, HOST)
        .extension(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 50_000))))
}

async fn send(router: &Router, request: Request<Body>) -> Response<Body> {
    router.clone().oneshot(request).await.unwrap()
}

async fn text(response: Response<Body>) -> String {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn health_answers_200_with_the_servers_version() {
    let (router, _dir) = router().await;
    let response = send(
        &router,
        request(Method::GET, "/healthz")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn mcp_without_a_key_answers_401_with_a_challenge_naming_the_resource_metadata_it_serves() {
    let (router, _dir) = router().await;
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
    let response = send(
        &router,
        request(Method::POST, "/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(Body::from(initialize))
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // MCP authorization: the 401 points at the protected resource metadata (RFC 9728 §5.1).
    let metadata_url = format!("{PUBLIC_URL}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        response.headers()[header::WWW_AUTHENTICATE],
        format!(r#"Bearer resource_metadata="{metadata_url}""#).as_str()
    );
    let body: Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(body["error"], "unauthorized");

    // A client follows the challenge: the document it names is served and names `/mcp`.
    let path = metadata_url.strip_prefix(PUBLIC_URL).unwrap();
    let response = send(
        &router,
        request(Method::GET, path).body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let metadata: Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(metadata["resource"], format!("{PUBLIC_URL}/mcp"));
    assert_eq!(metadata["authorization_servers"][0], PUBLIC_URL);
}

#[tokio::test]
async fn a_console_server_function_without_a_session_answers_401() {
    let (router, _dir) = router().await;
    // The hydrated page's background fetch, same origin, but with no session cookie.
    let response = send(
        &router,
        request(Method::POST, "/console/api/list_sessions")
            .header(header::ORIGIN, format!("http://{HOST}"))
            .header("sec-fetch-site", "same-origin")
            .header("sec-fetch-mode", "cors")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(response.headers().get(header::SET_COOKIE).is_none());
    // The server function ran and refused: its JSON-encoded `ConsoleError::Unauthorized`.
    assert_eq!(text(response).await, r#""Unauthorized""#);
}

#[tokio::test]
async fn a_console_page_without_a_session_is_sent_to_sign_in_and_back() {
    let (router, _dir) = router().await;
    let response = send(
        &router,
        request(Method::GET, "/sessions?page=2")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        response.headers()[header::LOCATION],
        "/login?next=%2Fsessions%3Fpage%3D2"
    );
}

#[tokio::test]
async fn an_unknown_route_answers_404() {
    let (router, _dir) = router().await;
    let response = send(
        &router,
        request(Method::GET, "/api/v1/no-such-route")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_console_body_past_the_limit_answers_413_and_one_within_it_reaches_its_handler() {
    let (router, _dir) = router().await;
    let post = |body: Vec<u8>| {
        request(Method::POST, "/console/api/preview_markdown")
            .header(header::ORIGIN, format!("http://{HOST}"))
            .header("sec-fetch-site", "same-origin")
            .header("sec-fetch-mode", "cors")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::CONTENT_LENGTH, body.len())
            .body(Body::from(body))
            .unwrap()
    };
    let form = |length: usize| {
        let mut body = b"text=".to_vec();
        body.resize(length, b'a');
        body
    };
    let response = send(&router, post(form(CONSOLE_BODY_LIMIT + 1))).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(response.headers()[header::CONNECTION], "close");
    assert!(
        text(response).await.starts_with("Payload Too Large"),
        "the refusal says why"
    );
    // A body of ordinary size, and one just under the console's limit (past axum's own
    // 2 MiB default, which once turned it into a 500), reach the server function, which
    // answers: signed out.
    for length in [1024, CONSOLE_BODY_LIMIT] {
        let response = send(&router, post(form(length))).await;
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{length} bytes"
        );
    }
}
