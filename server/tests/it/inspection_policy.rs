//! The inspection policy as catalog data, through the real binary on its own database: set
//! through the one door and audited once, refused whole when a rule is wrong, in force in
//! the live catalog and after a reload, round-tripped by `catalog export | apply`, and
//! closed to a console viewer.

use crate::common;

use std::process::Output;
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::Value;
use skillgate_core::admin::{AdminError, AdminService};
use skillgate_core::audit::AuditLog;
use skillgate_core::model::{
    GuardrailHook, HookFailure, HookStage, InspectAction, InspectionPolicy, InspectionRule,
    Inspector, SecretSource,
};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

use common::Server;
use common::console::{VIEWER_PASSWORD, add_user, fetch_post, page, sign_in, sign_in_admin};

/// The authoring service on the server's own database, as another process would open it.
async fn service(server: &Server) -> (AdminService, Store) {
    let store = Store::open(&server.database_url()).await.unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    (AdminService::new(store.clone(), audit, catalog), store)
}

fn rule(inspector: Inspector, action: InspectAction) -> InspectionRule {
    InspectionRule {
        inspector,
        action,
        tool: None,
        role: None,
        scope: None,
        max_bytes: None,
    }
}

/// Injection blocked for one tool, results over 64 KiB blocked in the support scope,
/// formats left unchecked, tools with findings kept out, an external hook on one tool's
/// results, and a tool marked as a secret source.
fn a_policy() -> InspectionPolicy {
    let mut injection = rule(Inspector::Injection, InspectAction::Block);
    injection.tool = Some("lookup_customer".to_owned());
    let mut size = rule(Inspector::ResultSize, InspectAction::Block);
    size.scope = Some(Slug::parse("support").unwrap());
    size.max_bytes = Some(65_536);
    let mut policy = InspectionPolicy {
        rules: vec![injection, size],
        ..InspectionPolicy::default()
    };
    policy.schemas.validate_formats = false;
    policy.definitions.refuse_admission_with_findings = true;
    policy.hooks = vec![GuardrailHook {
        name: Slug::parse("moderation").unwrap(),
        url: "https://guard.example/check".to_owned(),
        stages: vec![HookStage::Result],
        tool: Some("lookup_customer".to_owned()),
        role: None,
        scope: None,
        timeout_ms: 1500,
        on_error: HookFailure::Allow,
        secret_env: "GUARD_SECRET".to_owned(),
    }];
    policy.egress.resolve_names = true;
    policy.secret_sources = vec![SecretSource {
        tool: "lookup_customer".to_owned(),
        fields: vec!["/portal_password".to_owned(), "/keys/*/secret".to_owned()],
    }];
    policy
}

fn policy_changes(server: &Server) -> Vec<Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "admin_change" && e["payload"]["target"] == "inspection:policy")
        .collect()
}

fn succeeded(output: Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn an_admin_sets_the_policy_once_audited_and_it_is_live_and_survives_a_reload() {
    let server = Server::start();
    let (admin, store) = service(&server).await;
    let generation = store.catalog_generation().await.unwrap();
    admin
        .set_inspection_policy("alice", a_policy())
        .await
        .unwrap();
    // The same policy again is no change: no second event.
    admin
        .set_inspection_policy("alice", a_policy())
        .await
        .unwrap();

    let events = policy_changes(&server);
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event["actor"], "alice");
    assert_eq!(event["payload"]["action"], "inspection.update");
    assert_eq!(
        event["payload"]["before"]["value"]["schemas"]["validate_formats"],
        true
    );
    assert_eq!(
        event["payload"]["after"]["value"]["rules"][0]["tool"],
        "lookup_customer"
    );

    assert_eq!(
        admin.live().catalog().inspection,
        a_policy(),
        "live at once"
    );
    assert!(
        store.catalog_generation().await.unwrap() > generation,
        "other replicas see the catalog moved"
    );
    let (reopened, _) = service(&server).await;
    assert_eq!(reopened.live().catalog().inspection, a_policy());
    assert_eq!(reopened.inspection_policy().await.unwrap(), a_policy());
}

#[tokio::test]
async fn a_rule_naming_what_the_catalog_lacks_or_a_misplaced_cap_is_refused_by_field_and_changes_nothing()
 {
    let server = Server::start();
    let (admin, _) = service(&server).await;
    let refused = |policy: InspectionPolicy| {
        let admin = &admin;
        async move {
            admin
                .set_inspection_policy("alice", policy)
                .await
                .unwrap_err()
        }
    };

    let mut unknown_tool = a_policy();
    unknown_tool.rules[0].tool = Some("no_such_tool".to_owned());
    let error = refused(unknown_tool).await;
    assert!(matches!(error, AdminError::BadInput { .. }), "{error:?}");
    assert_eq!(error.field(), Some("tool"));
    assert!(error.to_string().starts_with("rules[0].tool: "), "{error}");

    let mut unknown_role = a_policy();
    unknown_role.rules[1].role = Some(Slug::parse("nobody").unwrap());
    let error = refused(unknown_role).await;
    assert!(error.to_string().starts_with("rules[1].role: "), "{error}");

    let mut capped_secrets = a_policy();
    capped_secrets.rules[0].max_bytes = Some(10);
    let error = refused(capped_secrets).await;
    assert_eq!(error.field(), Some("max_bytes"));
    assert!(error.to_string().contains("result_size"), "{error}");

    let mut zero_cap = a_policy();
    zero_cap.rules[1].max_bytes = Some(0);
    assert_eq!(refused(zero_cap).await.field(), Some("max_bytes"));

    let mut twice = a_policy();
    twice.rules.push(twice.rules[0].clone());
    let error = refused(twice).await;
    assert!(
        error.to_string().starts_with("rules[2].inspector: "),
        "{error}"
    );

    assert!(policy_changes(&server).is_empty(), "nothing was saved");
    assert_eq!(
        admin.inspection_policy().await.unwrap(),
        InspectionPolicy::default()
    );
}

