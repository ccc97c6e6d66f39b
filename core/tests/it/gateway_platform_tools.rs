//! The gateway's platform tools on the demo catalog, with no upstream connected: every
//! path tested here must be decided (and audited) without executing anything downstream.

use std::sync::Arc;

use futures::TryStreamExt;
use serde_json::{Value, json};
use skillgate_core::audit::{AuditLog, EventKind};
use skillgate_core::gateway::{AgentIdentity, Gateway, GatewayOptions, ToolReply};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::upstream::UpstreamPool;

struct Fixture {
    gateway: Gateway,
    audit: AuditLog,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&skillgate_core::store::testing::database_url(
        dir.path(),
        "g.db",
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    // A scope larger than init's shortlist, for the task-summary tests.
    let everything: Vec<Slug> = store
        .list_roles()
        .await
        .unwrap()
        .into_iter()
        .map(|role| role.value.slug)
        .collect();
    store
        .create_scope(&skillgate_core::model::Scope {
            slug: Slug::parse("everything").unwrap(),
            description: String::new(),
            roles: everything,
            guardrails: Vec::new(),
        })
        .await
        .unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    let gateway = Gateway::new(
        store,
        catalog,
        audit.clone(),
        Arc::new(UpstreamPool::default()),
        GatewayOptions::default(),
    );
    Fixture {
        gateway,
        audit,
        _dir: dir,
    }
}

fn agent(key_id: i64, scope: &str) -> AgentIdentity {
    AgentIdentity {
        key_id,
        key_name: format!("key-{key_id}"),
        scope: Slug::parse(scope).unwrap(),
        connection: Some("conn-1".to_owned()),
    }
}

fn gateway_reply(reply: ToolReply) -> (String, Value, bool) {
    match reply {
        ToolReply::Gateway {
            text,
            structured,
            is_error,
        } => (text, structured, is_error),
        ToolReply::Downstream { result, .. } => {
            panic!("nothing may run downstream here: {result:?}")
        }
    }
}

async fn start(f: &Fixture, who: &AgentIdentity) -> String {
    let (_, structured, _) =
        gateway_reply(f.gateway.init(who, Some("refund".into())).await.unwrap());
    structured["session_id"].as_str().unwrap().to_owned()
}

async fn kinds(f: &Fixture) -> Vec<EventKind> {
    f.audit
        .events(None)
        .map_ok(|e| e.kind)
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn init_lists_only_the_roles_of_the_agents_scope_without_instructions_or_tools() {
    let f = fixture().await;
    let (text, structured, is_error) =
        gateway_reply(f.gateway.init(&agent(1, "support"), None).await.unwrap());
    assert!(!is_error);
    let names: Vec<&str> = structured["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["tier-1-support", "retention-desk", "security-fraud"]
    );
    assert!(!text.contains("billing-admin") && !text.contains("system-admin"));
    // The scope's guardrails bind every role, so init shows them; they name the tool they
    // bound, but the roles themselves list no tools before one is learned.
    let (roles, guardrails) = text
        .split_once("## Guardrails of scope support")
        .unwrap_or_else(|| panic!("init shows the scope's guardrails: {text}"));
    assert!(
        !roles.contains("process_refund"),
        "no tools before learning: {text}"
    );
    assert!(
        guardrails.contains("calls in a session must add up to at most 1000"),
        "{text}"
    );
    assert_eq!(
        structured["roles"][0]["learn_path"],
        "/roles/tier-1-support"
    );
}

#[tokio::test]
async fn a_task_summary_in_a_large_scope_describes_the_roles_it_matches_and_names_the_rest() {
    let f = fixture().await;
    let me = agent(1, "everything");
    let (text, structured, is_error) = gateway_reply(
        f.gateway
            .init(&me, Some("Refund a customer's order".into()))
            .await
            .unwrap(),
    );
    assert!(!is_error, "{text}");
    let described: Vec<&str> = structured["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(described.first(), Some(&"tier-1-support"), "{text}");
    assert!(described.len() <= 3, "{described:?}");
    let others: Vec<&str> = structured["other_roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    // Every role of the scope is either described or named, none twice.
    assert_eq!(described.len() + others.len(), 6, "{text}");
    assert!(others.contains(&"system-admin") && !described.contains(&"system-admin"));
    assert!(
        text.contains("Other roles (learn /roles describes every role): "),
        "{text}"
    );
    // A named role is as learnable as a described one.
    let sid = structured["session_id"].as_str().unwrap().to_owned();
    let (text, _, is_error) = gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), &format!("/roles/{}", others[0]))
            .await
            .unwrap(),
    );
    assert!(!is_error, "{text}");
    // And `learn /roles` describes them all.
    let (text, structured, is_error) =
        gateway_reply(f.gateway.learn(&me, Some(sid), "/roles").await.unwrap());
    assert!(!is_error, "{text}");
    assert_eq!(structured["roles"].as_array().unwrap().len(), 6);
    assert!(text.contains("- system-admin: "), "{text}");
}

#[tokio::test]
async fn without_a_task_summary_every_role_of_a_large_scope_is_described() {
    let f = fixture().await;
    let (text, structured, _) =
        gateway_reply(f.gateway.init(&agent(1, "everything"), None).await.unwrap());
    assert_eq!(structured["roles"].as_array().unwrap().len(), 6, "{text}");
    assert!(structured.get("other_roles").is_none());
    assert!(text.contains("Roles (6):"), "{text}");
}

#[tokio::test]
async fn learning_a_role_outside_the_scope_is_denied_and_unlocks_nothing() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    for role in ["system-admin", "billing-admin", "no-such-role"] {
        let (text, structured, is_error) = gateway_reply(
            f.gateway
                .learn(&me, Some(sid.clone()), &format!("/roles/{role}"))
                .await
                .unwrap(),
        );
        assert!(is_error);
        assert!(text.starts_with("ACCESS DENIED"), "{text}");
        assert_eq!(structured["code"], "ACCESS_DENIED");
    }
    let (text, structured, _) = gateway_reply(
        f.gateway
            .call(
                &me,
                Some(sid),
                "delete_user_account",
                json!({"user_id": "U-2001", "confirm": true}),
            )
            .await
            .unwrap(),
    );
    assert!(text.starts_with("ACCESS DENIED"), "{text}");
    assert_eq!(structured["available_tools"], json!([]));
    let kinds = kinds(&f).await;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == EventKind::LearnDenied)
            .count(),
        3
    );
    assert_eq!(kinds.last(), Some(&EventKind::CallDenied));
    assert!(!kinds.contains(&EventKind::CallAllowed));
}

