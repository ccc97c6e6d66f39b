//! `skillgate catalog export | schema | apply` with the real binary on real SQLite files:
//! the round trip, the plan of an edit and the call that obeys it, dry runs, pruning,
//! invalid files, and the audit events an apply writes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use skillgate_core::catalog_code::{CatalogDocument, parse};
use skillgate_core::slug::Slug;

use common::{BIN, Server, call, init, learn};

/// `skillgate ARGS --database-url URL`.
fn skillgate(database_url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--database-url", database_url])
        .env("RUST_LOG", "warn")
        .output()
        .expect("the skillgate binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn succeeded(output: Output) -> String {
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
}

/// A database of its own that nothing has seeded: what `Store::open` makes of a new file.
struct EmptyDatabase {
    _dir: tempfile::TempDir,
    url: String,
}

impl EmptyDatabase {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = skillgate_core::store::testing::database_url(dir.path(), "empty.db");
        Self { _dir: dir, url }
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    fn admin_changes(&self) -> Vec<Value> {
        admin_changes_of(&succeeded(skillgate(
            &self.url(),
            &["audit", "export", "--format", "jsonl"],
        )))
    }
}

fn admin_changes_of(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] == "admin_change")
        .collect()
}

fn admin_changes(server: &Server) -> Vec<Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|event| event["kind"] == "admin_change")
        .collect()
}

fn export(database_url: &str) -> String {
    succeeded(skillgate(database_url, &["catalog", "export"]))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn apply(database_url: &str, file: &Path, flags: &[&str]) -> Output {
    let mut args = vec!["catalog", "apply", file.to_str().unwrap()];
    args.extend_from_slice(flags);
    skillgate(database_url, &args)
}

/// What the audit names an apply of these bytes by.
fn actor_of(bytes: &[u8]) -> String {
    format!(
        "catalog-apply:{}",
        &hex::encode(Sha256::digest(bytes))[..12]
    )
}

fn document(yaml: &str) -> CatalogDocument {
    parse(yaml.as_bytes()).unwrap()
}

/// Where in a role's limits its cap on the refunds of a session is.
fn session_cap(doc: &CatalogDocument, role: usize) -> usize {
    doc.roles[role]
        .limits
        .iter()
        .position(|l| l.max.is_some() && l.arg.as_deref() == Some("amount"))
        .expect("the role caps the refunds of a session")
}

fn role_index(doc: &CatalogDocument, slug: &str) -> usize {
    doc.roles
        .iter()
        .position(|r| r.slug.as_str() == slug)
        .unwrap()
}

#[test]
fn the_demo_catalog_exported_applied_to_an_empty_database_and_exported_again_is_byte_identical() {
    let server = Server::start();
    let made = server.cli(&[
        "key",
        "create",
        "--name",
        "ops-bot",
        "--scope",
        "ops",
        "--expires-in-days",
        "30",
    ]);
    assert!(made.status.success(), "{made:?}");
    let file = server.dir().join("catalog.yaml");
    succeeded(server.cli(&["catalog", "export", "--output", file.to_str().unwrap()]));
    let exported = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        exported,
        export(&server.database_url()),
        "the file is stdout's export"
    );
    assert!(!exported.contains("sgk_"), "no key material: {exported}");
    assert!(exported.contains("- name: ops-bot\n  scope: ops\n  expires_at: "));

    let empty = EmptyDatabase::new();
    let applied = succeeded(apply(&empty.url(), &file, &[]));
    assert!(applied.contains("+ role tier-1-support\n"), "{applied}");
    assert!(applied.contains("applied in one transaction"), "{applied}");
    // Each new key's secret is printed once, as `key create` prints it.
    assert!(
        applied.contains("agent key for scope support: sgk_"),
        "{applied}"
    );
    assert!(
        applied.contains("agent key for scope ops: sgk_"),
        "{applied}"
    );
    assert_eq!(
        export(&empty.url()),
        exported,
        "export → apply to an empty database → export is byte-identical"
    );

    // One event per entity, all by the file's digest.
    let planned = applied.lines().filter(|l| l.starts_with("+ ")).count();
    let events = empty.admin_changes();
    assert_eq!(events.len(), planned, "{applied}");
    let actor = actor_of(exported.as_bytes());
    assert!(events.iter().all(|e| e["actor"] == actor), "{events:?}");
    let targets: Vec<&str> = events
        .iter()
        .filter_map(|e| e["payload"]["target"].as_str())
        .collect();
    for target in [
        "upstream:demo",
        "tool:process_refund",
        "skill:refund-handling",
    ] {
        assert!(targets.contains(&target), "{targets:?}");
    }

    // Applying the same file again changes nothing and writes no event, there and on the
    // database it came from.
    assert_eq!(succeeded(apply(&empty.url(), &file, &[])), "no changes\n");
    assert_eq!(empty.admin_changes().len(), planned);
    let before = admin_changes(&server).len();
    assert_eq!(
        succeeded(apply(&server.database_url(), &file, &["--prune"])),
        "no changes\n"
    );
    assert_eq!(admin_changes(&server).len(), before);
}

