//! What an agent learns when an upstream fails: the kind of failure, never the upstream's
//! command line, URL or credentials.

use crate::common;

use std::time::Duration;

use common::{Reply, Server, call, init, learn};
use serde_json::json;
use skillgate_core::model::{Upstream, UpstreamKind};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

const SECRET_DIR: &str = "/nonexistent/acme-sk-live-4242";

/// The wait a "restarting after repeated failures; retry in …" answer names (`3 s`, or
/// a `Duration`'s debug form such as `217.1ms`), rounded up to whole milliseconds.
fn backoff(text: &str) -> Option<Duration> {
    let (_, wait) = text.rsplit_once("restarting after repeated failures; retry in ")?;
    let wait = wait.trim();
    let (number, unit) = match wait.strip_suffix("ms") {
        Some(number) => (number, 0.001),
        None => (wait.trim_end_matches('s').trim(), 1.0),
    };
    let secs = number.parse::<f64>().ok()? * unit;
    Some(Duration::from_millis((secs * 1000.0).ceil() as u64))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_cannot_start_is_reported_to_the_agent_without_its_command_line() {
    let server = Server::start();
    // The demo upstream now points at a command that does not exist, with a token among
    // its arguments; a second process on the same database starts with that catalog.
    let store = Store::open(&server.database_url()).await.unwrap();
    store
        .upsert_upstream(&Upstream {
            name: Slug::parse("demo").unwrap(),
            kind: UpstreamKind::Stdio {
                command: format!("{SECRET_DIR}/crm-mcp"),
                args: vec!["--token".into(), "sk-live-4242".into()],
            },
        })
        .await
        .unwrap();
    let replica = server.replica();
    let agent = replica.connect(&server.support_key).await;
    let (session, _) = init(&agent).await;
    assert!(
        !learn(&agent, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let lookup = || {
        call(
            &agent,
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1001"}),
        )
    };

    // The start-up sync already failed to start it: wait out the restart backoff the
    // answer names, so the call below makes a start attempt of its own.
    let mut reply: Reply = lookup().await;
    for _ in 0..3 {
        let Some(wait) = backoff(&reply.text) else {
            break;
        };
        tokio::time::sleep(wait).await;
        reply = lookup().await;
    }

    assert!(reply.is_error, "{}", reply.text);
    assert_eq!(reply.code(), "UPSTREAM_ERROR", "{}", reply.text);
    let seen = format!("{} {}", reply.text, reply.structured);
    for leak in [SECRET_DIR, "crm-mcp", "sk-live-4242", "--token"] {
        assert!(!seen.contains(leak), "the agent was told `{leak}`: {seen}");
    }
    assert!(
        reply
            .text
            .contains("the upstream `demo` could not be started"),
        "{}",
        reply.text
    );
}
