//! The gateway in front of an `https://` upstream its own CA bundle makes trusted: the demo
//! upstream (`skillgate demo-upstream --http`) behind a TLS proxy whose certificate a CA
//! made in the test issued. The admin registers it through the console's server function,
//! with the CA bundle and extra headers; agents call it governed; the proxy records what
//! the upstream received.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use common::console::{Browser, encode, fetch_post, http, navigation, page, sign_in_admin};
use common::{BIN, Reply, Server, call, init, learn};
use http::{HeaderMap, StatusCode, header};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// A certificate authority made for one test.
struct TestCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A CA whose certificate names it `name`.
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A TLS server configuration with a certificate for `localhost` this CA issued.
    fn server_config(&self) -> rustls::ServerConfig {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap()
    }
}

/// Accepts TCP connections and completes a TLS handshake on each; a handshake the client
/// aborts (it did not trust the certificate) is skipped.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

#[derive(Clone)]
struct Proxy {
    http: reqwest::Client,
    /// The demo upstream's plain `http://…/mcp`.
    target: String,
    seen: Arc<Mutex<Vec<HeaderMap>>>,
}

/// Records the request's headers and passes it on to the demo upstream, streaming the
/// answer back (a POST's answer is an SSE stream).
async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    proxy.seen.lock().unwrap().push(parts.headers.clone());
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut headers = parts.headers;
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let answer = proxy
        .http
        .request(parts.method, &proxy.target)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if ![
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::CONNECTION,
        ]
        .contains(name)
        {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap()
}

/// The demo upstream over plain HTTP in its own process, and a TLS proxy in front of it at
/// `https://localhost:PORT/mcp`.
struct DemoBehindTls {
    url: String,
    seen: Arc<Mutex<Vec<HeaderMap>>>,
    child: Child,
    task: JoinHandle<()>,
}

