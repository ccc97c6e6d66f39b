use serde_json::json;

use super::*;
use crate::demo::catalog::demo_catalog;
use crate::model::{ArgCheck, CatalogError, CmpOp, Limit, Scope, UpstreamKind};
use crate::policy::{CallRequest, Decision, Outcome, SessionView, decide, value_digest};
use crate::store::test_store;

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

async fn seeded() -> Store {
    let store = test_store().await;
    assert!(store.seed_demo("/usr/bin/skillgate").await.unwrap());
    store
}

#[tokio::test]
async fn seeding_an_empty_database_stores_the_demo_catalog_as_drafted() {
    let store = seeded().await;
    let mut loaded = store.load_catalog().await.unwrap();
    // Built-in tools follow the stored ones; compare as sets.
    loaded.tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    let upstream = Upstream {
        name: slug("demo"),
        kind: UpstreamKind::Stdio {
            command: "/usr/bin/skillgate".into(),
            args: vec!["demo-upstream".into()],
        },
    };
    let mut expected = demo_catalog().into_catalog(vec![upstream]);
    expected.tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    expected
        .skills
        .sort_by(|a, b| a.skill.slug.cmp(&b.skill.slug));
    expected.roles.sort_by(|a, b| a.slug.cmp(&b.slug));
    expected.scopes.sort_by(|a, b| a.slug.cmp(&b.slug));
    assert_eq!(loaded, expected);
}

#[tokio::test]
async fn seeding_again_changes_nothing() {
    let store = seeded().await;
    let before = store.load_catalog().await.unwrap();
    assert!(!store.seed_demo("/elsewhere/skillgate").await.unwrap());
    assert_eq!(store.load_catalog().await.unwrap(), before);
}

#[tokio::test]
async fn the_seeded_catalog_compiles_and_enforces_tier_1_refund_limits() {
    let catalog = seeded().await.compiled_catalog().await.unwrap();
    assert!(catalog.broken_tools().is_empty());
    let now = chrono::Utc::now();
    let mut session = SessionView::new("s", "k", slug("support"), now + chrono::Duration::hours(1));
    session.learn(slug("tier-1-support"), vec![]);
    let mut eligible = Outcome::default();
    eligible
        .args
        .insert("order_id".into(), value_digest(&json!("O-5001")));
    eligible
        .results
        .insert("/eligible".into(), value_digest(&json!(true)));
    session.record_success("check_refund_eligibility", Some(eligible));
    let args =
        json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": 600, "reason": "late"});
    let request = CallRequest {
        session_id: "s",
        key_id: "k",
        tool: "process_refund",
        arguments: args.as_object().unwrap().clone(),
        approved: None,
    };
    let decision = decide(&catalog, Some(&session), request, now);
    assert!(
        matches!(&decision, Decision::Deny(denial) if denial.rule.contains("at most 500")),
        "{decision:?}"
    );
}

