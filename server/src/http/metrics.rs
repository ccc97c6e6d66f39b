//! `GET /metrics`: the gateway's Prometheus metrics, for a scraper on the same host.
//!
//! The numbers name no key, tool or argument, but they do show how busy the gateway is
//! and how it decides, so they are answered only to a loopback peer that did not come
//! through a proxy; anyone else gets a 403. A scraper elsewhere reaches them through an
//! agent or tunnel on the gateway's host.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use skillgate_core::metrics::Metrics;

pub const METRICS_PATH: &str = "/metrics";

/// OpenMetrics text, which Prometheus negotiates and reads.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(METRICS_PATH, get(render))
        .with_state(metrics)
}

/// Headers a reverse proxy adds: a request carrying one came from somewhere else, even
/// when the proxy itself connects from loopback.
const FORWARDING_HEADERS: [&str; 3] = ["forwarded", "x-forwarded-for", "x-real-ip"];

fn is_local_scrape(peer: Option<SocketAddr>, headers: &HeaderMap) -> bool {
    let forwarded = FORWARDING_HEADERS
        .iter()
        .any(|name| headers.contains_key(*name));
    !forwarded && peer.is_some_and(|peer| peer.ip().is_loopback())
}

async fn render(State(metrics): State<Arc<Metrics>>, request: Request) -> Response {
    // Without connection info (a server not started by `serve`) the peer is unknown: refuse.
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr);
    if !is_local_scrape(peer, request.headers()) {
        return (
            StatusCode::FORBIDDEN,
            "metrics are served to loopback clients only, not through a proxy\n",
        )
            .into_response();
    }
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        metrics.render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(text: &str) -> Option<SocketAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn only_a_direct_loopback_peer_may_scrape() {
        let none = HeaderMap::new();
        assert!(is_local_scrape(peer("127.0.0.1:5000"), &none));
        assert!(is_local_scrape(peer("[::1]:5000"), &none));
        assert!(!is_local_scrape(peer("10.0.0.7:5000"), &none));
        assert!(!is_local_scrape(None, &none));

        let mut proxied = HeaderMap::new();
        proxied.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        assert!(!is_local_scrape(peer("127.0.0.1:5000"), &proxied));
        let mut forwarded = HeaderMap::new();
        forwarded.insert("forwarded", HeaderValue::from_static("for=203.0.113.9"));
        assert!(!is_local_scrape(peer("127.0.0.1:5000"), &forwarded));
    }
}