#[tokio::test]
async fn learning_a_role_returns_its_instructions_limits_and_tools_and_unlocks_them() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    let (text, structured, is_error) = gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), "/roles/tier-1-support")
            .await
            .unwrap(),
    );
    assert!(!is_error, "{text}");
    assert!(text.contains("process_refund"));
    assert!(
        text.contains("- Each call to `process_refund` must have `amount` at most 500."),
        "{text}"
    );
    // Arguments are shown compactly, with their constraints, one line each.
    assert!(
        text.contains(
            "  - customer_id: string, matching ^C-[0-9]{4}$. The customer id, e.g. C-1001"
        ),
        "{text}"
    );
    assert!(
        structured["available_tools"]
            .as_array()
            .unwrap()
            .contains(&json!("check_refund_eligibility"))
    );
    // The skill and its resource are now readable.
    let (text, _, is_error) = gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), "/refund-handling/refund-policy")
            .await
            .unwrap(),
    );
    assert!(!is_error, "{text}");
    assert!(text.to_lowercase().contains("refund"));
}

#[tokio::test]
async fn a_refund_above_the_per_call_bound_is_a_governance_violation_before_any_upstream() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), "/roles/tier-1-support")
            .await
            .unwrap(),
    );
    let (text, structured, is_error) = gateway_reply(
        f.gateway
            .call(
                &me,
                None, // the connection's newest session is used
                "process_refund",
                json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": 1200, "reason": "late"}),
            )
            .await
            .unwrap(),
    );
    assert!(is_error);
    assert!(text.starts_with("GOVERNANCE VIOLATION"), "{text}");
    assert_eq!(structured["code"], "GOVERNANCE_VIOLATION");
}

