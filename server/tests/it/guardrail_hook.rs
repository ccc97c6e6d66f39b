//! External guardrail hooks end to end, through the real binary and a real upstream: a hook
//! server in this process (axum on a free port) that checks each request's signature as an
//! operator's would and answers per hook; what the agent receives, what ran, what the
//! audit log holds and the hook latency metric are each checked. Then hooks as
//! configuration: through the admin service, the console and the catalog file.

use crate::common;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use common::console::{fetch_post, page, sign_in_admin};
use common::{Client, Reply, Server, call, init, learn};
use hmac::{Hmac, Mac};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use sha2::Sha256;
use skillgate_core::admin::AdminService;
use skillgate_core::model::{
    GuardrailHook, HookFailure, HookStage, InspectionPolicy, ToolSpec, Upstream, UpstreamKind,
};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

/// The signing secret the gateway is given (`HOOK_SECRET`) and the hook server checks.
const SECRET: &str = "hook-test-secret-3f9a";
const UPSTREAM_TEXT: &str = "Order O-1001 shipped on 2026-11-30.";

/// Each tool of the upstream, and the hook that reads it.
const TOOLS: [&str; 9] = [
    "allowed",
    "denied_arguments",
    "denied_result",
    "modified",
    "smuggled",
    "slow_closed",
    "slow_open",
    "wrong_secret",
    "unset_secret",
];

