//! The upstream connector against a real stdio MCP server: this test binary itself.
//!
//! The tests need an executable that speaks MCP on stdin/stdout. Cargo builds none for
//! them: `cargo test --test …` does not build examples, and a `[[bin]]` in core would pull
//! rmcp's server side into core's normal dependencies. So this target has its own `main`
//! (`harness = false`): started with `SKILLGATE_TEST_UPSTREAM` set, it *is* the upstream;
//! otherwise it runs the tests below, which spawn this same executable as their child.

#[path = "it/upstream_common/mod.rs"]
mod upstream_common;

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::{Map, Value, json};
use skillgate_core::upstream::{UpstreamClient, UpstreamConfig, UpstreamError, UpstreamOptions};
use upstream_common::{TestUpstream, permit};

const CHILD_MODE: &str = "SKILLGATE_TEST_UPSTREAM";
const TIMEOUT: Duration = Duration::from_secs(10);

type Test = fn() -> Pin<Box<dyn Future<Output = ()>>>;

macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|| Box::pin($name())) as Test)),*]
    };
}

fn main() -> ExitCode {
    match std::env::var(CHILD_MODE).as_deref() {
        Ok("serve") => return serve_stdio(),
        Ok(_) => {
            eprintln!("test upstream: crashing on purpose");
            return ExitCode::from(1);
        }
        Err(_) => {}
    }
    let tests = tests![
        lists_and_calls_tools_on_a_stdio_upstream,
        concurrent_calls_share_one_child_process,
        a_killed_child_is_restarted_by_the_next_call,
        a_call_in_flight_when_the_child_dies_fails_clearly_and_is_not_retried,
        a_command_that_does_not_exist_gives_a_clear_error,
        a_crash_looping_command_is_not_restarted_in_a_tight_loop,
        dropping_the_client_stops_its_child_process,
        a_stdio_upstream_with_another_server_name_than_the_pin_is_closed_before_any_request,
        a_stdio_upstream_with_a_new_version_of_the_pinned_server_is_used_and_reported_once,
    ];
    run(&tests)
}

/// A minimal libtest stand-in: runs the tests whose names contain the first free argument
/// (equal it, with `--exact`). It answers `--list --format terse` as libtest does, which is
/// how nextest finds the tests before running each with `NAME --exact`.
fn run(tests: &[(&str, Test)]) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|arg| arg == name);
    if flag("--list") {
        // No test here is ignored.
        if !flag("--ignored") {
            for (name, _) in tests {
                println!("{name}: test");
            }
        }
        return ExitCode::SUCCESS;
    }
    // The value of `--format` and the like is not a filter.
    const TAKES_VALUE: [&str; 4] = ["--format", "--test-threads", "--skip", "--color"];
    let filter = args
        .iter()
        .enumerate()
        .find(|(i, arg)| {
            !arg.starts_with('-') && (*i == 0 || !TAKES_VALUE.contains(&args[i - 1].as_str()))
        })
        .map(|(_, arg)| arg.as_str());
    let exact = flag("--exact");
    let selected: Vec<_> = tests
        .iter()
        .filter(|(name, _)| {
            filter.is_none_or(|f| if exact { *name == f } else { name.contains(f) })
        })
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, test) in selected {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(test())));
        drop(runtime);
        println!(
            "test {name} ... {}",
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        if outcome.is_err() {
            failed.push(*name);
        }
    }
    println!(
        "\ntest result: {} failed: {failed:?}",
        if failed.is_empty() { "ok." } else { "FAILED." }
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn serve_stdio() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async {
        eprintln!("test upstream: serving MCP on stdio");
        match TestUpstream::default()
            .serve(rmcp::transport::stdio())
            .await
        {
            Ok(service) => {
                let _ = service.waiting().await;
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("test upstream: handshake failed: {error}");
                ExitCode::FAILURE
            }
        }
    })
}

fn this_binary_as(mode: &str) -> UpstreamConfig {
    UpstreamConfig::Stdio {
        command: std::env::current_exe().unwrap().display().to_string(),
        args: Vec::new(),
        env: BTreeMap::from([(CHILD_MODE.to_owned(), mode.to_owned())]),
    }
}

fn stdio_client() -> UpstreamClient {
    UpstreamClient::new("stdio-test", this_binary_as("serve"))
}

fn arguments(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

/// Polls (the process must die first) until `condition` holds, failing after ten seconds.
async fn eventually<F: Future<Output = bool>>(what: &str, mut condition: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn lists_and_calls_tools_on_a_stdio_upstream() {
    let client = stdio_client();
    assert!(
        client.process_id().await.is_none(),
        "nothing starts before the first use"
    );

    let tools = client.list_tools().await.unwrap();
    let echo = client
        .call(
            permit("echo", arguments(json!({ "n": 7, "s": "x" }))),
            None,
            TIMEOUT,
        )
        .await
        .unwrap();
    let fail = client
        .call(permit("fail", Map::new()), None, TIMEOUT)
        .await
        .unwrap();

    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "slow", "fail", "gather"]);
    assert_eq!(
        echo.result.structured_content,
        Some(json!({ "n": 7, "s": "x" }))
    );
    assert!(!echo.is_error);
    assert!(fail.is_error);
    assert!(client.process_id().await.is_some());
}