#[tokio::test]
async fn another_keys_session_and_near_miss_tool_names_are_access_denied() {
    let f = fixture().await;
    let owner = agent(1, "support");
    let sid = start(&f, &owner).await;
    gateway_reply(
        f.gateway
            .learn(&owner, Some(sid.clone()), "/roles/tier-1-support")
            .await
            .unwrap(),
    );
    let intruder = agent(2, "support");
    let (text, _, _) = gateway_reply(
        f.gateway
            .call(
                &intruder,
                Some(sid.clone()),
                "lookup_customer",
                json!({"customer_id": "C-1001"}),
            )
            .await
            .unwrap(),
    );
    assert!(text.starts_with("ACCESS DENIED"), "{text}");
    let (text, _, _) = gateway_reply(
        f.gateway
            .learn(&intruder, Some(sid.clone()), "/refund-handling")
            .await
            .unwrap(),
    );
    assert!(text.starts_with("ACCESS DENIED"), "{text}");
    for name in ["Process_Refund", "process_refund ", "process-refund"] {
        let (text, structured, _) = gateway_reply(
            f.gateway
                .call(&owner, Some(sid.clone()), name, json!({"amount": 1}))
                .await
                .unwrap(),
        );
        assert!(text.starts_with("ACCESS DENIED"), "{name}: {text}");
        assert!(
            structured["available_tools"]
                .as_array()
                .unwrap()
                .contains(&json!("process_refund"))
        );
    }
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_invalid_arguments() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), "/roles/tier-1-support")
            .await
            .unwrap(),
    );
    let (text, structured, is_error) = gateway_reply(
        f.gateway
            .call(&me, Some(sid), "lookup_customer", json!(["C-1001"]))
            .await
            .unwrap(),
    );
    assert!(is_error);
    assert_eq!(structured["code"], "INVALID_ARGUMENTS", "{text}");
}

#[tokio::test]
async fn traversal_and_encoded_learn_paths_are_refused_and_audited() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    for path in [
        "/roles/../system-admin",
        "/roles/%2e%2e/system-admin",
        "//roles/tier-1-support",
    ] {
        let (text, structured, is_error) =
            gateway_reply(f.gateway.learn(&me, Some(sid.clone()), path).await.unwrap());
        assert!(is_error);
        assert_eq!(structured["code"], "INVALID_ARGUMENTS", "{path}: {text}");
    }
    let kinds = kinds(&f).await;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == EventKind::LearnDenied)
            .count(),
        3
    );
}

#[tokio::test]
async fn feedback_on_a_learned_skill_returns_its_id_and_bad_ratings_are_refused() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    let (text, _, is_error) = gateway_reply(
        f.gateway
            .feedback(&me, Some(sid.clone()), "refund-handling", 4, None)
            .await
            .unwrap(),
    );
    assert!(is_error, "not learned yet: {text}");
    gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), "/roles/tier-1-support")
            .await
            .unwrap(),
    );
    let (text, structured, is_error) = gateway_reply(
        f.gateway
            .feedback(
                &me,
                Some(sid.clone()),
                "refund-handling",
                4,
                Some("clear policy".into()),
            )
            .await
            .unwrap(),
    );
    assert!(!is_error, "{text}");
    let id = structured["feedback_id"].as_str().unwrap();
    assert!(id.starts_with("fb_") && text.contains(id));
    let (_, structured, is_error) = gateway_reply(
        f.gateway
            .feedback(&me, Some(sid), "refund-handling", 6, None)
            .await
            .unwrap(),
    );
    assert!(is_error);
    assert_eq!(structured["code"], "INVALID_ARGUMENTS");
}

#[tokio::test]
async fn an_allowed_call_whose_upstream_is_missing_is_audited_allowed_then_errored() {
    let f = fixture().await;
    let me = agent(1, "support");
    let sid = start(&f, &me).await;
    gateway_reply(
        f.gateway
            .learn(&me, Some(sid.clone()), "/roles/tier-1-support")
            .await
            .unwrap(),
    );
    let (text, structured, is_error) = gateway_reply(
        f.gateway
            .call(
                &me,
                Some(sid),
                "lookup_customer",
                json!({"customer_id": "C-1001"}),
            )
            .await
            .unwrap(),
    );
    assert!(is_error);
    assert!(text.starts_with("UPSTREAM ERROR"), "{text}");
    assert_eq!(structured["code"], "UPSTREAM_ERROR");
    let kinds = kinds(&f).await;
    assert_eq!(
        &kinds[kinds.len() - 2..],
        [EventKind::CallAllowed, EventKind::CallResult]
    );
    assert!(f.audit.verify().await.unwrap().is_intact());
}