/// An upstream answering every tool with [`UPSTREAM_TEXT`], recording what ran.
#[derive(Clone)]
struct TestUpstream {
    ran: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for TestUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = TOOLS
            .iter()
            .map(|name| {
                let Value::Object(schema) = json!({"type": "object"}) else {
                    unreachable!("an object")
                };
                Tool::new(*name, "A tool of a test upstream.", Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.ran.lock().unwrap().push(request.name.to_string());
        Ok(CallToolResult::success(vec![ContentBlock::text(UPSTREAM_TEXT)]).into())
    }
}

async fn serve_upstream(ran: Arc<Mutex<Vec<String>>>) -> String {
    let service: StreamableHttpService<TestUpstream, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(TestUpstream { ran: ran.clone() }),
            Arc::default(),
            StreamableHttpServerConfig::default(),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

/// One request the hook server received.
#[derive(Debug, Clone)]
struct Asked {
    hook: String,
    signed: bool,
    body: Value,
}

type Log = Arc<Mutex<Vec<Asked>>>;

/// Whether `headers` carry `v1=HMAC-SHA256(SECRET, timestamp "." body)`, recomputed here.
fn signed(headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(timestamp), Some(signature)) =
        (header("skillgate-timestamp"), header("skillgate-signature"))
    else {
        return false;
    };
    let Some(hex) = signature.strip_prefix("v1=") else {
        return false;
    };
    let Ok(given) = hex::decode(hex) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// The hook server: `POST /<hook>` answers as that hook does, after checking the signature
/// (a bad one is answered 401, as an operator's service would).
async fn hook(
    State(log): State<Log>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let signed = signed(&headers, &body);
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push(Asked {
        hook: name.clone(),
        signed,
        body: parsed,
    });
    if !signed {
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let answer = match name.as_str() {
        denier if denier.starts_with("denier") => {
            json!({"decision": "deny", "reason": "names a competitor"})
        }
        "modifier" => json!({
            "decision": "modify",
            "reason": "order numbers are masked",
            "result": CallToolResult::success(vec![ContentBlock::text("Order [masked] shipped.")]),
        }),
        // A replacement that brings in what the built-in inspectors redact.
        "smuggler" => json!({
            "decision": "modify",
            "reason": "reformatted",
            "result": CallToolResult::success(vec![ContentBlock::text("Order shipped; deploy key AKIAQ3EGUWB6CMRXNL2T.")]),
        }),
        // Never answers: the gateway's timeout decides.
        "slow-closed" | "slow-open" => std::future::pending().await,
        _ => json!({"decision": "allow"}),
    };
    axum::Json(answer).into_response()
}

async fn serve_hooks(log: Log) -> String {
    let router = axum::Router::new()
        .route("/{name}", axum::routing::post(hook))
        .with_state(log);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    base
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

fn a_hook(base: &str, name: &str, tool: &str, stage: HookStage) -> GuardrailHook {
    GuardrailHook {
        name: slug(name),
        url: format!("{base}/{name}"),
        stages: vec![stage],
        tool: Some(tool.to_owned()),
        role: None,
        scope: None,
        timeout_ms: 2000,
        on_error: HookFailure::Block,
        secret_env: "HOOK_SECRET".to_owned(),
    }
}

/// One hook per tool of the upstream.
fn hooks(base: &str) -> Vec<GuardrailHook> {
    let mut slow_closed = a_hook(base, "slow-closed", "slow_closed", HookStage::Result);
    slow_closed.timeout_ms = 300;
    let mut slow_open = a_hook(base, "slow-open", "slow_open", HookStage::Result);
    slow_open.timeout_ms = 300;
    slow_open.on_error = HookFailure::Allow;
    let mut wrong = a_hook(base, "approver-wrong", "wrong_secret", HookStage::Result);
    wrong.secret_env = "WRONG_SECRET".to_owned();
    let mut unset = a_hook(base, "approver-unset", "unset_secret", HookStage::Result);
    unset.secret_env = "UNSET_HOOK_SECRET".to_owned();
    vec![
        a_hook(base, "approver", "allowed", HookStage::Result),
        a_hook(
            base,
            "denier-arguments",
            "denied_arguments",
            HookStage::Arguments,
        ),
        a_hook(base, "denier-result", "denied_result", HookStage::Result),
        a_hook(base, "modifier", "modified", HookStage::Result),
        a_hook(base, "smuggler", "smuggled", HookStage::Result),
        slow_closed,
        slow_open,
        wrong,
        unset,
    ]
}

struct Fixture {
    _first: Server,
    server: Server,
    client: Client,
    session: String,
    ran: Arc<Mutex<Vec<String>>>,
    asked: Log,
}

/// The upstream and the hooks registered, then a fresh process (with the signing secret in
/// its environment) that compiles that catalog, and a session that learned the role.
async fn fixture() -> Fixture {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let asked: Log = Arc::default();
    let upstream_url = serve_upstream(ran.clone()).await;
    let hooks_base = serve_hooks(asked.clone()).await;
    let first = Server::start();
    let store = Store::open(&first.database_url()).await.unwrap();
    store
        .upsert_upstream(&Upstream {
            name: slug("orders"),
            kind: UpstreamKind::Http {
                url: upstream_url,
                ca_bundle: None,
                allow_plaintext: false,
            },
        })
        .await
        .unwrap();
    let specs: Vec<ToolSpec> = TOOLS
        .iter()
        .map(|name| ToolSpec {
            name: (*name).to_owned(),
            description: "A tool of a test upstream.".to_owned(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            // One tool's argument is sensitive: a hook sees its digest, as the audit does.
            sensitive_args: if *name == "allowed" {
                vec!["order".to_owned()]
            } else {
                Vec::new()
            },
        })
        .collect();
    store.seed_tools(&slug("orders"), &specs).await.unwrap();
    common::catalog::grant(
        &store,
        common::catalog::Grant {
            skill: "hooked-tools",
            role: "hooked-user",
            scope: "hooked",
            tools: TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        },
    )
    .await;
    AdminService::open(store)
        .await
        .unwrap()
        .set_inspection_policy(
            "admin",
            InspectionPolicy {
                hooks: hooks(&hooks_base),
                ..InspectionPolicy::default()
            },
        )
        .await
        .unwrap();
    let server = first.replica_with_env(&[
        ("HOOK_SECRET", SECRET),
        ("WRONG_SECRET", "not-the-hook-secret"),
    ]);
    let key = server.create_key("hooked-agent", "hooked");
    let client = server.connect(&key).await;
    let (session, _) = init(&client).await;
    let learned = learn(&client, &session, "/roles/hooked-user").await;
    assert!(!learned.is_error, "{}", learned.text);
    Fixture {
        _first: first,
        server,
        client,
        session,
        ran,
        asked,
    }
}

impl Fixture {
    async fn call(&self, tool: &str) -> Reply {
        call(
            &self.client,
            &self.session,
            tool,
            json!({"order": "O-1001"}),
        )
        .await
    }

    fn ran(&self, tool: &str) -> bool {
        self.ran.lock().unwrap().iter().any(|t| t == tool)
    }

    /// What the hook server received from `hook`.
    fn asked(&self, hook: &str) -> Vec<Asked> {
        let asked = self.asked.lock().unwrap();
        asked.iter().filter(|a| a.hook == hook).cloned().collect()
    }

    fn events(&self, kind: &str, tool: &str) -> Vec<Value> {
        self.server
            .audit_events()
            .into_iter()
            .filter(|e| {
                e["kind"] == kind && e["payload"]["tool"] == tool && e["session_id"] == self.session
            })
            .collect()
    }

    /// The one finding of `tool`'s one `inspection_finding` event.
    fn finding(&self, tool: &str) -> Value {
        let events = self.events("inspection_finding", tool);
        assert_eq!(events.len(), 1, "one finding event for {tool}: {events:?}");
        let findings = events[0]["payload"]["findings"].as_array().unwrap().clone();
        assert_eq!(findings.len(), 1, "{findings:?}");
        findings[0].clone()
    }
}

#[tokio::test]
async fn hooks_allow_deny_and_modify_calls_with_signed_requests_and_are_audited() {
    let f = fixture().await;

    // Allow: the result passes untouched; the request was signed and carried the call.
    let allowed = f.call("allowed").await;
    assert!(!allowed.is_error, "{}", allowed.text);
    assert_eq!(allowed.text, UPSTREAM_TEXT);
    assert!(f.events("inspection_finding", "allowed").is_empty());
    let asked = f.asked("approver");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].signed, "the hook recomputed the signature");
    let body = &asked[0].body;
    assert_eq!(body["version"], 1);
    assert_eq!(body["stage"], "result");
    assert_eq!(body["call"]["tool"], "allowed");
    assert_eq!(body["call"]["upstream"], "orders");
    assert_eq!(body["call"]["role"], "hooked-user");
    assert_eq!(body["call"]["scope"], "hooked");
    assert_eq!(body["call"]["session_id"], f.session.as_str());
    let digest = &body["call"]["arguments"]["order"]["sha256"];
    assert_eq!(digest.as_str().map(str::len), Some(64), "{body}");
    assert!(!body.to_string().contains("O-1001\""), "{body}");
    assert_eq!(body["result"]["content"][0]["text"], UPSTREAM_TEXT);

    // Deny at the argument stage: refused before deciding, nothing ran, the reason given.
    let denied = f.call("denied_arguments").await;
    assert!(denied.is_error);
    assert_eq!(denied.code(), "CONTENT_BLOCKED", "{}", denied.text);
    assert!(
        denied.text.contains("hook:denier-arguments"),
        "{}",
        denied.text
    );
    assert!(
        denied.text.contains("names a competitor"),
        "{}",
        denied.text
    );
    assert!(!f.ran("denied_arguments"));
    let found = f.finding("denied_arguments");
    assert_eq!(found["inspector"], "hook:denier-arguments");
    assert_eq!(found["kind"], "deny");
    assert_eq!(found["action"], "block");
    assert_eq!(found["reason"], "names a competitor");
    assert_eq!(f.events("call_denied", "denied_arguments").len(), 1);
    let asked = f.asked("denier-arguments");
    assert_eq!(asked[0].body["stage"], "arguments");
    assert_eq!(
        asked[0].body["call"]["arguments"],
        json!({"order": "O-1001"})
    );
    assert_eq!(asked[0].body["call"]["role"], Value::Null);

    // Deny at the result stage: the call ran, its result is withheld.
    let withheld = f.call("denied_result").await;
    assert_eq!(withheld.code(), "CONTENT_BLOCKED", "{}", withheld.text);
    assert!(!withheld.text.contains("O-1001"), "{}", withheld.text);
    assert_eq!(
        withheld.structured["findings"][0]["inspector"],
        "hook:denier-result"
    );
    assert_eq!(
        withheld.structured["findings"][0]["reason"],
        "names a competitor"
    );
    assert!(f.ran("denied_result"));
    assert_eq!(f.finding("denied_result")["action"], "block");

    // Modify: the agent gets the hook's result; audited as a redaction.
    let modified = f.call("modified").await;
    assert!(!modified.is_error, "{}", modified.text);
    assert_eq!(modified.text, "Order [masked] shipped.");
    let found = f.finding("modified");
    assert_eq!(found["inspector"], "hook:modifier");
    assert_eq!(found["kind"], "modify");
    assert_eq!(found["action"], "redact");
    assert_eq!(found["reason"], "order numbers are masked");

    // A replacement is inspected again: the secret it brings is redacted and audited.
    let smuggled = f.call("smuggled").await;
    assert!(!smuggled.is_error, "{}", smuggled.text);
    assert_eq!(
        smuggled.text,
        "Order shipped; deploy key [REDACTED:aws_access_key]."
    );
    let events = f.events("inspection_finding", "smuggled");
    assert_eq!(events.len(), 1, "{events:?}");
    let findings = events[0]["payload"]["findings"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| {
            (
                f["inspector"].as_str().unwrap(),
                f["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [("hook:smuggler", "modify"), ("secrets", "aws_access_key")]
    );
}

#[tokio::test]
async fn a_hook_that_cannot_answer_blocks_unless_it_is_set_to_fail_open() {
    let f = fixture().await;

    // No answer within the timeout: fail closed by default.
    let closed = f.call("slow_closed").await;
    assert_eq!(closed.code(), "CONTENT_BLOCKED", "{}", closed.text);
    assert!(
        closed.text.contains("no answer within 300 ms"),
        "{}",
        closed.text
    );
    let found = f.finding("slow_closed");
    assert_eq!(found["kind"], "error");
    assert_eq!(found["action"], "block");

    // With on_error: allow the result passes and the failure is flagged.
    let open = f.call("slow_open").await;
    assert!(!open.is_error, "{}", open.text);
    assert_eq!(open.text, UPSTREAM_TEXT);
    let found = f.finding("slow_open");
    assert_eq!(found["action"], "flag");
    assert!(
        found["reason"].as_str().unwrap().contains("no answer"),
        "{found}"
    );

    // Signed with another secret: the hook detects it (401) and the call is blocked.
    let wrong = f.call("wrong_secret").await;
    assert_eq!(wrong.code(), "CONTENT_BLOCKED", "{}", wrong.text);
    assert!(wrong.text.contains("answered HTTP 401"), "{}", wrong.text);
    let asked = f.asked("approver-wrong");
    assert_eq!(asked.len(), 1);
    assert!(
        !asked[0].signed,
        "the hook saw a signature it could not verify"
    );

    // The secret's variable unset: blocked without asking, and the audit says why.
    let unset = f.call("unset_secret").await;
    assert_eq!(unset.code(), "CONTENT_BLOCKED", "{}", unset.text);
    assert!(f.asked("approver-unset").is_empty());
    let reason = f.finding("unset_secret")["reason"].clone();
    assert!(
        reason
            .as_str()
            .unwrap()
            .contains("`UNSET_HOOK_SECRET` is not set"),
        "{reason}"
    );

    // The audit never holds the secret.
    let log = serde_json::to_string(&f.server.audit_events()).unwrap();
    assert!(!log.contains(SECRET));

    // Each answer's latency, by hook, stage and outcome.
    let metrics = reqwest::get(format!("{}/metrics", f.server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for labels in [
        r#"hook="slow-closed",stage="result",outcome="error""#,
        r#"hook="slow-open",stage="result",outcome="error""#,
    ] {
        let prefix = format!("skillgate_guardrail_hook_seconds_count{{{labels}}} ");
        let count: f64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in the metrics:\n{metrics}"));
        assert_eq!(count, 1.0, "{prefix}");
    }
}

#[tokio::test]
async fn a_hook_with_a_remote_plain_http_url_or_a_timeout_out_of_bounds_is_refused() {
    let server = Server::start();
    let store = Store::open(&server.database_url()).await.unwrap();
    let admin = AdminService::open(store).await.unwrap();
    let mut remote = a_hook("http://hooks.example", "remote", "x", HookStage::Result);
    remote.tool = None;
    let error = admin
        .set_inspection_policy(
            "admin",
            InspectionPolicy {
                hooks: vec![remote.clone()],
                ..InspectionPolicy::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("hooks[0].url"), "{error}");
    remote.url = "https://hooks.example/check".to_owned();
    remote.timeout_ms = 60_000;
    let error = admin
        .set_inspection_policy(
            "admin",
            InspectionPolicy {
                hooks: vec![remote.clone()],
                ..InspectionPolicy::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("hooks[0].timeout_ms"), "{error}");
    remote.timeout_ms = 2000;
    admin
        .set_inspection_policy(
            "admin",
            InspectionPolicy {
                hooks: vec![remote.clone()],
                ..InspectionPolicy::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(admin.inspection_policy().await.unwrap().hooks, [remote]);
}

#[tokio::test]
async fn an_admin_adds_and_removes_a_hook_on_the_console_and_a_remote_plain_url_is_refused() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let form = |url: &'static str| {
        [
            ("name", "moderation"),
            ("url", url),
            ("stage_result", "on"),
            ("tool", "lookup_customer"),
            ("timeout_ms", "1500"),
            ("on_error", "allow"),
            ("secret_env", "GUARD_SECRET"),
        ]
    };
    let (status, body) = fetch_post(
        &server,
        &admin,
        "/console/api/add_inspection_hook",
        &form("http://guard.example/check"),
    )
    .await;
    assert_ne!(status, reqwest::StatusCode::OK, "{body}");
    assert!(body.contains("url"), "{body}");

    let (status, body) = fetch_post(
        &server,
        &admin,
        "/console/api/add_inspection_hook",
        &form("https://guard.example/check"),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let store = Store::open(&server.database_url()).await.unwrap();
    let mut expected = a_hook(
        "https://guard.example",
        "moderation",
        "lookup_customer",
        HookStage::Result,
    );
    expected.url = "https://guard.example/check".to_owned();
    expected.timeout_ms = 1500;
    expected.on_error = HookFailure::Allow;
    expected.secret_env = "GUARD_SECRET".to_owned();
    assert_eq!(
        store.load_catalog().await.unwrap().inspection.hooks,
        [expected]
    );
    let (_, html) = page(&server, &admin.cookie, "/inspectors").await;
    assert!(html.contains("https://guard.example/check"), "{html}");
    assert!(html.contains("GUARD_SECRET"), "{html}");
    assert!(html.contains("not set: the hook fails"), "{html}");

    let (status, body) = fetch_post(
        &server,
        &admin,
        "/console/api/remove_inspection_hook",
        &[("name", "moderation")],
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert!(
        store
            .load_catalog()
            .await
            .unwrap()
            .inspection
            .hooks
            .is_empty()
    );
}

#[tokio::test]
async fn a_hook_in_the_catalog_file_is_applied_and_exported_and_a_bad_one_refused_by_path() {
    let server = Server::start();
    let exported = server.cli(&["catalog", "export"]);
    assert!(exported.status.success(), "{exported:?}");
    let exported = String::from_utf8(exported.stdout).unwrap();
    assert!(!exported.contains("inspection:"), "{exported}");
    let section = |url: &str| {
        format!(
            "inspection:\n  hooks:\n  - name: moderation\n    url: {url}\n    stages:\n    - result\n    \
             secret_env: GUARD_SECRET\n"
        )
    };
    let file = server.dir().join("catalog.yaml");
    std::fs::write(
        &file,
        format!("{exported}{}", section("http://guard.example/check")),
    )
    .unwrap();
    let refused = server.cli(&["catalog", "apply", file.to_str().unwrap()]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("inspection.hooks[0].url"), "{stderr}");

    std::fs::write(
        &file,
        format!("{exported}{}", section("https://guard.example/check")),
    )
    .unwrap();
    let applied = server.cli(&["catalog", "apply", file.to_str().unwrap()]);
    assert!(applied.status.success(), "{applied:?}");
    let store = Store::open(&server.database_url()).await.unwrap();
    let hooks = store.load_catalog().await.unwrap().inspection.hooks;
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].timeout_ms, 2000, "the default timeout");
    assert_eq!(
        hooks[0].on_error,
        HookFailure::Block,
        "fail closed by default"
    );
    let again = String::from_utf8(server.cli(&["catalog", "export"]).stdout).unwrap();
    assert!(again.contains("secret_env: GUARD_SECRET"), "{again}");
    assert!(
        again.contains("url: https://guard.example/check"),
        "{again}"
    );
}
