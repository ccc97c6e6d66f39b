//! The listener: accepts TCP connections and serves the router on them with hyper's HTTP/1.1
//! connection builder, with the bounds `axum::serve` does not have.
//!
//! - A request's headers must arrive within `header_read_timeout`, counted from its first
//!   byte: a client trickling a header (slowloris) is disconnected.
//! - A connection with no request in progress (just opened, or between keep-alive requests)
//!   is closed after `idle_timeout`.
//! - Neither bounds a request once its headers are read: a long response (an SSE stream of
//!   /mcp, an export) or a slow upload runs as long as it needs.
//! - At most `max_connections` are open at once, kept below the process's file limit, and
//!   at most `per_address` from one client address (`admission`). At the cap a connection
//!   that is doing nothing is closed to admit a new one; when every connection is working,
//!   the new one gets a reserved slot that answers only `GET /healthz`, or is shed at once
//!   with a `503` (never queued, so the kernel's backlog keeps draining and the client
//!   learns at once that it should retry).
//! - A request answered without its body read keeps its connection usable, or is told it
//!   does not (`unread_body`).
//! - `accept` failing for want of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) is retried
//!   after a back-off doubling up to one second instead of spinning.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::{Service, ServiceExt};

use super::admission::{self, Activity, Admission, Refusal, Slot};
use super::unread_body;
use crate::client_addr::TrustedProxies;

/// File descriptors kept free below the file limit for everything that is not a client
/// connection: the database pool, stdio upstreams' pipes, HTTP upstream connections, the
/// catalog file, the signing key, logs.
const FILE_HEADROOM: u64 = 256;

/// What a connection shed at the cap reads before it is closed.
const SHED_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\
retry-after: 1\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 38\r\n\r\n\
Too many open connections; try again.\n";

/// What a connection shed for its address's share reads before it is closed.
const SHARE_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\
retry-after: 1\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 51\r\n\r\n\
Too many open connections from your address; retry.\n";

/// The answer on a reserved slot to anything but `GET /healthz`.
const HEALTH_ONLY: &str = "Too many open connections: this one answers only /healthz; try again.\n";

const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The bounds on client connections (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// Most connections open at once from one client address (a trusted proxy's are not
    /// counted against it).
    pub per_address: usize,
}

/// Raises the soft file limit to the hard one and returns how many connections fit under it
/// with [`FILE_HEADROOM`] (a quarter of the limit when that is smaller) kept free: `requested`
/// or fewer.
pub fn connection_cap(requested: u64) -> usize {
    let soft = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => soft,
        Err(error) => {
            tracing::warn!(%error, "cannot raise the open file limit");
            match rlimit::getrlimit(rlimit::Resource::NOFILE) {
                Ok((soft, _)) => soft,
                Err(_) => return usize::try_from(requested).unwrap_or(usize::MAX),
            }
        }
    };
    let available = soft.saturating_sub(FILE_HEADROOM.min(soft / 4)).max(1);
    usize::try_from(requested.min(available)).unwrap_or(usize::MAX)
}

/// Each address's share of `cap` connections: `requested`, or a tenth of the cap; at least
/// one and at most the cap.
pub fn address_share(cap: usize, requested: Option<u64>) -> usize {
    let share = requested.map_or(cap / 10, |r| usize::try_from(r).unwrap_or(usize::MAX));
    share.clamp(1, cap.max(1))
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting, lets the
/// requests in progress finish and returns once every connection is closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    trusted: TrustedProxies,
    shutdown: impl Future<Output = ()>,
) {
    let admission = Admission::new(limits.max_connections, limits.per_address, trusted);
    let (stop, stopping) = watch::channel(false);
    let mut make_service = router.into_make_service_with_connect_info::<SocketAddr>();
    let mut backoff: Option<Duration> = None;
    let mut shed = Shedding::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, remote) = match accepted {
            Ok(accepted) => {
                backoff = None;
                accepted
            }
            // One connection that went away before it was accepted: the next one is fine.
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                let delay = backoff.map_or(Duration::from_millis(5), |d| {
                    (d * 2).min(MAX_ACCEPT_BACKOFF)
                });
                backoff = Some(delay);
                tracing::warn!(%error, ?delay, "cannot accept a connection; retrying after a pause");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
        };
        let state = Arc::new(ConnectionState::new());
        let activity: Arc<dyn Activity> = state.clone();
        let ticket = match admission.admit(remote.ip(), activity) {
            Ok(ticket) => ticket,
            Err(refusal) => {
                shed.shed(&tcp, remote, refusal, &limits);
                continue;
            }
        };
        // Small MCP responses must not wait on Nagle's algorithm behind a delayed ACK.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
        let Ok(service) = ServiceExt::<SocketAddr>::ready(&mut make_service).await;
        let Ok(service) = service.call(remote).await;
        let stopping = stopping.clone();
        let slot = ticket.slot();
        tokio::spawn(async move {
            serve_connection(tcp, remote, service, limits, slot, state, stopping).await;
            drop(ticket);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds its ticket until it is closed.
    admission.all_closed().await;
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Logs shed connections at most once a second, with how many were shed since.
#[derive(Default)]
struct Shedding {
    last_log: Option<Instant>,
    since_log: u64,
}

impl Shedding {
    fn shed(&mut self, tcp: &TcpStream, remote: SocketAddr, refusal: Refusal, limits: &Limits) {
        // Best effort and never waits: the socket's send buffer is empty.
        let _ = tcp.try_write(match refusal {
            Refusal::Full => SHED_RESPONSE,
            Refusal::AddressShare => SHARE_RESPONSE,
        });
        self.since_log += 1;
        if self
            .last_log
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                %remote,
                ?refusal,
                max_connections = limits.max_connections,
                per_address = limits.per_address,
                reserved_for_health = admission::HEALTH_SLOTS,
                shed = self.since_log,
                "too many open connections: shedding new ones"
            );
            self.last_log = Some(Instant::now());
            self.since_log = 0;
        }
    }
}