#[tokio::test]
async fn a_changed_limit_is_planned_with_its_old_and_new_value_and_the_next_call_obeys_it() {
    let server = Server::start();
    let exported = export(&server.database_url());
    let mut doc = document(&exported);
    let tier1 = role_index(&doc, "tier-1-support");
    let cap = session_cap(&doc, tier1);
    doc.roles[tier1].limits[cap].max = Some(parse_max("300"));
    let edited = doc.to_yaml();
    let file = write(server.dir(), "edited.yaml", &edited);

    let plan = format!(
        "~ role tier-1-support: limits[{cap}]\n    limits[{cap}].max: 1000 → 300\n\
         0 to create, 1 to change, 0 to remove\n"
    );
    let events_before = admin_changes(&server).len();
    let dry = succeeded(apply(&server.database_url(), &file, &["--dry-run"]));
    assert_eq!(dry, format!("{plan}dry run: nothing was written\n"));
    assert_eq!(
        admin_changes(&server).len(),
        events_before,
        "a dry run writes no event"
    );
    assert_eq!(export(&server.database_url()), exported, "nor any change");
    // The same report for CI, as one JSON object.
    let json = succeeded(apply(
        &server.database_url(),
        &file,
        &["--dry-run", "--format", "json"],
    ));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["applied"], false, "{json}");
    assert_eq!(
        [&json["create"], &json["change"], &json["remove"]],
        [0, 1, 0]
    );
    assert_eq!(
        json["changes"][0]["details"],
        serde_json::json!([{"path": format!("limits[{cap}].max"), "before": 1000, "after": 300}])
    );
    assert_eq!(admin_changes(&server).len(), events_before);

    let actor = actor_of(edited.as_bytes());
    let applied = succeeded(apply(&server.database_url(), &file, &[]));
    assert_eq!(
        applied,
        format!("{plan}applied in one transaction, audited as {actor}\n")
    );
    let events = admin_changes(&server);
    assert_eq!(
        events.len(),
        events_before + 1,
        "one event for the one entity"
    );
    let event = events.last().unwrap();
    assert_eq!(event["actor"], actor);
    assert_eq!(event["payload"]["action"], "role.update");
    assert_eq!(event["payload"]["target"], "role:tier-1-support");
    assert_eq!(
        event["payload"]["after"]["value"]["limits"][cap]["max"],
        "300"
    );
    assert_eq!(export(&server.database_url()), edited);
    assert_eq!(
        succeeded(apply(&server.database_url(), &file, &[])),
        "no changes\n"
    );
    assert_eq!(admin_changes(&server).len(), events_before + 1);

    // A server started on the database decides with the new cap: 200 passes, 200 more
    // would make 400 > 300.
    let replica = server.replica();
    let client = replica.connect(&replica.support_key).await;
    let session = eligible_for_refunds(&client).await;
    let refund = json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": 200,
                        "reason": "Premium support not delivered"});
    let first = call(&client, &session, "process_refund", refund.clone()).await;
    assert!(!first.is_error, "{}", first.text);
    let second = call(&client, &session, "process_refund", refund).await;
    assert_eq!(second.code(), "GOVERNANCE_VIOLATION", "{}", second.text);
    assert!(second.text.contains("at most 300"), "{}", second.text);
    assert_eq!(server.executed("process_refund").len(), 1);
}

