//! The HTTP client behind every streamable-HTTP MCP connection the gateway (and its load
//! tool) opens.
//!
//! rmcp's default client turns connection pooling off, to dodge a ~40 ms stall that TCP's
//! delayed ACK causes when a server writes a response in small pieces. That costs a TCP
//! handshake (and a server-side accept) on every tool call. Skillgate keeps connections
//! alive instead and removes the stall where it starts: with TCP_NODELAY on both ends (our
//! listeners set it; this client sets it), no write waits for an ACK.
//!
//! Keeping them alive takes one more step, [`PooledHttp`]: a server that answers a call
//! over SSE writes the response event, then ends the body. rmcp hands the response on as
//! soon as the event arrives and only then reads the end of the body, so the next call
//! could find the connection still busy and open another one (4 of 400 sequential calls
//! did, in `upstream_http.rs`). Reading the body to its end before the response is handed
//! on puts the connection back in the pool first.
//!
//! A traced `tools/call` carries its W3C trace context in `_meta`; [`PooledHttp`] sends it
//! as `traceparent`/`tracestate` headers too, since the call's POST is made by rmcp's
//! transport task, outside the span that made the call.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::{PemObject as _, SectionKind};
use sse_stream::Sse;

use super::identity::IdentityWatch;

/// How long the end of a response body may take after its response event before the
/// response is handed on anyway (the connection is then given up, as rmcp would).
const DRAIN: Duration = Duration::from_millis(100);

/// A keep-alive client: TCP_NODELAY, idle connections kept for 90 s, no redirects (an
/// upstream URL is configured by an admin; a redirect elsewhere is an error, not a hop).
/// `https://` is verified against the system's trust roots (rustls' platform verifier).
pub fn keep_alive_client() -> reqwest::Client {
    keep_alive_client_trusting(&[])
        .expect("a reqwest client with rustls' platform verifier and no proxies builds")
}

