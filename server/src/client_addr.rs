//! The client's address: the TCP peer, or, when that peer is a proxy the operator trusts
//! (`--trusted-proxies`), the address the proxies say the request came from.
//!
//! Each proxy appends the address it received the request from to `X-Forwarded-For`, so
//! the right end of the list is written by the proxies nearest to us and everything left
//! of the client's own entry by the client, who can write anything there. The list is
//! therefore read from the right: a trusted address is a proxy whose word we take, and the
//! first untrusted address is the client. Entries left of it are never believed. Without
//! trusted proxies (the default) the header is ignored and the client is the peer.
//!
//! [`resolve`] runs once per request, outermost, and leaves a [`ClientAddr`] in the
//! request's extensions for everything that needs the client's address (sign-in
//! throttling, the OAuth endpoints' rate limits, traces).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

/// The header proxies record the hops of a request in.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// The proxies whose `X-Forwarded-For` is believed: networks (CIDR) or single addresses.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Arc<[IpNet]>);

impl TrustedProxies {
    /// Parses `--trusted-proxies` values: each a CIDR (`10.0.0.0/8`, `fd00::/8`) or a
    /// single address (`192.0.2.7`). An empty or malformed entry is an error naming it.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let nets = entries
            .iter()
            .map(|entry| {
                let text = entry.as_ref().trim();
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| canonical_net(net).trunc())
                    .map_err(|_| {
                        format!(
                            "--trusted-proxies: `{text}` is not an address or a network in CIDR \
                             notation (such as 10.0.0.0/8 or 192.0.2.7)"
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(nets.into()))
    }

    /// Whether `ip` is a proxy whose word on the client's address is taken.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a request from `peer` with `headers`: `peer` unless it is
    /// trusted; then the rightmost `X-Forwarded-For` entry that is not trusted. When every
    /// entry is trusted (or there are none), the leftmost trusted hop stands for the
    /// client; so does the nearest trusted hop when an entry cannot be read.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        // Several header lines are one list, in order (RFC 9110 §5.3).
        let lines: Vec<Option<&str>> = headers
            .get_all(FORWARDED_FOR)
            .iter()
            .map(|value| value.to_str().ok())
            .collect();
        let mut client = peer;
        for line in lines.into_iter().rev() {
            let Some(line) = line else {
                return client;
            };
            for entry in line.rsplit(',') {
                let Some(ip) = parse_hop(entry) else {
                    return client;
                };
                client = ip;
                if !self.trusts(ip) {
                    return ip;
                }
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, optionally with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`) or in brackets.
fn parse_hop(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    let ip = entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            entry
                .strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|inner| inner.parse::<IpAddr>().ok())
        })?;
    Some(ip.to_canonical())
}

/// An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) as the IPv4 network it is, so it
/// matches the canonical addresses it is compared with.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) => match (v6.addr().to_ipv4_mapped(), v6.prefix_len().checked_sub(96)) {
            (Some(v4), Some(prefix)) => ipnet::Ipv4Net::new(v4, prefix)
                .map(IpNet::V4)
                .unwrap_or(net),
            _ => net,
        },
        v4 => v4,
    }
}

/// The address a request came from, as [`TrustedProxies::client_ip`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// Resolves the request's [`ClientAddr`] once, for every handler after it. A request
/// without connection information (a router driven in-process) gets none.
pub async fn resolve(
    State(trusted): State<TrustedProxies>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        let client = trusted.client_ip(peer.ip(), request.headers());
        request.extensions_mut().insert(ClientAddr(client));
    }
    next.run(request).await
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = StatusCode;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(client) = parts.extensions.get::<ClientAddr>() {
            return Ok(*client);
        }
        // Served without `resolve` (no proxy is trusted there): the peer.
        match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => Ok(ClientAddr(peer.ip().to_canonical())),
            None => {
                tracing::error!("the client's address is unknown: no connection information");
                Err(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(entries: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(entries).unwrap()
    }

    fn forwarded(lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(FORWARDED_FOR, line.parse().unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_header_is_ignored() {
        let none = TrustedProxies::default();
        let headers = forwarded(&["203.0.113.9"]);
        assert_eq!(none.client_ip(ip("10.0.0.2"), &headers), ip("10.0.0.2"));
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let headers = forwarded(&["10.0.0.5"]);
        assert_eq!(
            trusted.client_ip(ip("198.51.100.4"), &headers),
            ip("198.51.100.4")
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client() {
        let trusted = proxies(&["10.0.0.0/8", "192.0.2.7"]);
        // The client forged the leftmost entry; the proxies appended the rest.
        let headers = forwarded(&["1.2.3.4, 203.0.113.9, 192.0.2.7"]);
        assert_eq!(
            trusted.client_ip(ip("10.1.2.3"), &headers),
            ip("203.0.113.9")
        );
        // The same list split over several header lines.
        let headers = forwarded(&["1.2.3.4", "203.0.113.9", "192.0.2.7"]);
        assert_eq!(
            trusted.client_ip(ip("10.1.2.3"), &headers),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn entries_with_ports_and_mapped_addresses_are_read() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let headers = forwarded(&["[2001:db8::1]:4711, 10.0.0.9:80"]);
        assert_eq!(
            trusted.client_ip(ip("::ffff:10.0.0.1"), &headers),
            ip("2001:db8::1")
        );
        let headers = forwarded(&["203.0.113.9:5555"]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.1"), &headers),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn when_every_hop_is_trusted_or_unreadable_the_nearest_known_hop_stands_for_the_client() {
        let trusted = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        let headers = forwarded(&["10.0.0.3, 10.0.0.2"]);
        assert_eq!(trusted.client_ip(ip("10.0.0.1"), &headers), ip("10.0.0.3"));
        let headers = forwarded(&["203.0.113.9, garbage, 10.0.0.2"]);
        assert_eq!(trusted.client_ip(ip("10.0.0.1"), &headers), ip("10.0.0.2"));
    }

    #[test]
    fn a_malformed_entry_is_an_error_naming_it() {
        let err = TrustedProxies::parse(&["10.0.0.0/8", "10.0.0.0/33"]).unwrap_err();
        assert!(err.contains("`10.0.0.0/33`"), "{err}");
        let err = TrustedProxies::parse(&[""]).unwrap_err();
        assert!(err.contains("``"), "{err}");
        let mapped = proxies(&["::ffff:10.0.0.0/104", "192.0.2.7"]);
        assert!(mapped.trusts(ip("10.9.9.9")));
        assert!(mapped.trusts(ip("192.0.2.7")));
        assert!(!mapped.trusts(ip("192.0.2.8")));
    }
}
