//! Workspaces from the command line (issue #55): `skillgate workspace create|list`, and the
//! key, catalog and audit commands in one workspace with `--workspace`, against the
//! database of a running server.

use crate::common;

use std::process::Output;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use common::Server;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn succeeded(output: Output) -> String {
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
}

fn failed(output: Output) -> String {
    assert!(!output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every audit event of `workspace`'s chain, as `audit export` prints it.
fn events(server: &Server, workspace: &str) -> Vec<Value> {
    server.workspace_audit_events(workspace)
}

fn admin_actions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "admin_change")
        .map(|e| e["payload"]["action"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_workspace_made_on_the_command_line_keeps_its_own_catalog_keys_and_audit_chain() {
    let server = Server::start();
    let created = succeeded(server.cli(&["workspace", "create", "finance", "--title", "Finance"]));
    assert!(created.contains("created workspace finance"), "{created}");
    let listed = succeeded(server.cli(&["workspace", "list"]));
    let names: Vec<&str> = listed
        .lines()
        .map(|line| line.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["default", "finance"], "{listed}");

    // A new workspace's catalog is empty; the default's, exported, applies into it.
    let empty = succeeded(server.cli(&["--workspace", "finance", "catalog", "export"]));
    assert!(!empty.contains("tier-1-support"), "{empty}");
    let file = server.dir().join("demo.yaml");
    std::fs::write(&file, succeeded(server.cli(&["catalog", "export"]))).unwrap();
    succeeded(server.cli(&[
        "--workspace",
        "finance",
        "catalog",
        "apply",
        file.to_str().unwrap(),
    ]));
    assert!(
        succeeded(server.cli(&["--workspace", "finance", "catalog", "export"]))
            .contains("tier-1-support")
    );

    // A key of finance is listed in finance only. (The file declares a key `demo-support`
    // too: the apply made finance one of its own.)
    succeeded(server.cli(&[
        "--workspace",
        "finance",
        "key",
        "create",
        "--name",
        "finance-ci",
        "--scope",
        "support",
    ]));
    let finance_keys = succeeded(server.cli(&["--workspace", "finance", "key", "list"]));
    let default_keys = succeeded(server.cli(&["key", "list"]));
    assert!(finance_keys.contains("finance-ci"), "{finance_keys}");
    let prefix_of = |listing: &str| {
        listing
            .lines()
            .find(|line| line.starts_with("demo-support "))
            .and_then(|line| line.split_whitespace().nth(2))
            .map(str::to_owned)
    };
    assert!(prefix_of(&finance_keys).is_some(), "{finance_keys}");
    assert_ne!(prefix_of(&finance_keys), prefix_of(&default_keys));
    assert!(!default_keys.contains("finance-ci"), "{default_keys}");

    // Each chain holds its own story, and every chain verifies.
    let finance = admin_actions(&events(&server, "finance"));
    assert_eq!(
        finance.first().map(String::as_str),
        Some("workspace.create")
    );
    assert_eq!(
        finance.iter().filter(|a| *a == "agent_key.create").count(),
        2,
        "the file's key and finance-ci: {finance:?}"
    );
    let platform = admin_actions(&events(&server, "default"));
    assert!(platform.contains(&"workspace.create".to_owned()));
    assert_eq!(
        platform.iter().filter(|a| *a == "agent_key.create").count(),
        1,
        "only the demo's key was made in the default workspace: {platform:?}"
    );
    let verified = succeeded(server.cli(&["audit", "verify", "--every-workspace"]));
    assert!(
        verified.contains("workspace default:") && verified.contains("workspace finance:"),
        "{verified}"
    );
    succeeded(server.cli(&["--workspace", "finance", "audit", "verify"]));
}

#[test]
fn an_unknown_workspace_or_one_given_to_a_deployment_wide_command_is_refused() {
    let server = Server::start();
    let unknown = failed(server.cli(&["--workspace", "nope", "key", "list"]));
    assert!(unknown.contains("workspace `nope` not found"), "{unknown}");
    let malformed = failed(server.cli(&["--workspace", "Not A Name", "key", "list"]));
    assert!(malformed.contains("--workspace"), "{malformed}");
    let deployment_wide = failed(server.cli(&["--workspace", "nope", "workspace", "list"]));
    assert!(
        deployment_wide
            .contains("applies to the key, catalog, skill, holds, notifier and audit commands"),
        "{deployment_wide}"
    );
    let taken = failed(server.cli(&["workspace", "create", "default"]));
    assert!(taken.contains("exists in every deployment"), "{taken}");
    assert_eq!(
        succeeded(server.cli(&["workspace", "list"]))
            .lines()
            .count(),
        1,
        "nothing was created"
    );
}

/// A new key of `workspace`'s `support` scope, made on the command line.
fn support_key(server: &Server, workspace: &str) -> String {
    let created = succeeded(server.cli(&[
        "--workspace",
        workspace,
        "key",
        "create",
        "--name",
        &format!("{workspace}-agent"),
        "--scope",
        "support",
    ]));
    created
        .lines()
        .find_map(|line| line.strip_prefix("agent key for scope support: "))
        .unwrap_or_else(|| panic!("no key in {created}"))
        .trim()
        .to_owned()
}

/// Makes workspace `finance` on `server`'s database, with the demo catalog whose tier-1
/// role says "Finance front line" instead of "Front-line customer support" and whose skill
/// `refund-handling` is `finance-refunds`, and returns a key of finance's `support` scope.
fn finance_with_key(server: &Server) -> String {
    succeeded(server.cli(&["workspace", "create", "finance"]));
    let exported = succeeded(server.cli(&["catalog", "export"]));
    let edited = exported
        .replacen("Front-line customer support", "Finance front line", 1)
        .replace("refund-handling", "finance-refunds");
    assert!(
        edited.contains("Finance front line") && edited.contains("finance-refunds"),
        "the demo catalog names its tier-1 role and refund skill so"
    );
    let file = server.dir().join("finance.yaml");
    std::fs::write(&file, edited).unwrap();
    succeeded(server.cli(&[
        "--workspace",
        "finance",
        "catalog",
        "apply",
        file.to_str().unwrap(),
    ]));
    let key = support_key(server, "finance");
    assert!(
        key.ends_with(".finance"),
        "a finance key names finance: {key}"
    );
    key
}

/// The ids of the governance sessions started in `workspace`'s chain.
fn sessions_started(server: &Server, workspace: &str) -> Vec<String> {
    events(server, workspace)
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .filter_map(|e| e["session_id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn an_agent_of_a_workspace_is_served_that_workspaces_catalog_and_nothing_of_another() {
    let server = Server::start();
    let finance_key = finance_with_key(&server);

    // The workspace's agent learns and calls through the workspace's own catalog, on a
    // server that was running before the workspace existed.
    let finance = server.connect(&finance_key).await;
    let (finance_session, started) = common::init(&finance).await;
    assert!(
        started.text.contains("Finance front line"),
        "{}",
        started.text
    );
    common::may_refund_o5005(&finance, &finance_session).await;
    let default = server.connect(&server.support_key).await;
    let (default_session, started) = common::init(&default).await;
    assert!(
        !started.text.contains("Finance front line"),
        "the default workspace's agent sees its own catalog: {}",
        started.text
    );

    // Naming another workspace's session finds nothing, and says no more than that.
    let crossed = common::learn(&finance, &default_session, "/roles/tier-1-support").await;
    assert!(crossed.is_error, "{}", crossed.text);
    assert_eq!(crossed.code(), "ACCESS_DENIED", "{}", crossed.text);
    let own_unknown = common::learn(&finance, "no-such-session", "/roles/tier-1-support").await;
    assert_eq!(
        crossed.text.replace(&default_session, "ID"),
        own_unknown.text.replace("no-such-session", "ID"),
        "another workspace's session reads exactly as one that does not exist"
    );

    // Each workspace's chain holds its own sessions; the refusal is finance's.
    let finance_sessions = sessions_started(&server, "finance");
    let default_sessions = sessions_started(&server, "default");
    assert!(finance_sessions.contains(&finance_session));
    assert!(!finance_sessions.contains(&default_session));
    assert!(default_sessions.contains(&default_session));
    assert!(!default_sessions.contains(&finance_session));
    let finance_events = events(&server, "finance");
    // A session that is not the caller's is recorded as the digest of the id it named.
    let named = hex::encode(Sha256::digest(default_session.as_bytes()));
    assert!(
        finance_events.iter().any(|e| e["kind"] == "learn_denied"
            && e["payload"]["named_session_digest"] == named.as_str()),
        "the refused learn is audited in the caller's workspace"
    );
    assert!(
        !events(&server, "default")
            .iter()
            .any(|e| e["kind"] == "learn_denied"),
        "and nothing of it in the default workspace's"
    );
    succeeded(server.cli(&["audit", "verify", "--every-workspace"]));
}

#[tokio::test]
async fn a_key_is_refused_when_the_workspace_it_names_is_not_the_one_that_issued_it() {
    let server = Server::start();
    let finance_key = finance_with_key(&server);
    let client = reqwest::Client::new();
    let status = |key: String| {
        let client = client.clone();
        let url = server.mcp_url();
        async move {
            client
                .post(url)
                .bearer_auth(key)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let secret = finance_key.trim_end_matches(".finance");
    assert_eq!(status(finance_key.clone()).await, 200);
    for forged in [
        secret.to_owned(),
        format!("{secret}.default"),
        format!("{secret}.nope"),
        format!("{secret}.Finance"),
        format!("{}.finance", server.support_key),
    ] {
        assert_eq!(status(forged.clone()).await, 401, "{forged}");
    }
}

/// The default workspace's catalog file with `lookup_customer`'s `email` argument marked
/// sensitive.
fn with_email_sensitive(exported: &str) -> String {
    let marked = exported.replacen(
        "- name: lookup_customer\n  upstream: demo\n",
        "- name: lookup_customer\n  upstream: demo\n  sensitive_args:\n  - email\n",
        1,
    );
    assert_ne!(marked, exported, "the export lists lookup_customer so");
    marked
}

#[tokio::test]
async fn an_upstream_shared_into_a_workspace_serves_its_agents_and_changes_only_on_the_platform() {
    let server = Server::start_with(&["--catalog-poll-ms", "100"]);
    succeeded(server.cli(&["workspace", "create", "finance"]));
    succeeded(server.cli(&["workspace", "share-upstream", "demo", "--into", "finance"]));
    assert!(
        succeeded(server.cli(&["workspace", "shares"])).starts_with("demo\tfinance\t"),
        "the share is listed"
    );

    // Finance authors its catalog over the shared upstream: the default's own file,
    // whose upstream and tools are exactly the copy, so only finance's roles, skills and
    // scopes are written.
    let exported = succeeded(server.cli(&["catalog", "export"]));
    let file = server.dir().join("finance.yaml");
    std::fs::write(&file, &exported).unwrap();
    let path = file.to_str().unwrap();
    succeeded(server.cli(&["--workspace", "finance", "catalog", "apply", path]));
    let key = support_key(&server, "finance");
    let finance = server.connect(&key).await;
    let (session, _) = common::init(&finance).await;
    common::may_refund_o5005(&finance, &session).await;

    // Finance cannot change it, not even by its own catalog file.
    std::fs::write(&file, with_email_sensitive(&exported)).unwrap();
    let refused = failed(server.cli(&["--workspace", "finance", "catalog", "apply", path]));
    assert!(refused.contains("shared into this workspace"), "{refused}");
    let refused =
        failed(server.cli(&["workspace", "unshare-upstream", "demo", "--from", "finance"]));
    assert!(
        refused.contains("use tools of upstream `demo`"),
        "{refused}"
    );

    // The same change on the platform reaches finance's copy through the running server,
    // recorded in finance's chain.
    succeeded(server.cli(&["catalog", "apply", path]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let copy = succeeded(server.cli(&["--workspace", "finance", "catalog", "export"]));
        if copy.contains("sensitive_args:\n  - email") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "finance's copy never got the platform's change:\n{copy}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let finance_events = events(&server, "finance");
    let actions = admin_actions(&finance_events);
    assert!(
        actions.contains(&"upstream.share".to_owned()),
        "{actions:?}"
    );
    assert!(
        actions.contains(&"upstream.shared_change".to_owned()),
        "{actions:?}"
    );
    assert!(
        !admin_actions(&events(&server, "default")).contains(&"upstream.shared_change".to_owned()),
        "the copy's change is finance's alone"
    );
    succeeded(server.cli(&["audit", "verify", "--every-workspace"]));
}

/// A refusal's text with `id` in place of `named`, to compare refusals of different ids.
fn as_unknown(text: &str, named: &str) -> String {
    text.replace(named, "ID")
}

/// What an MCP error answer says, whatever the id it named.
fn read_refusal(
    result: Result<rmcp::model::ReadResourceResult, rmcp::service::ServiceError>,
    named: &str,
) -> String {
    match result {
        Err(rmcp::service::ServiceError::McpError(error)) => {
            as_unknown(&format!("{} {}", error.code.0, error.message), named)
        }
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

#[tokio::test]
async fn every_mcp_method_treats_another_workspaces_objects_as_unknown_and_changes_nothing() {
    use crate::tasks::{Agent, hold_of, refund};
    use rmcp::model::ReadResourceRequestParams;

    let server = Server::start();
    let finance_key = finance_with_key(&server);

    // The default workspace's objects: a session, a refund held as a task (its hold), a
    // skill finance does not have.
    let default = Agent::new(&server, &server.support_key);
    let default_session = default.tier_one().await;
    let created = default
        .call(&default_session, "process_refund", refund(300))
        .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let hold = hold_of(&created);
    const DEFAULT_SKILL: &str = "skill://tier-1-support/refund-handling/SKILL.md";
    let default_events = events(&server, "default").len();

    // Finance names each of them, and each reads exactly as an id that does not exist.
    let finance = Agent::new(&server, &finance_key);
    let finance_session = finance.tier_one().await;
    let compare = |crossed: &Value, unknown: &Value, named: &str, what: &str| {
        assert_eq!(crossed["isError"], true, "{what}: {crossed}");
        assert_eq!(
            as_unknown(&crossed.to_string(), named),
            as_unknown(&unknown.to_string(), "no-such-id"),
            "{what}"
        );
    };
    for (tool, arguments) in [
        (
            "call_tool",
            json!({"tool": "check_refund_eligibility",
                   "arguments": {"customer_id": "C-1003", "order_id": "O-5005"}}),
        ),
        ("learn", json!({"path": "/roles/tier-1-support"})),
        (
            "feedback_skill",
            json!({"skill": "finance-refunds", "rating": 1}),
        ),
    ] {
        let with = |session: &str| {
            let mut arguments = arguments.clone();
            arguments["session_id"] = json!(session);
            arguments
        };
        let crossed = finance.tool(tool, with(&default_session)).await;
        let unknown = finance.tool(tool, with("no-such-id")).await;
        compare(&crossed, &unknown, &default_session, tool);
    }
    let crossed = finance
        .tool(
            "call_tool",
            json!({"hold_id": hold, "session_id": finance_session}),
        )
        .await;
    let unknown = finance
        .tool(
            "call_tool",
            json!({"hold_id": "no-such-id", "session_id": finance_session}),
        )
        .await;
    compare(
        &crossed,
        &unknown,
        &hold,
        "resuming another workspace's hold",
    );
    for (method, (status, crossed)) in [
        ("tasks/get", finance.get(&task).await),
        ("tasks/cancel", finance.cancel(&task).await),
    ] {
        let (unknown_status, unknown) = if method == "tasks/get" {
            finance.get("no-such-id").await
        } else {
            finance.cancel("no-such-id").await
        };
        assert_eq!(status, unknown_status, "{method}");
        assert!(crossed.get("error").is_some(), "{method}: {crossed}");
        assert_eq!(
            as_unknown(&crossed.to_string(), &task),
            as_unknown(&unknown.to_string(), "no-such-id"),
            "{method}"
        );
    }
    let reader = server.connect(&finance_key).await;
    let unknown_skill = "skill://tier-1-support/no-such-id/SKILL.md";
    assert_eq!(
        read_refusal(
            reader
                .read_resource(ReadResourceRequestParams::new(DEFAULT_SKILL))
                .await,
            "refund-handling"
        ),
        read_refusal(
            reader
                .read_resource(ReadResourceRequestParams::new(unknown_skill))
                .await,
            "no-such-id"
        ),
        "another workspace's skill reads as an unknown one"
    );

    // Nothing of the default workspace changed: its task still waits, its chain has no
    // new event, and the refusals are finance's.
    let (_, still) = default.get(&task).await;
    assert_eq!(still["result"]["status"], "working", "{still}");
    assert_eq!(events(&server, "default").len(), default_events);
    let finance_events = events(&server, "finance");
    assert!(
        finance_events
            .iter()
            .filter(|e| e["kind"].as_str().is_some_and(|k| k.ends_with("_denied")))
            .count()
            >= 4,
        "the refusals are audited in finance's chain"
    );
    assert!(
        finance_events
            .iter()
            .all(|e| e.to_string().find(&default_session).is_none()),
        "finance's chain holds no id of the default workspace's session in clear"
    );
}

#[tokio::test]
async fn the_command_line_in_one_workspace_does_not_reach_anothers_keys_sessions_or_skills() {
    let server = Server::start();
    let _ = finance_with_key(&server);
    let default_key = server.create_key("only-in-default", "support");
    let client = server.connect(&default_key).await;
    let (session, _) = common::init(&client).await;
    let default_events = events(&server, "default").len();
    let finance_events = events(&server, "finance").len();

    let refused =
        failed(server.cli(&["--workspace", "finance", "key", "revoke", "only-in-default"]));
    assert!(refused.contains("not found"), "{refused}");
    let timeline = server.cli(&[
        "--workspace",
        "finance",
        "audit",
        "export",
        "--session",
        &session,
        "--format",
        "jsonl",
    ]);
    assert!(
        !stdout(&timeline).contains(&session),
        "finance's export of another workspace's session holds none of it: {timeline:?}"
    );
    let bundle = server.dir().join("refund-handling.zip");
    let refused = failed(server.cli(&[
        "--workspace",
        "finance",
        "skill",
        "export",
        "refund-handling",
        "--output",
        bundle.to_str().unwrap(),
    ]));
    assert!(
        refused.contains("not found") || refused.contains("no skill"),
        "{refused}"
    );
    assert!(!bundle.exists());

    // The default workspace's key still works and nothing was written anywhere.
    let (again, _) = common::init(&server.connect(&default_key).await).await;
    assert_ne!(again, session);
    assert!(
        succeeded(server.cli(&["key", "list"])).contains("only-in-default"),
        "the key is listed, not revoked"
    );
    assert_eq!(events(&server, "finance").len(), finance_events);
    assert_eq!(
        events(&server, "default").len(),
        default_events + 1,
        "the second init only"
    );
}