/// [`keep_alive_client`] that also trusts `extra_roots` (an upstream's own CA bundle, see
/// [`parse_ca_bundle`]) beside the system's roots. Fails only on a root rustls cannot use,
/// which [`parse_ca_bundle`] has already refused.
pub fn keep_alive_client_trusting(
    extra_roots: &[CertificateDer<'static>],
) -> Result<reqwest::Client, reqwest::Error> {
    install_crypto_provider();
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(reqwest::redirect::Policy::none())
        .tls_certs_merge(
            extra_roots
                .iter()
                .map(|der| reqwest::Certificate::from_der(der))
                .collect::<Result<Vec<_>, _>>()?,
        )
        .build()
}

/// [`keep_alive_client_trusting`] whose TLS verifier also records the key of each
/// certificate it verified in `watch` and refuses a key other than the pinned one (see
/// [`super::identity`]). The verification itself is the one reqwest builds: the platform
/// verifier, with `extra_roots` beside the system's roots.
pub(super) fn keep_alive_client_watched(
    extra_roots: &[CertificateDer<'static>],
    watch: Arc<super::identity::IdentityWatch>,
) -> Result<reqwest::Client, String> {
    install_crypto_provider();
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let inner = if extra_roots.is_empty() {
        rustls_platform_verifier::Verifier::new(provider.clone())
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(
            extra_roots.iter().cloned(),
            provider.clone(),
        )
    }
    .map_err(|e| e.to_string())?;
    let verifier = super::identity::PinningVerifier {
        inner: Arc::new(inner),
        watch,
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    // The HTTP/1.1 the gateway's keep-alive pooling is built for (see the module docs).
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(reqwest::redirect::Policy::none())
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| e.to_string())
}

/// The certificates of a PEM CA bundle (one or more `CERTIFICATE` blocks), each usable as
/// a trust anchor; or what is wrong with it, for the admin. Anything else in the text (a
/// private key pasted by mistake) is refused rather than skipped: the bundle is part of
/// the catalog, which is exported and audited.
pub fn parse_ca_bundle(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let mut certificates = Vec::new();
    for (index, section) in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem.as_bytes()).enumerate() {
        let number = index + 1;
        let (kind, der) = section.map_err(|e| format!("block {number} is not valid PEM: {e}"))?;
        if kind != SectionKind::Certificate {
            return Err(format!(
                "block {number} is a {kind:?}, not a certificate: a CA bundle holds only \
                 -----BEGIN CERTIFICATE----- blocks"
            ));
        }
        let der = CertificateDer::from(der);
        roots
            .add(der.clone())
            .map_err(|e| format!("certificate {number} cannot be a trust root: {e}"))?;
        certificates.push(der);
    }
    if certificates.is_empty() {
        return Err(
            "no certificate found: paste one or more -----BEGIN CERTIFICATE----- blocks".to_owned(),
        );
    }
    Ok(certificates)
}

/// reqwest is built without a crypto provider of its own (see the workspace Cargo.toml):
/// make ring the process default, unless something else already installed one. Every
/// reqwest client of the process needs it (they share the features), so the binary calls
/// it first thing.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err: another thread installed one first, which does as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// [`keep_alive_client`] as rmcp's streamable HTTP client, reading each SSE response to
/// its end before handing its JSON-RPC response on (see the module docs).
///
/// With a watch, the `serverInfo` of every `initialize` answer is recorded in it and one
/// that differs from the pinned identity fails the handshake: the first one, and the
/// re-initialization rmcp makes by itself when the upstream forgot the session (which never
/// reaches the gateway's own handshake code).
#[derive(Clone)]
pub struct PooledHttp {
    client: reqwest::Client,
    watch: Option<(Arc<IdentityWatch>, bool)>,
}

impl PooledHttp {
    pub fn new() -> Self {
        Self::with_client(keep_alive_client())
    }

    /// Over `client`, such as one from [`keep_alive_client_trusting`].
    pub fn with_client(client: reqwest::Client) -> Self {
        Self {
            client,
            watch: None,
        }
    }

    /// Over `client`, checking each handshake's identity against `watch` (`tls`: the
    /// identity includes the certificate key the client's verifier records there).
    pub(super) fn watched(client: reqwest::Client, watch: Arc<IdentityWatch>, tls: bool) -> Self {
        Self {
            client,
            watch: Some((watch, tls)),
        }
    }

    /// `response` to an `initialize`, its `serverInfo` recorded in the watch; an answer
    /// whose identity differs from the pin ends in an error instead.
    fn checked(
        &self,
        initialize: bool,
        response: StreamableHttpPostResponse,
    ) -> Result<StreamableHttpPostResponse> {
        let Some((watch, tls)) = self.watch.clone().filter(|_| initialize) else {
            return Ok(response);
        };
        match response {
            StreamableHttpPostResponse::Json(message, session) => {
                let data = serde_json::to_string(&message).unwrap_or_default();
                match handshake_refusal(&watch, tls, &data) {
                    Some(refusal) => Err(StreamableHttpError::UnexpectedServerResponse(
                        refusal.to_string().into(),
                    )),
                    None => Ok(StreamableHttpPostResponse::Json(message, session)),
                }
            }
            StreamableHttpPostResponse::Sse(events, session) => {
                let events = events
                    .map(move |event| {
                        let event = event?;
                        if is_response(&event)
                            && let Some(refusal) =
                                handshake_refusal(&watch, tls, event.data.as_deref().unwrap_or(""))
                        {
                            return Err(SseError::Body(Box::new(refusal)));
                        }
                        Ok(event)
                    })
                    .boxed();
                Ok(StreamableHttpPostResponse::Sse(events, session))
            }
            other => Ok(other),
        }
    }
}

/// An `initialize` answer presented another identity than the pinned one.
#[derive(Debug)]
struct IdentityRefused(String);

impl std::fmt::Display for IdentityRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the upstream's identity differs from the pinned one ({})",
            self.0
        )
    }
}

impl std::error::Error for IdentityRefused {}

