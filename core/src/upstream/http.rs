//! The HTTP client behind every streamable-HTTP MCP connection the gateway (and its load
//! tool) opens.
//!
//! rmcp's default client turns connection pooling off, to dodge a ~40 ms stall that TCP's
//! delayed ACK causes when a server writes a response in small pieces. That costs a TCP
//! handshake (and a server-side accept) on every tool call. Skillgate keeps connections
//! alive instead and removes the stall where it starts: with TCP_NODELAY on both ends (our
//! listeners set it; this client sets it), no write waits for an ACK.

use std::time::Duration;

/// A keep-alive client: TCP_NODELAY, idle connections kept for 90 s, no redirects (an
/// upstream URL is configured by an admin; a redirect elsewhere is an error, not a hop).
pub fn keep_alive_client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a reqwest client without TLS or proxies always builds")
}