#[tokio::test]
async fn a_fleet_guardrail_in_the_file_binds_every_matching_argument_of_the_tools_it_names() {
    use skillgate_core::catalog_code::document::{CheckDoc, JsonValue, LimitDoc, LimitKind};
    let server = Server::start();
    let mut doc = document(&export(&server.database_url()));
    let support = doc
        .scopes
        .iter()
        .position(|s| s.slug.as_str() == "support")
        .expect("the demo has the support scope");
    // Lookups may only read customer C-1001, whichever argument names it (any case).
    doc.scopes[support].guardrails.push(LimitDoc {
        kind: LimitKind::ArgRule,
        tool: "lookup_*".into(),
        name: Some("*_ID".into()),
        check: Some(CheckDoc::OneOf),
        values: Some(vec![JsonValue(json!("C-1001"))]),
        ..LimitDoc::default()
    });
    let edited = doc.to_yaml();
    assert!(edited.contains("kind: arg_rule"), "{edited}");
    let file = write(server.dir(), "fleet.yaml", &edited);
    succeeded(apply(&server.database_url(), &file, &[]));
    assert_eq!(export(&server.database_url()), edited, "it round-trips");

    let replica = server.replica();
    let client = replica.connect(&replica.support_key).await;
    let (session, offer) = init(&client).await;
    assert!(
        offer
            .text
            .contains("must have every argument named like `*_ID` set to one of \"C-1001\""),
        "{}",
        offer.text
    );
    assert!(
        !learn(&client, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let allowed = call(
        &client,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1001"}),
    )
    .await;
    assert!(!allowed.is_error, "{}", allowed.text);
    let refused = call(
        &client,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1002"}),
    )
    .await;
    assert_eq!(refused.code(), "GOVERNANCE_VIOLATION", "{}", refused.text);
    assert!(
        refused.text.contains("guardrail of scope support"),
        "{}",
        refused.text
    );
    assert!(refused.text.contains("/customer_id"), "{}", refused.text);
    assert_eq!(server.executed("lookup_customer").len(), 1);
}

fn parse_max(text: &str) -> skillgate_core::catalog_code::document::DecimalDoc {
    text.parse().unwrap()
}

#[tokio::test]
async fn prune_removes_what_the_file_omits_and_without_it_nothing_is_removed() {
    let server = Server::start();
    let exported = export(&server.database_url());
    let mut doc = document(&exported);
    doc.scopes.retain(|s| s.slug.as_str() != "ops");
    doc.roles.retain(|r| r.slug.as_str() != "system-admin");
    doc.skills
        .retain(|s| s.slug.as_str() != "account-administration");
    doc.keys.retain(|k| k.name != "demo-support");
    let edited = doc.to_yaml();
    let file = write(server.dir(), "smaller.yaml", &edited);

    let events_before = admin_changes(&server).len();
    assert_eq!(
        succeeded(apply(&server.database_url(), &file, &[])),
        "no changes\n"
    );
    assert_eq!(
        export(&server.database_url()),
        exported,
        "nothing removed without --prune"
    );

    let applied = succeeded(apply(&server.database_url(), &file, &["--prune"]));
    let expected = "- skill account-administration (with every version and candidate)\n\
                    - role system-admin\n\
                    - scope ops\n\
                    - agent key demo-support (revoked: it stops authenticating at once)\n\
                    0 to create, 0 to change, 4 to remove\n";
    assert!(applied.starts_with(expected), "{applied}");
    let events = admin_changes(&server);
    let new: Vec<(&str, &str)> = events[events_before..]
        .iter()
        .map(|e| {
            (
                e["payload"]["action"].as_str().unwrap(),
                e["payload"]["target"].as_str().unwrap(),
            )
        })
        .collect();
    // Removals run in reverse: keys before scopes, roles before their skills.
    assert_eq!(
        new,
        [
            ("agent_key.revoke", "agent_key:demo-support"),
            ("scope.delete", "scope:ops"),
            ("role.delete", "role:system-admin"),
            ("skill.delete", "skill:account-administration"),
        ]
    );
    let actor = actor_of(edited.as_bytes());
    assert!(events[events_before..].iter().all(|e| e["actor"] == actor));
    assert_eq!(export(&server.database_url()), edited);

    // The revoked key no longer authenticates on the running server.
    let status = reqwest::Client::new()
        .post(server.mcp_url())
        .bearer_auth(&server.support_key)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);

    // A skill a kept role still uses cannot be pruned: the role's reference is named.
    let mut doc = document(&edited);
    doc.skills.retain(|s| s.slug.as_str() != "refund-handling");
    let refused = apply(
        &server.database_url(),
        &write(server.dir(), "dangling.yaml", &doc.to_yaml()),
        &["--prune"],
    );
    assert!(!refused.status.success());
    let tier1 = role_index(&doc, "tier-1-support");
    let at = doc.roles[tier1]
        .skills
        .iter()
        .position(|s| s.as_str() == "refund-handling")
        .unwrap();
    let errors = stderr(&refused);
    assert!(
        errors.contains(&format!(
            "roles[{tier1}].skills[{at}]: unknown skill `refund-handling`: it is not in the file, so --prune would remove it"
        )),
        "{errors}"
    );
    assert_eq!(export(&server.database_url()), edited);
}

#[test]
fn an_invalid_file_is_refused_naming_every_problem_by_its_path_and_nothing_is_written() {
    let server = Server::start();
    let exported = export(&server.database_url());
    let mut doc = document(&exported);
    let tier1 = role_index(&doc, "tier-1-support");
    let bound = doc.roles[tier1]
        .limits
        .iter()
        .position(|l| l.arg.is_some())
        .unwrap();
    doc.roles[tier1].limits[bound].arg = Some("colour".into());
    doc.skills[0].tools.push("teleport".into());
    let unknown_skill = doc.roles[0].skills.len();
    doc.roles[0].skills.push(Slug::parse("juggling").unwrap());
    let support = doc
        .scopes
        .iter()
        .position(|s| s.slug.as_str() == "support")
        .unwrap();
    doc.scopes[support].guardrails[0].tool = "teleport".into();
    let duplicate = doc.roles[1].clone();
    doc.roles.push(duplicate);
    let key = doc
        .keys
        .iter()
        .position(|k| k.name == "demo-support")
        .unwrap();
    doc.keys[key].scope = Slug::parse("ops").unwrap();
    let file = write(server.dir(), "broken.yaml", &doc.to_yaml());

    let events_before = server.audit_events().len();
    let refused = apply(&server.database_url(), &file, &[]);
    assert!(!refused.status.success());
    assert!(stdout(&refused).is_empty(), "no plan for an invalid file");
    let errors = stderr(&refused);
    assert!(errors.contains("nothing was changed"), "{errors}");
    let tools = doc.skills[0].tools.len() - 1;
    let last_role = doc.roles.len() - 1;
    for path in [
        format!(
            "roles[{tier1}].limits[{bound}].arg: tool `process_refund` has no argument `colour`"
        ),
        format!("skills[0].tools[{tools}]: unknown tool `teleport`"),
        format!("roles[0].skills[{unknown_skill}]: unknown skill `juggling`"),
        format!("scopes[{support}].guardrails[0].tool: unknown tool `teleport`"),
        format!(
            "roles[{last_role}].slug: `{}` is listed twice",
            doc.roles[1].slug
        ),
        format!("keys[{key}].scope: agent key `demo-support` belongs to scope `support`"),
    ] {
        assert!(errors.contains(&path), "missing {path:?} in:\n{errors}");
    }
    // Nothing changed: the refusal is on the record (one `admin_refused`), nothing else.
    assert_eq!(
        server.audit_events().len(),
        events_before + 1,
        "nothing written but the refusal"
    );
    assert_eq!(
        server.audit_events().last().unwrap()["kind"],
        "admin_refused"
    );
    assert_eq!(export(&server.database_url()), exported);

    // A value of the wrong type, and a field the document does not have.
    let typo = exported.replacen("max: 1000", "max: lots", 1);
    let refused = apply(
        &server.database_url(),
        &write(server.dir(), "typo.yaml", &typo),
        &[],
    );
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(&format!("roles[{tier1}].limits[")),
        "{}",
        stderr(&refused)
    );
    assert!(
        stderr(&refused).contains("].max: `lots` is not a number at line "),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        stderr(&refused).matches(".max:").count(),
        1,
        "the path once, then the message and its line: {}",
        stderr(&refused)
    );
    let unknown = exported.replacen(
        "  title: Tier 1 support",
        "  title: Tier 1 support\n  colour: blue",
        1,
    );
    let refused = apply(
        &server.database_url(),
        &write(server.dir(), "unknown.yaml", &unknown),
        &[],
    );
    assert!(
        stderr(&refused).contains("unknown field `colour`"),
        "{}",
        stderr(&refused)
    );
    // Three refused applies, three `admin_refused` events, no change.
    assert_eq!(server.audit_events().len(), events_before + 3);
    assert!(
        server.audit_events()[events_before..]
            .iter()
            .all(|e| e["kind"] == "admin_refused")
    );
}

