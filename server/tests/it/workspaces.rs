//! Workspaces from the command line (issue #55): `skillgate workspace create|list`, and the
//! key, catalog and audit commands in one workspace with `--workspace`, against the
//! database of a running server.

use crate::common;

use std::process::Output;

use serde_json::Value;

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
    succeeded(server.cli(&[
        "--workspace",
        workspace,
        "audit",
        "export",
        "--format",
        "jsonl",
    ]))
    .lines()
    .map(|line| serde_json::from_str(line).unwrap())
    .collect()
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
        deployment_wide.contains("applies to the key, catalog, skill and audit commands"),
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