async fn concurrent_calls_share_one_child_process() {
    let client = Arc::new(stdio_client());
    let calls = 4;

    let outcomes = futures::future::join_all((0..calls).map(|_| {
        let client = client.clone();
        async move {
            client
                .call(
                    permit("gather", arguments(json!({ "n": calls }))),
                    None,
                    TIMEOUT,
                )
                .await
        }
    }))
    .await;

    for outcome in outcomes {
        assert!(!outcome.unwrap().is_error);
    }
}

async fn a_killed_child_is_restarted_by_the_next_call() {
    let client = stdio_client();
    client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();
    let first_pid = client.process_id().await.unwrap();

    let status = std::process::Command::new("kill")
        .args(["-KILL", &first_pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    eventually("the client notices the child died", || async {
        !client.is_connected().await
    })
    .await;
    let outcome = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();

    assert!(!outcome.is_error);
    let second_pid = client.process_id().await.unwrap();
    assert_ne!(first_pid, second_pid);
}

async fn a_call_in_flight_when_the_child_dies_fails_clearly_and_is_not_retried() {
    let client = stdio_client();
    client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();
    let first_pid = client.process_id().await.unwrap();

    let error = client
        .call(permit("exit_process", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(
        matches!(error, UpstreamError::Disconnected { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("not retried"), "{error}");
    eventually("the client notices the child died", || async {
        !client.is_connected().await
    })
    .await;
    client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();
    assert_ne!(client.process_id().await.unwrap(), first_pid);
}

async fn a_command_that_does_not_exist_gives_a_clear_error() {
    let command = "/nonexistent/skillgate-no-such-upstream";
    let client = UpstreamClient::new("missing", UpstreamConfig::stdio(command, ["--x"]));

    let error = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(matches!(error, UpstreamError::Spawn { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(command) && message.contains("No such file"),
        "{message}"
    );
}

async fn a_crash_looping_command_is_not_restarted_in_a_tight_loop() {
    let options = UpstreamOptions {
        min_backoff: Duration::from_secs(60),
        ..UpstreamOptions::default()
    };
    let client = UpstreamClient::with_options("crashy", this_binary_as("crash"), options);

    let first = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();
    let second = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(
        matches!(&first, UpstreamError::Connect { reason, .. } if reason.contains("exited before completing the MCP handshake")),
        "{first:?}"
    );
    assert!(
        matches!(second, UpstreamError::BackingOff { .. }),
        "{second:?}"
    );
}

async fn dropping_the_client_stops_its_child_process() {
    let client = stdio_client();
    client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();
    let pid = client.process_id().await.unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists());

    drop(client);

    eventually("the child process is gone", || {
        let gone = !proc_dir.exists();
        async move { gone }
    })
    .await;
}

async fn a_stdio_upstream_with_another_server_name_than_the_pin_is_closed_before_any_request() {
    let client = stdio_client();
    client.list_tools().await.unwrap();
    let seen = client.seen_identity().expect("the handshake's identity");
    assert_eq!(seen.spki_sha256, None, "no TLS key over stdio");

    // A pin of another server: the next start of the upstream is refused.
    let pinned = skillgate_core::model::UpstreamIdentity {
        server_name: format!("{}-other", seen.server_name),
        ..seen.clone()
    };
    let reconnect = stdio_client();
    reconnect.pin_identity(Some(pinned));
    let refused = reconnect.list_tools().await.unwrap_err();
    assert!(
        matches!(&refused, UpstreamError::IdentityChanged { reason, .. }
            if reason.contains("server_name")),
        "{refused}"
    );
    assert_eq!(reconnect.seen_identity(), Some(seen.clone()));

    let matching = stdio_client();
    matching.pin_identity(Some(seen));
    assert!(matching.list_tools().await.is_ok());
}

async fn a_stdio_upstream_with_a_new_version_of_the_pinned_server_is_used_and_reported_once() {
    let seen = {
        let client = stdio_client();
        client.list_tools().await.unwrap();
        client.seen_identity().expect("the handshake's identity")
    };
    let reported = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook: skillgate_core::upstream::IdentityHook = {
        let reported = reported.clone();
        Arc::new(move |upstream: &str, identity| {
            reported
                .lock()
                .unwrap()
                .push((upstream.to_owned(), identity));
        })
    };
    // Pinned at the version before: the upstream has been upgraded since.
    let upgraded = stdio_client().with_identity_hook(Some(hook));
    upgraded.pin_identity(Some(skillgate_core::model::UpstreamIdentity {
        server_version: format!("{}-previous", seen.server_version),
        ..seen.clone()
    }));
    assert!(upgraded.list_tools().await.is_ok(), "an upgrade is served");
    assert!(upgraded.list_tools().await.is_ok());
    assert_eq!(
        *reported.lock().unwrap(),
        [("stdio-test".to_owned(), seen)],
        "the upgrade is reported once, with the new version"
    );
}