#[test]
fn catalog_schema_prints_the_committed_json_schema() {
    let printed = succeeded(skillgate("sqlite::memory:", &["catalog", "schema"]));
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/catalog.schema.json"
    ))
    .unwrap();
    assert!(
        printed == committed,
        "`skillgate catalog schema` differs from docs/catalog.schema.json"
    );
    let schema: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(
        schema["additionalProperties"], false,
        "unknown fields are an error"
    );
    assert!(schema["$defs"]["LimitDoc"]["properties"]["max"].is_object());
}

#[test]
fn apply_refuses_a_file_over_the_size_limit_or_with_a_repeated_key_naming_why_and_writes_nothing() {
    let server = Server::start();
    let exported = export(&server.database_url());
    let changes_before = admin_changes(&server).len();

    // Over the limit (here lowered to below the demo's size): refused before it is read,
    // a dry run too.
    let file = write(server.dir(), "catalog.yaml", &exported);
    for flags in [
        &["--max-catalog-bytes", "1000"][..],
        &["--max-catalog-bytes", "1000", "--dry-run"],
    ] {
        let refused = apply(&server.database_url(), &file, flags);
        assert!(!refused.status.success(), "{refused:?}");
        assert!(
            stderr(&refused).contains(&format!(
                "catalog.yaml is {} bytes, over the catalog size limit (--max-catalog-bytes) of 1000 bytes",
                exported.len()
            )),
            "{}",
            stderr(&refused)
        );
    }

    // A key written twice in a tool's schema: the last value would have won.
    let at = exported
        .find("        type: number\n")
        .expect("a numeric argument in the demo");
    let mut repeated = exported.clone();
    repeated.insert_str(at, "        type: string\n");
    let file = write(server.dir(), "repeated.yaml", &repeated);
    let refused = apply(&server.database_url(), &file, &[]);
    assert!(!refused.status.success(), "{refused:?}");
    let text = stderr(&refused);
    assert!(
        text.contains(".input_schema.properties.") && text.contains(r#": duplicate key "type""#),
        "{text}"
    );
    assert_eq!(
        export(&server.database_url()),
        exported,
        "nothing was changed"
    );
    assert_eq!(
        admin_changes(&server).len(),
        changes_before,
        "no admin change was written"
    );
}

/// A tier-1 session whose order O-5005 of C-1003 was checked eligible for refunds.
async fn eligible_for_refunds(client: &common::Client) -> String {
    let (session, _) = init(client).await;
    assert!(
        !learn(client, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let eligible = call(
        client,
        &session,
        "check_refund_eligibility",
        json!({"customer_id": "C-1003", "order_id": "O-5005"}),
    )
    .await;
    assert!(!eligible.is_error, "{}", eligible.text);
    session
}

/// The demo agent refunds 200, 200 and 150 of one order (550, under today's 1000).
async fn three_refunds(server: &Server) -> String {
    let client = server.connect(&server.support_key).await;
    let session = eligible_for_refunds(&client).await;
    for amount in [200, 200, 150] {
        let refund = json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
                            "reason": "Premium support not delivered"});
        let answer = call(&client, &session, "process_refund", refund).await;
        assert_eq!(answer.structured["decision"], "allowed", "{}", answer.text);
    }
    session
}

#[tokio::test]
async fn a_dry_run_replays_the_last_hour_against_the_file_and_fails_the_step_when_calls_would_flip()
{
    let server = Server::start();
    let session = three_refunds(&server).await;
    let exported = export(&server.database_url());
    let mut doc = document(&exported);
    let tier1 = role_index(&doc, "tier-1-support");
    let cap = session_cap(&doc, tier1);
    doc.roles[tier1].limits[cap].max = Some(parse_max("300"));
    let file = write(server.dir(), "lowered.yaml", &doc.to_yaml());
    let replays = || {
        server
            .audit_events()
            .into_iter()
            .filter(|e| e["kind"] == "what_if_replay")
            .count()
    };

    let dry = apply(
        &server.database_url(),
        &file,
        &["--dry-run", "--replay", "1h"],
    );
    assert_eq!(dry.status.code(), Some(3), "{dry:?}");
    let text = stdout(&dry);
    assert!(
        text.contains(
            "2 outcomes would change:\n  allowed → denied: 2 calls of process_refund by key "
        ),
        "{text}"
    );
    assert!(text.contains("role tier-1-support"), "{text}");
    assert!(text.contains("at most 300"), "{text}");
    assert!(text.contains(&session), "{text}");
    assert!(text.ends_with("dry run: nothing was written\n"), "{text}");
    assert_eq!(replays(), 1, "the replay is audited");
    assert_eq!(
        export(&server.database_url()),
        exported,
        "nothing else changed"
    );

    let json = apply(
        &server.database_url(),
        &file,
        &["--dry-run", "--replay", "1h", "--format", "json"],
    );
    assert_eq!(json.status.code(), Some(3));
    let json: Value = serde_json::from_str(&stdout(&json)).unwrap();
    let replay = &json["replay"];
    assert_eq!(replay["flips"], true, "{replay}");
    assert_eq!(replay["groups"][0]["before"], "allowed");
    assert_eq!(replay["groups"][0]["after"], "denied");
    assert_eq!(replay["groups"][0]["calls"].as_array().unwrap().len(), 2);
    assert_eq!(replay["changes"][0]["session_id"], session.as_str());

    // Raising the cap instead changes no outcome: exit 0.
    doc.roles[tier1].limits[cap].max = Some(parse_max("2000"));
    let raised = write(server.dir(), "raised.yaml", &doc.to_yaml());
    let fine = apply(
        &server.database_url(),
        &raised,
        &["--dry-run", "--replay", "1h"],
    );
    assert_eq!(fine.status.code(), Some(0), "{fine:?}");
    assert!(stdout(&fine).contains("no outcome would change"));

    // Bad input is refused and writes nothing.
    let before = replays();
    for flags in [
        &["--dry-run", "--replay", "7 days"][..],
        &["--dry-run", "--replay-session", "sess_nope"][..],
    ] {
        let refused = apply(&server.database_url(), &file, flags);
        assert_eq!(refused.status.code(), Some(1), "{refused:?}");
        assert!(!stderr(&refused).is_empty());
    }
    let invalid = write(server.dir(), "invalid.yaml", "roles: [{slug: 7}]\n");
    let refused = apply(
        &server.database_url(),
        &invalid,
        &["--dry-run", "--replay", "1h"],
    );
    assert_eq!(
        refused.status.code(),
        Some(1),
        "an invalid file: {refused:?}"
    );
    let without_dry_run = apply(&server.database_url(), &file, &["--replay", "1h"]);
    assert_eq!(without_dry_run.status.code(), Some(2), "a usage error");
    assert_eq!(replays(), before);
    assert_eq!(export(&server.database_url()), exported);
}
