//! The upstream connector against a real streamable HTTP MCP server, served in-process.

use crate::upstream_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Map, Value, json};
use skillgate_core::upstream::{
    Secret, UpstreamClient, UpstreamConfig, UpstreamError, UpstreamOptions, UpstreamPool,
};
use tokio::task::JoinHandle;
use upstream_common::{TestUpstream, permit};

const TIMEOUT: Duration = Duration::from_secs(10);

struct TestServer {
    url: String,
    task: JoinHandle<()>,
    /// TCP connections the server accepted.
    accepted: Arc<AtomicUsize>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn require_bearer(
    State(expected): State<&'static str>,
    request: Request,
    next: Next,
) -> Response {
    let sent = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    match sent {
        Some(sent) if sent == expected => next.run(request).await,
        // A wrong token gets a bare 401, a missing one the challenge the MCP spec asks for.
        Some(_) => StatusCode::UNAUTHORIZED.into_response(),
        None => (StatusCode::UNAUTHORIZED, [("www-authenticate", "Bearer")]).into_response(),
    }
}

/// Serves [`TestUpstream`] at `http://127.0.0.1:<port>/mcp`, optionally requiring
/// `Authorization: Bearer <token>`.
async fn serve(bearer: Option<&'static str>) -> TestServer {
    let upstream = TestUpstream::default();
    let service: StreamableHttpService<TestUpstream, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(upstream.clone()),
            Arc::default(),
            StreamableHttpServerConfig::default(),
        );
    let mut router = axum::Router::new().nest_service("/mcp", service);
    if let Some(token) = bearer {
        let expected: &'static str = format!("Bearer {token}").leak();
        router = router.layer(from_fn_with_state(expected, require_bearer));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let listener = listener.tap_io(move |tcp| {
        counter.fetch_add(1, Ordering::SeqCst);
        let _ = tcp.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    TestServer {
        url,
        task,
        accepted,
    }
}

fn client(server: &TestServer) -> UpstreamClient {
    UpstreamClient::new("test", UpstreamConfig::http(&server.url, None))
}

fn arguments(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_calls_reuse_one_pooled_connection_instead_of_opening_new_ones() {
    let server = serve(None).await;
    let client = client(&server);
    client.list_tools().await.unwrap();
    let before = server.accepted.load(Ordering::SeqCst);
    let calls = 400;
    for i in 0..calls {
        let outcome = client
            .call(permit("echo", arguments(json!({ "i": i }))), None, TIMEOUT)
            .await
            .unwrap();
        assert!(!outcome.is_error);
    }
    let opened = server.accepted.load(Ordering::SeqCst) - before;
    // A call's connection normally goes back to the pool before its answer arrives, so the
    // next call finds it there. On a loaded machine the answer can win that race now and
    // then, and the next call opens one more connection: without pooling every call would.
    assert!(
        opened <= calls / 20,
        "{calls} sequential calls opened {opened} new TCP connections"
    );
}

#[tokio::test]
async fn lists_the_tools_an_http_upstream_advertises() {
    let server = serve(None).await;
    let tools = client(&server).list_tools().await.unwrap();

    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "slow", "fail", "gather"]);
    let slow = &tools[1];
    assert_eq!(slow.description, "Sleeps for `ms` milliseconds");
    assert_eq!(slow.input_schema["properties"]["ms"]["type"], "integer");
    assert!(slow.sensitive_args.is_empty());
}

#[tokio::test]
async fn a_tool_result_passes_through_unchanged() {
    let server = serve(None).await;
    let args = json!({ "amount": 500.0000001, "note": "héllo", "nested": { "list": [1, 2] } });

    let outcome = client(&server)
        .call(permit("echo", arguments(args.clone())), None, TIMEOUT)
        .await
        .unwrap();

    assert!(!outcome.is_error);
    assert_eq!(outcome.result.structured_content, Some(args));
    assert_eq!(outcome.json, serde_json::to_vec(&outcome.result).unwrap());
    assert!(!outcome.json.is_empty());
    assert!(outcome.duration < TIMEOUT);
}

#[tokio::test]
async fn a_downstream_tool_error_is_an_outcome_not_an_upstream_error() {
    let server = serve(None).await;

    let outcome = client(&server)
        .call(permit("fail", Map::new()), None, TIMEOUT)
        .await
        .unwrap();

    assert!(outcome.is_error);
    assert_eq!(outcome.result.is_error, Some(true));
    assert_eq!(text_of(&outcome.result), "the tool failed");
}

#[tokio::test]
async fn an_unknown_tool_is_reported_as_the_upstreams_json_rpc_error() {
    let server = serve(None).await;

    let error = client(&server)
        .call(permit("nope", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(
        matches!(&error, UpstreamError::Rpc { code: -32602, message, .. } if message.contains("unknown tool `nope`")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_slow_tool_times_out_within_the_deadline_and_the_session_survives() {
    let server = serve(None).await;
    let client = client(&server);
    client.list_tools().await.unwrap();
    let timeout = Duration::from_millis(300);

    let started = Instant::now();
    let error = client
        .call(
            permit("slow", arguments(json!({ "ms": 30_000 }))),
            None,
            timeout,
        )
        .await
        .unwrap_err();
    let took = started.elapsed();

    assert!(
        matches!(&error, UpstreamError::Timeout { timeout: t, .. } if *t == timeout),
        "{error:?}"
    );
    assert!(error.to_string().contains("tools/call `slow`"), "{error}");
    assert!(
        took >= timeout && took < timeout + Duration::from_secs(1),
        "took {took:?}"
    );
    let outcome = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();
    assert!(!outcome.is_error);
}

#[tokio::test]
async fn concurrent_calls_on_one_upstream_run_at_the_same_time() {
    let server = serve(None).await;
    let client = Arc::new(client(&server));
    let calls = 8;

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
        let outcome = outcome.unwrap();
        assert!(!outcome.is_error, "{}", text_of(&outcome.result));
    }
}

#[tokio::test]
async fn the_bearer_token_is_sent_to_the_upstream() {
    let server = serve(Some("s3cret")).await;
    let client = UpstreamClient::new(
        "secured",
        UpstreamConfig::http(&server.url, Some(Secret::new("s3cret"))),
    );

    let outcome = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap();

    assert!(!outcome.is_error);
}

#[tokio::test]
async fn a_wrong_or_missing_bearer_token_is_reported_as_unauthorized() {
    let server = serve(Some("s3cret")).await;
    for bearer in [Some(Secret::new("wrong")), None] {
        let client = UpstreamClient::new("secured", UpstreamConfig::http(&server.url, bearer));

        let error = client
            .call(permit("echo", Map::new()), None, TIMEOUT)
            .await
            .unwrap_err();

        assert!(
            matches!(error, UpstreamError::Unauthorized { .. }),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_url_gives_a_clear_connect_error_without_hanging() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let client = UpstreamClient::new("gone", UpstreamConfig::http(&url, None));

    let error = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(matches!(error, UpstreamError::Connect { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&url) && message.contains("gone"),
        "{message}"
    );
}

#[tokio::test]
async fn a_failing_upstream_is_not_retried_inside_its_backoff_window() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let options = UpstreamOptions {
        min_backoff: Duration::from_secs(60),
        ..UpstreamOptions::default()
    };
    let client = UpstreamClient::with_options("gone", UpstreamConfig::http(&url, None), options);

    let first = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();
    let second = client
        .call(permit("echo", Map::new()), None, TIMEOUT)
        .await
        .unwrap_err();

    assert!(matches!(first, UpstreamError::Connect { .. }), "{first:?}");
    assert!(
        matches!(second, UpstreamError::BackingOff { retry_in, .. } if retry_in <= Duration::from_secs(60)),
        "{second:?}"
    );
}

#[tokio::test]
async fn the_pool_shares_one_client_per_upstream_and_checks_health() {
    let server = serve(None).await;
    let pool = UpstreamPool::default();
    pool.upsert("crm", UpstreamConfig::http(&server.url, None));

    let first = pool.get("crm").unwrap();
    let second = pool.get("crm").unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    pool.health("crm", TIMEOUT).await.unwrap();
    assert!(first.is_connected().await);

    pool.upsert("crm", UpstreamConfig::http(&server.url, None));
    assert!(
        Arc::ptr_eq(&first, &pool.get("crm").unwrap()),
        "same config keeps the session"
    );
    pool.upsert(
        "crm",
        UpstreamConfig::http(format!("{}/", server.url), None),
    );
    assert!(
        !Arc::ptr_eq(&first, &pool.get("crm").unwrap()),
        "a new config gets a new client"
    );

    assert_eq!(pool.names(), ["crm"]);
    assert!(pool.remove("crm"));
    let error = pool.get("crm").unwrap_err();
    assert!(matches!(error, UpstreamError::Unknown { .. }), "{error:?}");
    assert!(matches!(
        pool.health("crm", TIMEOUT).await,
        Err(UpstreamError::Unknown { .. })
    ));
}
