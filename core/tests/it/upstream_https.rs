//! Upstreams over `https://`: the gateway's client verifies the upstream's certificate
//! against the system's trust roots plus the upstream's own CA bundle, and a certificate it
//! does not trust is a failure of its own kind, for the agent and for the health check.

use crate::upstream_common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Map;
use skillgate_core::upstream::{UpstreamClient, UpstreamConfig, UpstreamError, UpstreamPool};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use upstream_common::{TestUpstream, permit};

const TIMEOUT: Duration = Duration::from_secs(10);

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

struct HttpsServer {
    url: String,
    /// The certificate of the CA that issued the server's, as PEM.
    ca_pem: String,
    task: JoinHandle<()>,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves [`TestUpstream`] at `https://localhost:<port>/mcp` with a certificate for
/// `localhost` issued by a CA made here, which no system trusts.
async fn serve_https() -> HttpsServer {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let ca = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
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

    let upstream = TestUpstream::default();
    let service: StreamableHttpService<TestUpstream, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(upstream.clone()),
            Arc::default(),
            StreamableHttpServerConfig::default(),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://localhost:{}/mcp", tcp.local_addr().unwrap().port());
    let listener = TlsListener {
        tcp,
        acceptor: TlsAcceptor::from(Arc::new(config)),
    };
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    HttpsServer { url, ca_pem, task }
}

#[tokio::test]
async fn an_https_upstream_whose_certificate_no_trusted_root_issued_fails_as_a_certificate_error() {
    let server = serve_https().await;
    let client = UpstreamClient::new("ledger", UpstreamConfig::http(&server.url, None));

    let error = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(
        matches!(&error, UpstreamError::Certificate { upstream, .. } if upstream == "ledger"),
        "{error:?}"
    );
    assert_eq!(error.kind(), "certificate");
    assert_eq!(
        error.agent_message(),
        "the TLS certificate of the upstream `ledger` was not trusted by the gateway"
    );
    assert!(!error.agent_message().contains("localhost"));
}

#[tokio::test]
async fn the_health_check_of_an_untrusted_https_upstream_names_the_certificate_problem() {
    let server = serve_https().await;
    let pool = UpstreamPool::default();
    pool.upsert("ledger", UpstreamConfig::http(&server.url, None));

    let error = pool.health("ledger", TIMEOUT).await.unwrap_err();

    let shown = error.to_string();
    assert!(
        shown.contains("TLS certificate is not trusted") && shown.contains("UnknownIssuer"),
        "{shown}"
    );
}

fn with_ca_bundle(url: &str, pem: &str) -> UpstreamConfig {
    let UpstreamConfig::Http {
        url,
        bearer,
        headers,
        ..
    } = UpstreamConfig::http(url, None)
    else {
        unreachable!()
    };
    UpstreamConfig::Http {
        url,
        bearer,
        ca_bundle: Some(pem.to_owned()),
        headers,
        allow_plaintext: false,
    }
}

#[tokio::test]
async fn an_https_upstream_whose_ca_is_in_its_own_bundle_is_trusted() {
    let server = serve_https().await;
    let client = UpstreamClient::new("ledger", with_ca_bundle(&server.url, &server.ca_pem));

    let outcome = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();

    assert!(!outcome.is_error);
}

#[tokio::test]
async fn a_ca_bundle_of_another_ca_does_not_make_an_https_upstream_trusted() {
    let server = serve_https().await;
    let other = serve_https().await;
    let client = UpstreamClient::new("ledger", with_ca_bundle(&server.url, &other.ca_pem));

    let error = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert_eq!(error.kind(), "certificate", "{error}");
}
