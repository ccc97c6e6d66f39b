//! Resolving the host names of URL arguments, for an operator who asked for it (the egress
//! policy's `resolve_names`): a name whose DNS answer is internal passes every reading of
//! its spelling, so the gateway asks the system resolver what it is. Like [`super::hook`],
//! this is I/O, bounded in time and in the names one call may make it resolve.
//!
//! What the gateway resolves is a check, not a pin: the upstream resolves the name again
//! when it fetches, and a name built to answer differently then (DNS rebinding) is beyond
//! this check; a `url_host` limit with an allow list is the stronger guard.

use std::net::IpAddr;
use std::time::Duration;

use super::Finding;
use super::net::forbidden_host;
use crate::model::Inspector;

/// How long the names of one call may take to resolve, together.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
/// The most names one call's arguments may make the gateway resolve; the rest are
/// `unresolvable` (fail closed), so a call cannot tie up the resolver.
pub const MAX_NAMES: usize = 16;
/// The most lookups in flight in the process. The system resolver blocks a thread per
/// lookup, and a lookup a call stopped waiting for still runs to its end: beyond this,
/// names are `unresolvable` at once rather than queueing behind a slow or dead resolver.
const MAX_IN_FLIGHT: usize = 64;

static IN_FLIGHT: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_IN_FLIGHT);

/// An `egress` finding for each `(path, name)` whose name resolves to an internal address
/// (`resolves_internal`: loopback, private, link-local, metadata, …, in any of its
/// answers) or does not resolve within `timeout` (`unresolvable`). Each name is resolved
/// once, all of them at the same time.
pub async fn resolution_findings(names: &[(String, String)], timeout: Duration) -> Vec<Finding> {
    let mut distinct: Vec<&str> = Vec::new();
    for (_, name) in names {
        if !distinct.contains(&name.as_str()) {
            distinct.push(name);
        }
    }
    let (asked, over) = distinct.split_at(distinct.len().min(MAX_NAMES));
    let answers = futures::future::join_all(
        asked
            .iter()
            .map(|name| async move { (*name, lookup(name, timeout).await) }),
    )
    .await;
    names
        .iter()
        .filter_map(|(path, name)| {
            let kind = if over.contains(&name.as_str()) {
                Some("unresolvable")
            } else {
                answers
                    .iter()
                    .find(|(asked, _)| asked == name)
                    .and_then(|(_, verdict)| *verdict)
            }?;
            Some(Finding {
                inspector: Inspector::Egress,
                kind,
                path: path.clone(),
                fingerprint: None,
            })
        })
        .collect()
}

/// What the system resolver says of `name` within `timeout`. The lookup runs in a task of
/// its own holding an [`IN_FLIGHT`] permit until it ends, also after the caller gave up.
async fn lookup(name: &str, timeout: std::time::Duration) -> Option<&'static str> {
    let Ok(permit) = IN_FLIGHT.try_acquire() else {
        return Some("unresolvable");
    };
    let name = name.to_owned();
    let task = tokio::spawn(async move {
        let _permit = permit;
        tokio::net::lookup_host((name.as_str(), 443))
            .await
            .map(|addresses| addresses.map(|a| a.ip()).collect::<Vec<IpAddr>>())
    });
    match tokio::time::timeout(timeout, task).await {
        Ok(Ok(Ok(addresses))) => verdict(&addresses),
        _ => Some("unresolvable"),
    }
}

/// What a set of answers says: `resolves_internal` when any of them is internal (a name
/// with one public and one private answer can be made to use either), `unresolvable` for
/// none, else nothing.
fn verdict(addresses: &[IpAddr]) -> Option<&'static str> {
    if addresses.is_empty() {
        return Some("unresolvable");
    }
    addresses
        .iter()
        .any(|ip| {
            let host = match ip {
                IpAddr::V4(v4) => url::Host::Ipv4(*v4),
                IpAddr::V6(v6) => url::Host::Ipv6(*v6),
            };
            forbidden_host(&host).is_some()
        })
        .then_some("resolves_internal")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, name: &str) -> (String, String) {
        (path.to_owned(), name.to_owned())
    }

    #[test]
    fn any_internal_answer_makes_a_name_internal_and_no_answer_unresolvable() {
        let public: IpAddr = "93.184.215.14".parse().unwrap();
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        let metadata: IpAddr = "fd00:ec2::254".parse().unwrap();
        assert_eq!(verdict(&[public]), None);
        assert_eq!(verdict(&[public, private]), Some("resolves_internal"));
        assert_eq!(verdict(&[metadata]), Some("resolves_internal"));
        assert_eq!(verdict(&[]), Some("unresolvable"));
    }

    #[tokio::test]
    async fn a_name_the_system_resolves_to_loopback_and_a_reserved_name_are_found() {
        // `localhost` is in every /etc/hosts; `.invalid` never resolves (RFC 6761).
        let names = [
            at("/url", "localhost"),
            at("/backup", "no-such-host.invalid"),
            at("/again", "localhost"),
        ];
        let found: Vec<(String, &str)> = resolution_findings(&names, RESOLVE_TIMEOUT)
            .await
            .into_iter()
            .map(|f| (f.path, f.kind))
            .collect();
        assert_eq!(
            found,
            [
                ("/url".to_owned(), "resolves_internal"),
                ("/backup".to_owned(), "unresolvable"),
                ("/again".to_owned(), "resolves_internal"),
            ]
        );
    }

    #[tokio::test]
    async fn names_past_the_cap_are_unresolvable_without_asking() {
        let names: Vec<(String, String)> = (0..=MAX_NAMES)
            .map(|i| at(&format!("/u/{i}"), &format!("host{i}.invalid")))
            .collect();
        // A zero budget: the asked names time out; the one past the cap is never asked.
        let found = resolution_findings(&names, Duration::ZERO).await;
        assert_eq!(found.len(), MAX_NAMES + 1);
        assert!(found.iter().all(|f| f.kind == "unresolvable"));
    }
}
