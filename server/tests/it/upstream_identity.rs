//! An upstream's identity through the real binary: the demo upstream (`skillgate
//! demo-upstream --http`) behind a proxy made in the test, once over TLS with a certificate
//! a test CA issued, once over plain loopback HTTP with its `serverInfo` version rewritten.
//! The first sync pins the identity; a new certificate from the same CA quarantines the
//! upstream: its calls are refused `UPSTREAM_QUARANTINED` and audited until an admin admits
//! the new identity on the Upstreams page. A new server version alone is an upgrade: calls
//! go on, and the new version is pinned, audited and shown.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use common::console::{Browser, fetch_post, page, sign_in_admin};
use common::{BIN, Reply, Server, call, init, learn};
use http::{StatusCode, header};
use serde_json::{Value, json};
use skillgate_core::audit::{AuditEvent, AuditLog};
use skillgate_core::store::Store;
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

    /// A TLS server configuration with a new key and a certificate for `localhost` this CA
    /// issued, and that key's fingerprint as the gateway pins it.
    fn server_config(&self) -> (rustls::ServerConfig, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        let fingerprint = skillgate_core::upstream::spki_sha256(cert.der()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        (config, fingerprint)
    }
}

/// Accepts TCP connections and completes a TLS handshake on each with the acceptor of the
/// moment (the test swaps it to "restart" the upstream with a new certificate).
struct TlsListener {
    tcp: TcpListener,
    acceptor: Arc<Mutex<TlsAcceptor>>,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            let acceptor = self.acceptor.lock().unwrap().clone();
            if let Ok(tls) = acceptor.accept(tcp).await {
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
    target: Arc<Mutex<String>>,
    /// What an `initialize` answer's `serverInfo.version` is rewritten to (`None`: kept).
    version: Arc<Mutex<Option<String>>>,
    /// The JSON-RPC methods that reached the upstream.
    methods: Arc<Mutex<Vec<String>>>,
}

/// `text` with the `version` of its `serverInfo` replaced by `version`.
fn with_version(text: &str, version: &str) -> String {
    let Some(info) = text.find("\"serverInfo\"") else {
        return text.to_owned();
    };
    let key = "\"version\":\"";
    let Some(at) = text[info..].find(key).map(|at| info + at + key.len()) else {
        return text.to_owned();
    };
    let end = at + text[at..].find('"').unwrap();
    format!("{}{version}{}", &text[..at], &text[end..])
}

/// Passes the request on to the demo upstream and its answer back, closing the connection
/// after each answer (so each request is a new connection, and over TLS a new handshake).
async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let method = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["method"].as_str().map(str::to_owned));
    if let Some(method) = &method {
        proxy.methods.lock().unwrap().push(method.clone());
    }
    let mut headers = parts.headers;
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let target = proxy.target.lock().unwrap().clone();
    let answer = proxy
        .http
        .request(parts.method, &target)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder()
        .status(answer.status())
        .header(header::CONNECTION, "close");
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
    let version = proxy.version.lock().unwrap().clone();
    match version.filter(|_| method.as_deref() == Some("initialize")) {
        Some(version) => {
            let text = answer.text().await.unwrap();
            response.body(Body::from(with_version(&text, &version)))
        }
        None => response.body(Body::from_stream(answer.bytes_stream())),
    }
    .unwrap()
}

/// The demo upstream over plain HTTP in its own process, and the proxy in front of it:
/// `https://localhost:PORT/mcp` with a certificate of `ca`, or `http://127.0.0.1:PORT/mcp`.
struct DemoBehindProxy {
    url: String,
    proxy: Proxy,
    child: Child,
    acceptor: Option<Arc<Mutex<TlsAcceptor>>>,
    task: JoinHandle<()>,
}

impl Drop for DemoBehindProxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn demo_upstream() -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["demo-upstream", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the demo upstream starts");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let url = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("demo upstream listening on ")
                .map(str::to_owned)
        })
        .expect("the demo upstream prints its URL");
    (child, url)
}

impl DemoBehindProxy {
    async fn start(tls: Option<rustls::ServerConfig>, version: Option<&str>) -> Self {
        skillgate_core::upstream::install_crypto_provider();
        let (child, target) = demo_upstream();
        let proxy = Proxy {
            http: reqwest::Client::new(),
            target: Arc::new(Mutex::new(target)),
            version: Arc::new(Mutex::new(version.map(str::to_owned))),
            methods: Arc::default(),
        };
        let router = axum::Router::new()
            .fallback(forward)
            .with_state(proxy.clone());
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let (url, acceptor, task) = match tls {
            Some(config) => {
                let acceptor = Arc::new(Mutex::new(TlsAcceptor::from(Arc::new(config))));
                let listener = TlsListener {
                    tcp,
                    acceptor: acceptor.clone(),
                };
                let task =
                    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
                (
                    format!("https://localhost:{port}/mcp"),
                    Some(acceptor),
                    task,
                )
            }
            None => {
                let task = tokio::spawn(async move { axum::serve(tcp, router).await.unwrap() });
                (format!("http://127.0.0.1:{port}/mcp"), None, task)
            }
        };
        Self {
            url,
            proxy,
            child,
            acceptor,
            task,
        }
    }