#[tokio::test]
async fn a_role_update_from_a_stale_revision_is_a_conflict_and_changes_nothing() {
    let store = seeded().await;
    let stored = store
        .get_role(&slug("billing-admin"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.revision, 1);
    let mut edited = stored.value.clone();
    edited.description = "Billing, carefully.".into();
    assert_eq!(store.update_role(&edited, 1).await.unwrap(), 2);
    let mut late = stored.value.clone();
    late.title = "Someone else's edit".into();
    let err = store.update_role(&late, 1).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("billing-admin"), "{err}");
    let now = store
        .get_role(&slug("billing-admin"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (now.value.description.as_str(), now.revision),
        ("Billing, carefully.", 2)
    );
}

#[tokio::test]
async fn a_role_with_an_invalid_limit_is_refused_naming_the_problem() {
    let store = seeded().await;
    let mut role = store
        .get_role(&slug("tier-1-support"))
        .await
        .unwrap()
        .unwrap()
        .value;
    role.limits.push(Limit::ArgBound {
        tool: "process_refund".into(),
        arg: "reason".into(),
        check: ArgCheck::Compare {
            op: CmpOp::Le,
            value: 5.into(),
        },
    });
    let err = store.update_role(&role, 1).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("`process_refund.reason` is not a number"),
        "{err}"
    );
    let unchanged = store
        .get_role(&slug("tier-1-support"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((unchanged.value.limits.len(), unchanged.revision), (4, 1));
}

#[tokio::test]
async fn creating_a_role_twice_or_updating_a_missing_one_fails_clearly() {
    let store = seeded().await;
    let role = store
        .get_role(&slug("system-admin"))
        .await
        .unwrap()
        .unwrap()
        .value;
    assert!(matches!(
        store.create_role(&role).await,
        Err(StoreError::Conflict(_))
    ));
    let mut ghost = role.clone();
    ghost.slug = slug("ghost");
    assert!(matches!(
        store.update_role(&ghost, 1).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.create_role(&ghost).await.unwrap(), 1);
}

#[tokio::test]
async fn each_skill_save_is_a_new_current_version_and_an_old_one_can_be_restored() {
    let store = seeded().await;
    let slug = slug("customer-lookup");
    let mut skill = store
        .load_catalog()
        .await
        .unwrap()
        .skill("customer-lookup")
        .unwrap()
        .skill
        .clone();
    skill
        .instructions
        .push_str("\n\nAlways greet the customer by name.");
    let saved = store.update_skill(&skill, 1).await.unwrap();
    assert_eq!((saved.value.version, saved.revision), (2, 2));
    assert!(matches!(
        store.update_skill(&skill, 1).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store
            .skill_versions(&slug)
            .await
            .unwrap()
            .iter()
            .map(|v| v.version)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(
        store.set_current_skill_version(&slug, 1, 2).await.unwrap(),
        3
    );
    let current = store
        .load_catalog()
        .await
        .unwrap()
        .skill("customer-lookup")
        .unwrap()
        .clone();
    assert_eq!(current.version, 1);
    assert!(!current.skill.instructions.contains("greet"));
    let next = store.update_skill(&skill, 3).await.unwrap();
    assert_eq!(
        next.value.version, 3,
        "new versions number after the latest, not the current"
    );
    assert!(matches!(
        store.set_current_skill_version(&slug, 9, 4).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_skill_save_that_strands_a_role_limit_is_refused() {
    let store = seeded().await;
    let mut skill = store
        .load_catalog()
        .await
        .unwrap()
        .skill("refund-handling")
        .unwrap()
        .skill
        .clone();
    skill.tools.retain(|t| t != "process_refund");
    let err = store.update_skill(&skill, 1).await.unwrap_err();
    assert!(
        err.to_string().contains("does not grant `process_refund`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_scope_with_an_unknown_role_is_refused_and_a_good_one_saved() {
    let store = seeded().await;
    let mut scope = Scope {
        slug: slug("night-shift"),
        description: "Nights.".into(),
        roles: vec![slug("ghost")],
        guardrails: Vec::new(),
    };
    assert!(matches!(
        store.create_scope(&scope).await,
        Err(StoreError::Invalid(CatalogError::UnknownRole(_)))
    ));
    scope.roles = vec![slug("tier-1-support")];
    assert_eq!(store.create_scope(&scope).await.unwrap(), 1);
    scope.roles.push(slug("billing-admin"));
    assert_eq!(store.update_scope(&scope, 1).await.unwrap(), 2);
    assert!(matches!(
        store.update_scope(&scope, 1).await,
        Err(StoreError::Conflict(_))
    ));
    let stored = store
        .list_scopes()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.value.slug == scope.slug)
        .unwrap();
    assert_eq!(stored.value, scope);
}

#[tokio::test]
async fn refreshing_an_upstream_tool_list_replaces_it_but_keeps_sensitive_markings() {
    let store = seeded().await;
    let mut specs: Vec<ToolSpec> = crate::demo::tools::tool_specs()
        .into_iter()
        .filter(|t| t.name != "delete_user_account")
        .collect();
    for spec in &mut specs {
        spec.sensitive_args.clear();
        if spec.name == "lookup_customer" {
            spec.description = "Find a customer.".into();
        }
    }
    store.seed_tools(&slug("demo"), &specs).await.unwrap();
    let tools = store.list_tools().await.unwrap();
    assert_eq!(tools.len(), 14);
    assert!(tools.iter().all(|t| t.spec.name != "delete_user_account"));
    let lookup = tools
        .iter()
        .find(|t| t.spec.name == "lookup_customer")
        .unwrap();
    assert_eq!(lookup.spec.description, "Find a customer.");
    let payment = tools
        .iter()
        .find(|t| t.spec.name == "update_payment_method")
        .unwrap();
    assert_eq!(payment.spec.sensitive_args, ["token"]);
}

#[tokio::test]
async fn a_tool_name_another_upstream_provides_is_a_conflict() {
    let store = seeded().await;
    let other = Upstream {
        name: slug("other"),
        kind: UpstreamKind::Http {
            url: "http://other.invalid/mcp".into(),
            ca_bundle: None,
            allow_plaintext: false,
        },
    };
    store.upsert_upstream(&other).await.unwrap();
    let clash = ToolSpec {
        name: "process_refund".into(),
        description: "x".into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: None,
        sensitive_args: vec![],
    };
    let err = store.seed_tools(&other.name, &[clash]).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert_eq!(store.list_upstreams().await.unwrap().len(), 2);
    assert!(matches!(
        store.seed_tools(&slug("nowhere"), &[]).await,
        Err(StoreError::Invalid(CatalogError::UnknownUpstream(_)))
    ));
}

#[tokio::test]
async fn sensitive_arguments_can_be_marked_on_a_stored_tool() {
    let store = seeded().await;
    store
        .set_sensitive_args("lookup_customer", &["email".to_owned()])
        .await
        .unwrap();
    let tools = store.list_tools().await.unwrap();
    assert_eq!(
        tools
            .iter()
            .find(|t| t.spec.name == "lookup_customer")
            .unwrap()
            .spec
            .sensitive_args,
        ["email"]
    );
    assert!(matches!(
        store.set_sensitive_args("nope", &[]).await,
        Err(StoreError::NotFound(_))
    ));
}