#[tokio::test]
async fn the_policy_round_trips_through_catalog_export_and_apply() {
    let server = Server::start();
    let url = server.database_url();
    let default_export = succeeded(server.cli(&["catalog", "export"]));
    assert!(
        !default_export.contains("inspection:"),
        "the default policy is left out: {default_export}"
    );
    let (admin, _) = service(&server).await;
    admin
        .set_inspection_policy("alice", a_policy())
        .await
        .unwrap();
    let exported = succeeded(server.cli(&["catalog", "export"]));
    assert!(exported.contains("inspection:\n"), "{exported}");
    assert!(exported.contains("max_bytes: 65536"), "{exported}");
    assert!(exported.contains("secret_env: GUARD_SECRET"), "{exported}");
    assert!(exported.contains("secret_sources:"), "{exported}");
    assert!(exported.contains("resolve_names: true"), "{exported}");
    assert!(exported.contains("/keys/*/secret"), "{exported}");

    // Applied to a database whose policy is the default, it is a change the plan names.
    admin
        .set_inspection_policy("alice", InspectionPolicy::default())
        .await
        .unwrap();
    let file = server.dir().join("catalog.yaml");
    std::fs::write(&file, &exported).unwrap();
    let plan = succeeded(server.cli(&["catalog", "apply", file.to_str().unwrap(), "--dry-run"]));
    assert!(plan.contains("~ inspection policy"), "{plan}");
    succeeded(server.cli(&["catalog", "apply", file.to_str().unwrap()]));
    assert_eq!(
        succeeded(server.cli(&["catalog", "export"])),
        exported,
        "export → apply → export is byte-identical"
    );
    let stored = Store::open(&url).await.unwrap();
    assert_eq!(stored.load_catalog().await.unwrap().inspection, a_policy());

    // A rule naming an unknown role is refused with its path in the file.
    let (head, section) = exported.split_once("inspection:\n").unwrap();
    let broken = format!(
        "{head}inspection:\n{}",
        section.replace("scope: support", "role: nobody")
    );
    std::fs::write(&file, &broken).unwrap();
    let output = server.cli(&["catalog", "apply", file.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("inspection.rules[1].role"), "{stderr}");
}

#[tokio::test]
async fn a_viewer_reads_the_inspectors_page_but_cannot_change_the_policy_and_is_on_the_record() {
    let server = Server::start();
    add_user(&server, "vic", "viewer", VIEWER_PASSWORD);
    let vic = sign_in(&server, "vic", VIEWER_PASSWORD).await;
    let (status, html) = page(&server, &vic.cookie, "/inspectors").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("secret_flow"), "{html}");

    let (status, body) = fetch_post(
        &server,
        &vic,
        "/console/api/add_inspection_rule",
        &[("inspector", "injection"), ("action", "off")],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let refusal = server
        .audit_events()
        .into_iter()
        .rev()
        .find(|e| e["kind"] == "admin_refused")
        .expect("the refusal is audited");
    assert_eq!(refusal["actor"], "vic");
    assert_eq!(refusal["payload"]["code"], "FORBIDDEN");
    assert!(policy_changes(&server).is_empty());

    // An admin's same request is one change, shown on the page.
    let admin = sign_in_admin(&server).await;
    let (status, body) = fetch_post(
        &server,
        &admin,
        "/console/api/add_inspection_rule",
        &[
            ("inspector", "injection"),
            ("action", "block"),
            ("tool", "lookup_customer"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(policy_changes(&server).len(), 1);
    let (_, html) = page(&server, &admin.cookie, "/inspectors").await;
    assert!(html.contains("lookup_customer"), "{html}");
}

#[tokio::test]
async fn an_admin_marks_a_secret_source_on_the_inspectors_page_and_a_bad_pointer_changes_nothing() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let mark = |fields: &'static str| {
        let (server, admin) = (&server, &admin);
        async move {
            fetch_post(
                server,
                admin,
                "/console/api/mark_secret_source",
                &[("tool", "lookup_customer"), ("fields", fields)],
            )
            .await
        }
    };
    let (status, body) = mark("/portal_password, portal_pin").await;
    assert_ne!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("`portal_pin` is not a JSON Pointer"),
        "{body}"
    );
    assert!(
        policy_changes(&server).is_empty(),
        "a refused mark changes nothing"
    );

    let (status, body) = mark("/portal_password\n/keys/*/secret").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = mark("/portal_password /keys/*/secret").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        policy_changes(&server).len(),
        1,
        "marking the same fields again writes nothing"
    );
    let (_, store) = service(&server).await;
    let stored = store.load_catalog().await.unwrap().inspection;
    assert_eq!(
        stored.secret_sources,
        [SecretSource {
            tool: "lookup_customer".to_owned(),
            fields: vec!["/portal_password".to_owned(), "/keys/*/secret".to_owned()],
        }]
    );
    let (_, html) = page(&server, &admin.cookie, "/inspectors").await;
    assert!(html.contains("Secret sources"), "{html}");
    assert!(html.contains("/portal_password, /keys/*/secret"), "{html}");

    let (status, body) = fetch_post(
        &server,
        &admin,
        "/console/api/unmark_secret_source",
        &[("tool", "lookup_customer")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(policy_changes(&server).len(), 2);
    let (_, html) = page(&server, &admin.cookie, "/inspectors").await;
    assert!(
        html.contains("No tool is marked as a secret source."),
        "{html}"
    );
}