    /// From now on, TLS handshakes present `config`'s certificate.
    fn present(&self, config: rustls::ServerConfig) {
        let acceptor = self.acceptor.as_ref().expect("a TLS proxy");
        *acceptor.lock().unwrap() = TlsAcceptor::from(Arc::new(config));
    }

    /// Restarts the demo upstream (its sessions are gone) answering with `version`.
    fn restart_as(&mut self, version: &str) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (child, target) = demo_upstream();
        self.child = child;
        *self.proxy.target.lock().unwrap() = target;
        *self.proxy.version.lock().unwrap() = Some(version.to_owned());
    }

    fn calls(&self) -> usize {
        self.proxy
            .methods
            .lock()
            .unwrap()
            .iter()
            .filter(|m| *m == "tools/call")
            .count()
    }
}

/// Registers the demo upstream at `url` through the console's server function; the sync
/// reports it answers with.
async fn register(server: &Server, admin: &Browser, url: &str, ca_bundle: &str) -> Value {
    let (status, text) = fetch_post(
        server,
        admin,
        "/console/api/register_upstream",
        &[
            ("name", "demo"),
            ("kind", "http"),
            ("url", url),
            ("ca_bundle", ca_bundle),
            ("csrf_token", &admin.token),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The console's "Sync tools now", awaited.
async fn sync(server: &Server, admin: &Browser) -> Value {
    let (status, text) = fetch_post(
        server,
        admin,
        "/console/api/sync_upstreams",
        &[("csrf_token", &admin.token)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The Upstreams page, without the renderer's `<!>` markers.
async fn upstreams_page(server: &Server, admin: &Browser) -> String {
    let (status, html) = page(server, &admin.cookie, "/upstreams").await;
    assert_eq!(status, StatusCode::OK);
    html.replace("<!>", "")
}

/// Waits until the startup sync has pinned the demo upstream's first identity, so it
/// cannot land after the registration the test makes.
async fn startup_pinned(server: &Server) {
    let store = Store::open(&server.database_url()).await.unwrap();
    for _ in 0..200 {
        if store.upstream_identity("demo").await.unwrap().is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the startup sync pinned no identity for the demo upstream");
}

async fn identity_history(server: &Server) -> Vec<AuditEvent> {
    let store = Store::open(&server.database_url()).await.unwrap();
    AuditLog::new(store)
        .admin_changes("upstream:demo", 50)
        .await
        .unwrap()
}

/// The value of the first `<input name="NAME" … value="…">` of a page.
fn field(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!(r#"name="{name}""#))?;
    let rest = &html[at..];
    let value = rest.find(r#"value=""#)? + 7;
    let end = rest[value..].find('"')?;
    Some(rest[value..value + end].to_owned())
}

async fn admit(server: &Server, admin: &Browser) {
    let html = upstreams_page(server, admin).await;
    let offered = field(&html, "offered").expect("an admit form with the offered identity");
    let (status, text) = fetch_post(
        server,
        admin,
        "/console/api/admit_upstream_identity",
        &[
            ("upstream", "demo"),
            ("offered", &offered),
            ("csrf_token", &admin.token),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

/// The wait a "restarting after repeated failures; retry in 3 s" answer names.
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

/// A governed `lookup_customer` of the demo upstream in a new session, waiting out a
/// restart backoff that failed starts left.
async fn lookup(server: &Server) -> Reply {
    let agent = server.connect(&server.support_key).await;
    let (session, _) = init(&agent).await;
    assert!(
        !learn(&agent, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let arguments = json!({"customer_id": "C-1001"});
    let mut reply = call(&agent, &session, "lookup_customer", arguments.clone()).await;
    for _ in 0..4 {
        let Some(wait) = backoff(&reply.text) else {
            break;
        };
        tokio::time::sleep(wait).await;
        reply = call(&agent, &session, "lookup_customer", arguments.clone()).await;
    }
    reply
}

fn quarantine_refusals(server: &Server) -> Vec<Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "call_denied" && e["payload"]["code"] == "UPSTREAM_QUARANTINED")
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_certificate_from_the_same_ca_quarantines_the_upstream_until_an_admin_admits_it() {
    let ca = TestCa::new("Acme internal CA");
    let (first, first_key) = ca.server_config();
    let upstream = DemoBehindProxy::start(Some(first), None).await;
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    startup_pinned(&server).await;

    let reports = register(&server, &admin, &upstream.url, &ca.pem).await;
    assert_eq!(reports[0]["error"], Value::Null, "{reports}");
    let html = upstreams_page(&server, &admin).await;
    assert!(html.contains(&format!("key {first_key}")), "{html}");
    assert!(!html.contains("identity-offered"), "{html}");
    assert!(!lookup(&server).await.is_error);

    // The upstream restarts with a certificate the same CA issued for the same name.
    let (second, second_key) = ca.server_config();
    assert_ne!(first_key, second_key);
    upstream.present(second);
    let calls = upstream.calls();
    let changed = lookup(&server).await;
    assert!(changed.is_error, "{}", changed.text);
    assert!(
        changed.text.contains("presented another identity"),
        "{}",
        changed.text
    );
    assert_eq!(upstream.calls(), calls, "no call reached the upstream");

    sync(&server, &admin).await;
    let refused = lookup(&server).await;
    assert_eq!(refused.code(), "UPSTREAM_QUARANTINED", "{}", refused.text);
    assert!(refused.text.contains(&second_key), "{}", refused.text);
    assert_eq!(upstream.calls(), calls, "no call reached the upstream");
    assert!(!quarantine_refusals(&server).is_empty());
    let quarantine = identity_history(&server)
        .await
        .into_iter()
        .find(|e| e.payload["action"] == "upstream.identity_quarantine")
        .expect("the quarantine is audited");
    assert_eq!(
        quarantine.payload["before"]["pinned"]["spki_sha256"],
        first_key.as_str()
    );
    assert_eq!(
        quarantine.payload["after"]["offered"]["spki_sha256"],
        second_key.as_str()
    );
    let html = upstreams_page(&server, &admin).await;
    assert!(html.contains("identity-offered"), "{html}");
    assert!(html.contains(&format!("key {second_key}")), "{html}");

    admit(&server, &admin).await;
    let admitted = lookup(&server).await;
    assert!(!admitted.is_error, "{}", admitted.text);
    assert!(admitted.text.contains("C-1001"), "{}", admitted.text);
    let history = identity_history(&server).await;
    assert_eq!(history[0].payload["action"], "upstream.identity_admit");
    assert_eq!(history[0].actor.as_deref(), Some("admin"));
    assert_eq!(
        history[0].payload["after"]["pinned"]["spki_sha256"],
        second_key.as_str()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_server_version_is_pinned_audited_and_shown_without_refusing_a_call() {
    let mut upstream = DemoBehindProxy::start(None, Some("1.2.0")).await;
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    startup_pinned(&server).await;

    let reports = register(&server, &admin, &upstream.url, "").await;
    assert_eq!(reports[0]["error"], Value::Null, "{reports}");
    let html = upstreams_page(&server, &admin).await;
    assert!(html.contains("no TLS key, serverInfo"), "{html}");
    assert!(html.contains(" 1.2.0"), "{html}");
    assert!(!html.contains("identity-upgraded"), "{html}");
    assert!(!lookup(&server).await.is_error);

    // An unchanged identity: a sync records nothing.
    let before = identity_history(&server).await.len();
    sync(&server, &admin).await;
    assert_eq!(identity_history(&server).await.len(), before);
    assert!(!lookup(&server).await.is_error);

    upstream.restart_as("1.2.1");
    // The new process does not know the session: the gateway's re-initialization meets the
    // new version of the same server, and the call goes through.
    let calls = upstream.calls();
    let upgraded = lookup(&server).await;
    assert!(!upgraded.is_error, "{}", upgraded.text);
    assert!(upgraded.text.contains("C-1001"), "{}", upgraded.text);
    assert!(
        upstream.calls() > calls,
        "the call reached the upgraded upstream"
    );
    // The connection reported the upgrade; the sync (awaited) records it if that report
    // has not landed yet, and either way it is recorded once.
    sync(&server, &admin).await;
    let upgrades: Vec<AuditEvent> = identity_history(&server)
        .await
        .into_iter()
        .filter(|e| e.payload["action"] == "upstream.identity_version")
        .collect();
    assert_eq!(upgrades.len(), 1, "{upgrades:?}");
    assert_eq!(upgrades[0].actor.as_deref(), Some("upstream-sync:demo"));
    assert_eq!(
        upgrades[0].payload["before"]["pinned"]["server_version"],
        "1.2.0"
    );
    assert_eq!(
        upgrades[0].payload["after"]["pinned"]["server_version"],
        "1.2.1"
    );
    assert!(quarantine_refusals(&server).is_empty());
    let html = upstreams_page(&server, &admin).await;
    assert!(html.contains(" 1.2.1"), "{html}");
    assert!(html.contains("identity-upgraded"), "{html}");
    assert!(
        html.contains("Upgraded from version <code>1.2.0</code>"),
        "{html}"
    );
    assert!(!html.contains("identity-offered"), "{html}");
    assert!(!lookup(&server).await.is_error);
}
