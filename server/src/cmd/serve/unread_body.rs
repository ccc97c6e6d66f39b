//! A request body the application answered without reading.
//!
//! A handler that refuses a request on its headers alone (a 401 at `/mcp`, a 403 from the
//! console's origin guard) drops the body unread. Left to itself, hyper then closes the
//! connection after the response without saying so, and a client that sent its body a moment
//! after its headers (httpx, and so the Python MCP SDK, does) loses its next request on that
//! kept-alive connection: it cannot even tell whether a POST ran.
//!
//! So, as Go's server and nginx do: a body of declared length up to [`DRAIN_LIMIT`] is read
//! and discarded after the response, and the connection stays usable; any other unread body
//! (larger, chunked, or one the client waits to send until it hears `100 Continue`) gets
//! `Connection: close` on its response, so the client knows to open a fresh connection.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::{HeaderValue, Request, Response, header};
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming, SizeHint};

/// The largest unread body read and discarded to keep a connection: `/mcp`'s and the API's
/// body limit, so an agent's refused request at that limit keeps its connection.
const DRAIN_LIMIT: u64 = crate::mcp::DEFAULT_MAX_BODY_BYTES as u64;

/// How long a client may take to send the rest of a drained body. The connection's idle
/// timeout usually ends it first; this bounds the drain on its own.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What the listener keeps of a request to settle its response's `Connection` header.
pub struct UnreadBody {
    finished: Arc<AtomicBool>,
    drainable: bool,
}

/// Wraps the request's body to note whether the application read it to the end.
pub fn watch(request: Request<Incoming>) -> (Request<Body>, UnreadBody) {
    let drainable = drainable(&request);
    let (parts, incoming) = request.into_parts();
    let finished = Arc::new(AtomicBool::new(hyper::body::Body::is_end_stream(&incoming)));
    let body = WatchedBody {
        inner: Some(incoming),
        finished: Arc::clone(&finished),
        drainable,
    };
    (
        Request::from_parts(parts, Body::new(body)),
        UnreadBody {
            finished,
            drainable,
        },
    )
}

impl UnreadBody {
    /// Marks `response` as the connection's last when its request's body is unread and will
    /// not be drained.
    pub fn settle(&self, response: &mut Response<Body>) {
        if !self.finished.load(Ordering::Acquire) && !self.drainable {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
}

/// A body of known, bounded length whose bytes the client sends without waiting to be asked.
fn drainable<B>(request: &Request<B>) -> bool {
    let headers = request.headers();
    let expects_continue = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    !expects_continue
        && !headers.contains_key(header::TRANSFER_ENCODING)
        && length.is_some_and(|length| length <= DRAIN_LIMIT)
}

struct WatchedBody {
    /// `None` once handed to the drain.
    inner: Option<Incoming>,
    finished: Arc<AtomicBool>,
    drainable: bool,
}

impl WatchedBody {
    fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }
}

impl hyper::body::Body for WatchedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => hyper::body::Body::is_end_stream(inner),
            Poll::Pending => false,
        };
        if ended {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), hyper::body::Body::size_hint)
    }
}

impl Drop for WatchedBody {
    fn drop(&mut self) {
        if self.finished.load(Ordering::Acquire) || !self.drainable {
            return;
        }
        let (Some(body), Ok(runtime)) = (self.inner.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        runtime.spawn(drain(body));
    }
}

/// Reads `body` to its end and discards it; dropping it early (past the timeout, or on an
/// error) makes hyper close the connection, which is then all that is left to do.
async fn drain(mut body: Incoming) {
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                return;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::post("/mcp");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("a request")
    }

    #[test]
    fn a_body_of_declared_length_up_to_the_limit_is_drained() {
        assert!(drainable(&request(&[("content-length", "12")])));
        assert!(drainable(&request(&[(
            "content-length",
            &DRAIN_LIMIT.to_string()
        )])));
    }

    #[test]
    fn a_larger_chunked_or_expect_continue_body_is_not_drained() {
        assert!(!drainable(&request(&[(
            "content-length",
            &(DRAIN_LIMIT + 1).to_string()
        )])));
        assert!(!drainable(&request(&[("transfer-encoding", "chunked")])));
        assert!(!drainable(&request(&[
            ("content-length", "12"),
            ("expect", "100-continue")
        ])));
        assert!(!drainable(&request(&[("content-length", "twelve")])));
    }
}