async fn serve_connection<S>(
    tcp: TcpStream,
    remote: SocketAddr,
    service: S,
    limits: Limits,
    slot: Slot,
    state: Arc<ConnectionState>,
    mut stopping: watch::Receiver<bool>,
) where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let io = TokioIo::new(TrackedIo {
        inner: tcp,
        state: Arc::clone(&state),
    });
    let request_state = Arc::clone(&state);
    let hyper_service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let in_flight = InFlight::start(Arc::clone(&request_state));
        let service = service.clone();
        let (request, unread) = unread_body::watch(request);
        async move {
            let mut response = if slot == Slot::HealthOnly && !is_health_probe(&request) {
                health_only_refusal()
            } else {
                let Ok(response) = service.oneshot(request).await;
                response
            };
            unread.settle(&mut response);
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(TrackedBody {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        // The header-read bound is this module's (from the first byte, not from idle).
        .header_read_timeout(None)
        // A reserved slot serves one probe and is given back.
        .keep_alive(slot == Slot::Regular)
        .serve_connection(io, hyper_service)
        .with_upgrades();
    tokio::pin!(connection);
    let mut shutting_down = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%remote, %error, "connection ended with an error");
                }
                return;
            }
            reason = state.expiry(limits) => {
                tracing::debug!(%remote, reason, "closing a connection");
                return;
            }
            _ = stopping.wait_for(|stop| *stop), if !shutting_down => {
                // Idle connections close now, busy ones after their response.
                connection.as_mut().graceful_shutdown();
                shutting_down = true;
            }
        }
    }
}

fn is_health_probe<B>(request: &Request<B>) -> bool {
    matches!(*request.method(), http::Method::GET | http::Method::HEAD)
        && request.uri().path() == "/healthz"
}

fn health_only_refusal() -> Response<Body> {
    let mut response = Response::new(Body::from(HEALTH_ONLY));
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    headers.insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Where a connection is between requests.
#[derive(Clone, Copy)]
enum Phase {
    /// No request in progress and no byte of one received, since then.
    Idle(Instant),
    /// The first bytes of a request arrived then; its headers are not complete.
    ReadingHeaders(Instant),
    /// This many requests have their headers read and their responses not finished.
    Busy(usize),
}

struct ConnectionState {
    phase: Mutex<Phase>,
    /// Closed to admit another connection (`admission`).
    evicted: AtomicBool,
    changed: Notify,
}

impl Activity for ConnectionState {
    fn waiting_since(&self) -> Option<Instant> {
        match self.phase() {
            Phase::Idle(since) | Phase::ReadingHeaders(since) => Some(since),
            Phase::Busy(_) => None,
        }
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        self.changed.notify_one();
    }
}

impl ConnectionState {
    fn new() -> Self {
        ConnectionState {
            phase: Mutex::new(Phase::Idle(Instant::now())),
            evicted: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn update(&self, change: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        *phase = change(*phase);
        drop(phase);
        // One waiter (`expiry`); a notification with none waiting is kept for the next.
        self.changed.notify_one();
    }

    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Completes when the connection has waited too long for a request or its headers.
    async fn expiry(&self, limits: Limits) -> &'static str {
        loop {
            let phase = self.phase();
            // A request in progress finishes first, even on an evicted connection.
            if self.evicted.load(Ordering::Acquire) && !matches!(phase, Phase::Busy(_)) {
                return "closed to admit another connection";
            }
            let (deadline, reason) = match phase {
                Phase::Idle(since) => (Some(since + limits.idle_timeout), "idle timeout"),
                Phase::ReadingHeaders(since) => (
                    Some(since + limits.header_read_timeout),
                    "header read timeout",
                ),
                Phase::Busy(_) => (None, ""),
            };
            match deadline {
                Some(deadline) if deadline <= Instant::now() => return reason,
                Some(deadline) => tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = self.changed.notified() => {}
                },
                None => self.changed.notified().await,
            }
        }
    }
}

/// A request between its headers and the end of its response (or its abandonment).
struct InFlight(Arc<ConnectionState>);

impl InFlight {
    fn start(state: Arc<ConnectionState>) -> Self {
        state.update(|phase| match phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::Idle(_) | Phase::ReadingHeaders(_) => Phase::Busy(1),
        });
        InFlight(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|phase| match phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        });
    }
}

/// A response body that marks its request finished when hyper has written it (or dropped it).
struct TrackedBody {
    body: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for TrackedBody {
    type Data = <Body as hyper::body::Body>::Data;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The client socket, noting when the first byte of a request arrives on an idle connection.
struct TrackedIo {
    inner: TcpStream,
    state: Arc<ConnectionState>,
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before && matches!(self.state.phase(), Phase::Idle(_)) {
            self.state.update(|phase| match phase {
                Phase::Idle(_) => Phase::ReadingHeaders(Instant::now()),
                other => other,
            });
        }
        result
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