impl Drop for DemoBehindTls {
    fn drop(&mut self) {
        self.task.abort();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DemoBehindTls {
    async fn start(ca: &TestCa) -> Self {
        skillgate_core::upstream::install_crypto_provider();
        let mut child = Command::new(BIN)
            .args(["demo-upstream", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the demo upstream starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let target = stdout
            .lines()
            .map_while(Result::ok)
            .find_map(|line| {
                line.strip_prefix("demo upstream listening on ")
                    .map(str::to_owned)
            })
            .expect("the demo upstream prints its URL");

        let seen = Arc::new(Mutex::new(Vec::new()));
        let proxy = Proxy {
            http: reqwest::Client::new(),
            target,
            seen: seen.clone(),
        };
        let router = axum::Router::new().fallback(forward).with_state(proxy);
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://localhost:{}/mcp", tcp.local_addr().unwrap().port());
        let listener = TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(Arc::new(ca.server_config())),
        };
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self {
            url,
            seen,
            child,
            task,
        }
    }

    fn seen(&self) -> Vec<HeaderMap> {
        self.seen.lock().unwrap().clone()
    }
}

/// Registers the demo upstream at `url` through the console's server function, as the
/// upstream form's background fetch posts it; the sync reports it answers with.
async fn register(
    server: &Server,
    admin: &Browser,
    url: &str,
    ca_bundle: &str,
    headers: &str,
) -> serde_json::Value {
    let (status, text) = fetch_post(
        server,
        admin,
        "/console/api/register_upstream",
        &[
            ("name", "demo"),
            ("kind", "http"),
            ("url", url),
            ("ca_bundle", ca_bundle),
            ("headers", headers),
            ("csrf_token", &admin.token),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

fn sync_of<'a>(reports: &'a serde_json::Value, upstream: &str) -> &'a serde_json::Value {
    reports
        .as_array()
        .and_then(|reports| reports.iter().find(|r| r["upstream"] == upstream))
        .unwrap_or_else(|| panic!("a sync report for {upstream}: {reports}"))
}

/// The wait a "restarting after repeated failures; retry in 3 s" (or `217.1ms`, a
/// `Duration`'s debug form) answer names, rounded up to whole milliseconds.
fn backoff(text: &str) -> Option<Duration> {
    let (_, wait) = text.split_once("restarting after repeated failures; retry in ")?;
    let end = wait
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(wait.len());
    let number: f64 = wait[..end].parse().ok()?;
    let unit = if wait[end..].starts_with("ms") {
        0.001
    } else {
        1.0
    };
    Some(Duration::from_millis((number * unit * 1000.0).ceil() as u64))
}

async fn lookup(server: &Server) -> Reply {
    let agent = server.connect(&server.support_key).await;
    let (session, _) = init(&agent).await;
    assert!(
        !learn(&agent, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let mut reply = call(
        &agent,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1001"}),
    )
    .await;
    // A failed start (the sync's) makes the next one wait: wait it out, so the reply is
    // about this call's own attempt.
    for _ in 0..4 {
        let Some(wait) = backoff(&reply.text) else {
            break;
        };
        tokio::time::sleep(wait).await;
        reply = call(
            &agent,
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1001"}),
        )
        .await;
    }
    reply
}

#[tokio::test(flavor = "multi_thread")]
async fn a_governed_call_reaches_an_https_upstream_its_ca_bundle_trusts_with_its_extra_headers() {
    let ca = TestCa::new("Acme internal CA");
    let upstream = DemoBehindTls::start(&ca).await;
    let server = Server::start();
    let admin = sign_in_admin(&server).await;

    let reports = register(
        &server,
        &admin,
        &upstream.url,
        &ca.pem,
        "X-Api-Key: hk-live-9876\nX-Tenant: acme",
    )
    .await;
    let demo = sync_of(&reports, "demo");
    assert_eq!(demo["error"], serde_json::Value::Null, "{demo}");
    assert_eq!(demo["tools"], 15, "{demo}");

    let reply = lookup(&server).await;
    assert!(!reply.is_error, "{}", reply.text);
    assert!(reply.text.contains("C-1001"), "{}", reply.text);

    let seen = upstream.seen();
    assert!(
        seen.len() >= 3,
        "initialize, tools/list and tools/call: {seen:?}"
    );
    for headers in &seen {
        assert_eq!(headers["x-api-key"], "hk-live-9876", "{headers:?}");
        assert_eq!(headers["x-tenant"], "acme", "{headers:?}");
    }

    // The console names the headers, never their values.
    let (_, html) = page(&server, &admin.cookie, "/upstreams").await;
    assert!(html.contains("headers x-api-key, x-tenant"), "{html}");
    assert!(html.contains("trusts its own CA bundle"), "{html}");
    assert!(!html.contains("hk-live-9876"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_https_upstream_whose_ca_bundle_is_another_cas_fails_as_a_certificate_error_for_the_agent_and_the_health_check()
 {
    let ca = TestCa::new("Acme internal CA");
    let upstream = DemoBehindTls::start(&ca).await;
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let reports = register(&server, &admin, &upstream.url, &ca.pem, "").await;
    assert_eq!(sync_of(&reports, "demo")["error"], serde_json::Value::Null);
    assert!(!lookup(&server).await.is_error);

    // The same upstream, now with the bundle of a CA that did not issue its certificate.
    let reports = register(
        &server,
        &admin,
        &upstream.url,
        &TestCa::new("Another CA").pem,
        "",
    )
    .await;
    let sync = sync_of(&reports, "demo")["error"].to_string();
    assert!(sync.contains("TLS certificate is not trusted"), "{sync}");

    let reply = lookup(&server).await;
    assert!(reply.is_error, "{}", reply.text);
    assert_eq!(reply.code(), "UPSTREAM_ERROR", "{}", reply.text);
    assert!(
        reply
            .text
            .contains("the TLS certificate of the upstream `demo` was not trusted by the gateway"),
        "{}",
        reply.text
    );
    assert!(!reply.text.contains("localhost"), "{}", reply.text);

    let mut health = String::new();
    for _ in 0..5 {
        let (_, html) = page(&server, &admin.cookie, "/upstreams?check=demo").await;
        health = html;
        match backoff(&health) {
            Some(wait) => tokio::time::sleep(wait).await,
            None => break,
        }
    }
    assert!(
        health.contains("demo is not healthy")
            && health.contains("TLS certificate is not trusted")
            && health.contains("UnknownIssuer"),
        "{health}"
    );
}

#[tokio::test]
async fn without_javascript_a_bad_ca_bundle_or_header_comes_back_on_its_field_and_registers_nothing()
 {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    for (field, value, id, expected) in [
        (
            "ca_bundle",
            "not a certificate",
            "ca-bundle-error",
            "CA bundle: no certificate found",
        ),
        (
            "headers",
            "Mcp-Session-Id: forged",
            "headers-error",
            "`Mcp-Session-Id` is set by the gateway or the MCP transport",
        ),
    ] {
        let posted = http()
            .post(format!("{}/console/api/register_upstream", server.base))
            .headers(navigation(&server, &admin.cookie, "/upstreams"))
            .body(encode(&[
                ("csrf_token", &admin.token),
                ("name", "ledger"),
                ("kind", "http"),
                ("url", "https://ledger.internal/mcp"),
                (field, value),
            ]))
            .send()
            .await
            .unwrap();
        assert!(posted.status().is_redirection(), "{}", posted.status());
        let back = posted.headers()[header::LOCATION].to_str().unwrap();
        let back = back.strip_prefix(&server.base).unwrap_or(back).to_owned();
        let (_, html) = page(&server, &admin.cookie, &back).await;
        let at = html
            .find(&format!(r#"id="{id}""#))
            .unwrap_or_else(|| panic!("the form has #{id}: {html}"));
        let shown = &html[at..at + html[at..].find("</p>").unwrap()];
        assert!(
            shown.contains(expected) && !shown.contains("hidden"),
            "{shown}"
        );
    }
    let (_, html) = page(&server, &admin.cookie, "/upstreams").await;
    assert!(!html.contains("<code>ledger</code>"), "nothing registered");
}