/// Records the `serverInfo` of the `initialize` answer `data` (JSON-RPC text) in `watch`;
/// the refusal when it differs from the pin.
fn handshake_refusal(watch: &IdentityWatch, tls: bool, data: &str) -> Option<IdentityRefused> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<InitResult>,
    }
    #[derive(serde::Deserialize)]
    struct InitResult {
        #[serde(rename = "serverInfo")]
        server_info: Option<Info>,
    }
    #[derive(serde::Deserialize)]
    struct Info {
        #[serde(default)]
        name: String,
        #[serde(default)]
        version: String,
    }
    let info = serde_json::from_str::<Answer>(data)
        .ok()?
        .result?
        .server_info
        .unwrap_or(Info {
            name: String::new(),
            version: String::new(),
        });
    let (seen, matches) = watch.handshake(tls, &info.name, &info.version);
    if matches {
        return None;
    }
    let reason = watch
        .pinned()
        .map_or_else(String::new, |pinned| pinned.quarantine_reason(&seen));
    Some(IdentityRefused(reason))
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(request)
        if matches!(request.request, ClientRequest::InitializeRequest(_)))
}

impl Default for PooledHttp {
    fn default() -> Self {
        Self::new()
    }
}

/// True when an SSE event carries a JSON-RPC response or error (not a request or a
/// notification): the last message of a POST's stream.
fn is_response(event: &Sse) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    event
        .data
        .as_deref()
        .and_then(|data| serde_json::from_str::<Probe>(data).ok())
        .is_some_and(|probe| {
            probe.method.is_none() && (probe.result.is_some() || probe.error.is_some())
        })
}

/// The events of `events` up to and including the first response, which is yielded only
/// once the body after it has ended (or [`DRAIN`] passed). What a server sends after its
/// response is not read by rmcp either.
fn response_last(
    events: BoxStream<'static, Result<Sse, SseError>>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    futures::stream::unfold(Some(events), |events| async move {
        let mut events = events?;
        match events.next().await? {
            Ok(event) if is_response(&event) => {
                let _ =
                    tokio::time::timeout(DRAIN, async { while events.next().await.is_some() {} })
                        .await;
                Some((Ok(event), None))
            }
            other => Some((other, Some(events))),
        }
    })
    .boxed()
}

fn drained(response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
    match response {
        StreamableHttpPostResponse::Sse(events, session) => {
            StreamableHttpPostResponse::Sse(response_last(events), session)
        }
        other => other,
    }
}

/// `headers` plus the trace context of `message`, when it is a traced `tools/call`.
fn with_trace_context(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let ClientJsonRpcMessage::Request(request) = message
        && let ClientRequest::CallToolRequest(call) = &request.request
        && let Some(meta) = &call.params.meta
    {
        crate::trace::meta_to_headers(&meta.0.0, &mut headers);
    }
    headers
}

type Result<T, E = StreamableHttpError<reqwest::Error>> = std::result::Result<T, E>;

impl StreamableHttpClient for PooledHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse> {
        let initialize = is_initialize(&message);
        let custom_headers = with_trace_context(&message, custom_headers);
        let response = self
            .client
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(drained)?;
        self.checked(initialize, response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let initialize = is_initialize(&message);
        let custom_headers = with_trace_context(&message, custom_headers);
        let response = self
            .client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
            .map(drained)?;
        self.checked(initialize, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>> {
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>> {
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> Sse {
        Sse::default().data(data)
    }

    #[test]
    fn only_responses_and_errors_end_a_post_stream() {
        assert!(is_response(&event(
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        )));
        assert!(is_response(&event(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#
        )));
        assert!(!is_response(&event(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#
        )));
        assert!(!is_response(&event(
            r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}"#
        )));
        assert!(!is_response(&event("")));
        assert!(!is_response(&Sse::default()));
    }

    #[tokio::test]
    async fn the_response_comes_after_the_rest_of_the_body_and_ends_the_stream() {
        let read_after = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = read_after.clone();
        let events: Vec<Result<Sse, SseError>> = vec![
            Ok(event(
                r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
            )),
            Ok(event(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)),
        ];
        let tail = futures::stream::once(async move {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(event("after"))
        });
        let mut stream = response_last(futures::stream::iter(events).chain(tail).boxed());
        let first = stream.next().await.unwrap().unwrap();
        assert!(!is_response(&first));
        assert!(!read_after.load(std::sync::atomic::Ordering::SeqCst));
        let second = stream.next().await.unwrap().unwrap();
        assert!(is_response(&second));
        // The body after the response was read before the response was handed on.
        assert!(read_after.load(std::sync::atomic::Ordering::SeqCst));
        assert!(stream.next().await.is_none());
    }
}
