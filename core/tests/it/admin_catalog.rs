//! Catalog authoring on a real SQLite file: saves are validated, refused when stale,
//! audited with before/after, and in force for the next decision without a restart.

use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::json;
use skillgate_core::admin::{AdminError, AdminService};
use skillgate_core::audit::{AuditLog, EventKind};
use skillgate_core::model::{ArgCheck, CmpOp, Limit, Role, Scope};
use skillgate_core::policy::{CallRequest, CatalogHandle, Decision, SessionView, decide};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

struct Fixture {
    service: AdminService,
    handle: Arc<CatalogHandle>,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&skillgate_core::store::testing::database_url(
        dir.path(),
        "c.db",
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let handle = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let service = AdminService::new(store.clone(), AuditLog::new(store), handle.clone());
    Fixture {
        service,
        handle,
        _dir: dir,
    }
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

fn refunds_up_to(max: i64) -> Role {
    Role {
        slug: slug("refund-clerk"),
        title: "Refund clerk".into(),
        description: "Looks customers up and refunds small orders.".into(),
        instructions: "Refund only what the policy allows.".into(),
        skills: vec![slug("customer-lookup"), slug("refund-handling")],
        limits: vec![Limit::ArgBound {
            tool: "process_refund".into(),
            arg: "amount".into(),
            check: ArgCheck::Compare {
                op: CmpOp::Le,
                value: max.into(),
            },
        }],
    }
}

/// Decides a `process_refund` of `amount` for a session that learned `refund-clerk`, against
/// whatever snapshot the handle holds right now.
fn refund_decision(handle: &CatalogHandle, session: &SessionView, amount: i64) -> Decision {
    let serde_json::Value::Object(arguments) =
        json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": amount, "reason": "late"})
    else {
        unreachable!("an object literal")
    };
    let request = CallRequest {
        session_id: &session.id,
        key_id: &session.owner_key_id,
        tool: "process_refund",
        arguments,
        approved: None,
    };
    decide(&handle.load(), Some(session), request, Utc::now())
}

fn learned_clerk(handle: &CatalogHandle) -> SessionView {
    let mut session = SessionView::new("s1", "k1", slug("desk"), Utc::now() + Duration::hours(1));
    let skills = handle.load().skill_versions_of("refund-clerk");
    session.learn(slug("refund-clerk"), skills);
    session
}

#[tokio::test]
async fn a_saved_limit_is_in_force_for_the_next_decision_without_a_restart() {
    let f = fixture().await;
    f.service
        .create_role("alice", &refunds_up_to(500))
        .await
        .unwrap();
    let desk = Scope {
        slug: slug("desk"),
        description: "The refund desk.".into(),
        roles: vec![slug("refund-clerk")],
        guardrails: Vec::new(),
    };
    f.service.create_scope("alice", &desk).await.unwrap();
    let session = learned_clerk(&f.handle);
    assert!(matches!(
        refund_decision(&f.handle, &session, 600),
        Decision::Deny(_)
    ));
    assert!(matches!(
        refund_decision(&f.handle, &session, 400),
        Decision::Allow(_)
    ));

    f.service
        .update_role("bob", &refunds_up_to(300), 1)
        .await
        .unwrap();
    let decision = refund_decision(&f.handle, &session, 400);
    assert!(
        matches!(&decision, Decision::Deny(denial) if denial.rule.contains("at most 300")),
        "the session that learned the 500 limit is held to the new 300: {decision:?}"
    );
}

#[tokio::test]
async fn a_second_save_from_a_stale_revision_is_refused_and_only_the_first_is_audited() {
    let f = fixture().await;
    let role = f
        .service
        .role(&slug("billing-admin"))
        .await
        .unwrap()
        .unwrap();
    let mut first = role.value.clone();
    first.description = "First admin's words.".into();
    let mut second = role.value.clone();
    second.title = "Second admin's title".into();
    assert_eq!(
        f.service
            .update_role("alice", &first, role.revision)
            .await
            .unwrap(),
        2
    );
    let err = f
        .service
        .update_role("bob", &second, role.revision)
        .await
        .unwrap_err();
    assert!(matches!(err, AdminError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("changed by someone else"), "{err}");

    let history = f.service.history("role:billing-admin").await.unwrap();
    assert_eq!(history.len(), 1);
    let event = &history[0];
    assert_eq!(
        (event.kind, event.actor.as_deref()),
        (EventKind::AdminChange, Some("alice"))
    );
    assert_eq!(event.payload["action"], "role.update");
    assert_eq!(event.payload["before"]["revision"], 1);
    assert_eq!(event.payload["after"]["revision"], 2);
    assert_eq!(
        event.payload["after"]["value"]["description"],
        "First admin's words."
    );
    assert_eq!(
        f.handle.load().role("billing-admin").unwrap().description,
        "First admin's words."
    );
}

#[tokio::test]
async fn an_invalid_limit_is_refused_with_its_reason_and_changes_nothing() {
    let f = fixture().await;
    let mut role = refunds_up_to(500);
    role.limits.push(Limit::SumCap {
        tool: "process_refund".into(),
        arg: "reason".into(),
        max: 100.into(),
    });
    let err = f.service.create_role("alice", &role).await.unwrap_err();
    assert!(err.is_user_error());
    assert!(err.to_string().contains("is not a number"), "{err}");
    assert!(f.handle.load().role("refund-clerk").is_none());
    assert!(
        f.service
            .history("role:refund-clerk")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_skill_save_is_a_new_version_and_a_restore_is_audited_and_live() {
    let f = fixture().await;
    let current = f
        .service
        .skills()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.value.skill.slug.as_str() == "customer-lookup")
        .unwrap();
    let mut skill = current.value.skill.clone();
    skill
        .instructions
        .push_str("\n\nGreet the customer by name.");
    let saved = f
        .service
        .update_skill("alice", &skill, current.revision)
        .await
        .unwrap();
    assert_eq!(saved.value.version, 2);
    assert_eq!(
        f.handle
            .load()
            .catalog()
            .skill("customer-lookup")
            .unwrap()
            .version,
        2
    );
    f.service
        .restore_skill_version("bob", &skill.slug, 1, saved.revision)
        .await
        .unwrap();
    assert_eq!(
        f.handle
            .load()
            .catalog()
            .skill("customer-lookup")
            .unwrap()
            .version,
        1
    );
    let actions: Vec<String> = f
        .service
        .history("skill:customer-lookup")
        .await
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e.actor.as_deref().unwrap(), e.payload["action"]))
        .collect();
    assert_eq!(actions, ["bob \"skill.restore\"", "alice \"skill.update\""]);
}

#[tokio::test]
async fn a_key_for_an_unknown_scope_is_refused_and_a_created_key_is_audited_without_the_key() {
    let f = fixture().await;
    let err = f
        .service
        .create_key("alice", "bot", &slug("nowhere"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown scope"), "{err}");
    let (info, key) = f
        .service
        .create_key("alice", "bot", &slug("support"), None)
        .await
        .unwrap();
    f.service.revoke_key("alice", "bot").await.unwrap();
    let history = f.service.history("agent_key:bot").await.unwrap();
    assert_eq!(history.len(), 2);
    let text =
        serde_json::to_string(&history.iter().map(|e| &e.payload).collect::<Vec<_>>()).unwrap();
    assert!(text.contains(&info.prefix));
    assert!(
        !text.contains(key.expose()),
        "the key itself is never audited"
    );
}

#[tokio::test]
async fn a_stashed_key_reveal_is_read_once_and_only_by_the_user_who_stashed_it() {
    let f = fixture().await;
    let token = f.service.stash_key_reveal(7, "the payload").await.unwrap();
    assert_eq!(f.service.take_key_reveal(8, &token).await.unwrap(), None);
    let token = f.service.stash_key_reveal(7, "the payload").await.unwrap();
    assert_eq!(
        f.service
            .take_key_reveal(7, &token)
            .await
            .unwrap()
            .as_deref(),
        Some("the payload")
    );
    assert_eq!(f.service.take_key_reveal(7, &token).await.unwrap(), None);
    assert_eq!(
        f.service.take_key_reveal(7, "not-a-token").await.unwrap(),
        None
    );
}

#[tokio::test]
async fn an_upstream_that_could_never_connect_or_shadows_the_builtin_one_is_refused() {
    use skillgate_core::model::{Upstream, UpstreamKind};
    let f = fixture().await;
    let before = f.service.store().list_upstreams().await.unwrap();
    for (name, kind, expected) in [
        (
            "secure",
            UpstreamKind::Http {
                url: "ftp://tools.example/mcp".into(),
                ca_bundle: None,
                allow_plaintext: false,
            },
            "not an http:// or https:// URL",
        ),
        (
            "curation",
            UpstreamKind::Stdio {
                command: "/bin/true".into(),
                args: vec![],
            },
            "built-in curation upstream",
        ),
    ] {
        let upstream = Upstream {
            name: slug(name),
            kind,
        };
        let err = f
            .service
            .register_upstream("root", &upstream, Default::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
    assert_eq!(f.service.store().list_upstreams().await.unwrap(), before);
}

#[tokio::test]
async fn upstream_credentials_are_stored_kept_when_left_out_and_never_audited() {
    use skillgate_core::admin::CredentialUpdate;
    use skillgate_core::model::{Upstream, UpstreamKind};
    use skillgate_core::upstream::Secret;
    use std::collections::BTreeMap;
    let f = fixture().await;
    let upstream = Upstream {
        name: slug("billing"),
        kind: UpstreamKind::Stdio {
            command: "/usr/bin/billing-mcp".into(),
            args: vec![],
        },
    };
    let with_key = CredentialUpdate {
        env: Some(BTreeMap::from([(
            "BILLING_API_KEY".to_owned(),
            Secret::new("sk-live-1234"),
        )])),
        bearer: Some(Secret::new("tok-5678")),
        headers: None,
        clear: false,
    };
    f.service
        .register_upstream("root", &upstream, with_key)
        .await
        .unwrap();
    // A save that leaves the credentials out keeps them.
    f.service
        .register_upstream("root", &upstream, CredentialUpdate::default())
        .await
        .unwrap();
    let stored = f.service.store().upstream_credentials().await.unwrap();
    assert_eq!(
        stored["billing"].env["BILLING_API_KEY"].expose(),
        "sk-live-1234"
    );
    assert_eq!(
        stored["billing"].bearer.as_ref().unwrap().expose(),
        "tok-5678"
    );
    let summary = &f.service.credential_summaries().await.unwrap()["billing"];
    assert_eq!(summary.env_keys, ["BILLING_API_KEY"]);
    assert!(summary.bearer);
    assert!(!format!("{:?}", stored["billing"]).contains("sk-live"));

    // The audit says which keys exist, never a value.
    let events = f
        .service
        .store()
        .audit_admin_changes("upstream:billing", 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 2);
    for event in &events {
        assert!(!event.payload.contains("sk-live-1234") && !event.payload.contains("tok-5678"));
        assert!(event.payload.contains("BILLING_API_KEY"));
    }

    // A bad variable name changes nothing; `clear` removes what is stored.
    let bad = CredentialUpdate {
        env: Some(BTreeMap::from([("1BAD".to_owned(), Secret::new("x"))])),
        ..Default::default()
    };
    let err = f
        .service
        .register_upstream("root", &upstream, bad)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not an environment variable name"),
        "{err}"
    );
    let clear = CredentialUpdate {
        clear: true,
        ..Default::default()
    };
    f.service
        .register_upstream("root", &upstream, clear)
        .await
        .unwrap();
    assert!(
        !f.service
            .store()
            .upstream_credentials()
            .await
            .unwrap()
            .contains_key("billing")
    );
}

/// A CA certificate made here, as PEM.
fn ca_pem() -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem()
}

#[tokio::test]
async fn an_https_upstream_keeps_its_ca_bundle_and_a_bundle_that_is_not_one_changes_nothing() {
    use skillgate_core::model::{Upstream, UpstreamKind};
    let f = fixture().await;
    let bundle = format!("{}{}", ca_pem(), ca_pem());
    let upstream = Upstream {
        name: slug("ledger"),
        kind: UpstreamKind::Http {
            url: "https://ledger.internal/mcp".into(),
            ca_bundle: Some(bundle.clone()),
            allow_plaintext: false,
        },
    };
    f.service
        .register_upstream("root", &upstream, Default::default())
        .await
        .unwrap();
    let stored = f.service.store().list_upstreams().await.unwrap();
    assert!(stored.contains(&upstream), "{stored:?}");

    let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
    for (pem, expected) in [
        (
            "not a certificate at all".to_owned(),
            "no certificate found",
        ),
        (
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".to_owned(),
            "not valid PEM",
        ),
        (
            format!("{}{key}", ca_pem()),
            "block 2 is a PrivateKey, not a certificate",
        ),
    ] {
        let bad = Upstream {
            name: slug("ledger"),
            kind: UpstreamKind::Http {
                url: "https://ledger.internal/mcp".into(),
                ca_bundle: Some(pem),
                allow_plaintext: false,
            },
        };
        let err = f
            .service
            .register_upstream("root", &bad, Default::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        assert!(
            matches!(&err, skillgate_core::admin::AdminError::BadInput { field, .. } if *field == "ca_bundle"),
            "{err:?}"
        );
    }
    assert_eq!(f.service.store().list_upstreams().await.unwrap(), stored);
}

#[tokio::test]
async fn extra_headers_are_stored_with_the_credentials_and_audited_by_name_only() {
    use skillgate_core::admin::CredentialUpdate;
    use skillgate_core::model::{Upstream, UpstreamKind};
    use skillgate_core::upstream::Secret;
    use std::collections::BTreeMap;
    let f = fixture().await;
    let upstream = Upstream {
        name: slug("ledger"),
        kind: UpstreamKind::http("https://ledger.internal/mcp"),
    };
    let headers = |pairs: &[(&str, &str)]| CredentialUpdate {
        headers: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Secret::new(*v)))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..CredentialUpdate::default()
    };
    f.service
        .register_upstream(
            "root",
            &upstream,
            headers(&[("X-Api-Key", "hk-live-9876"), ("X-Tenant", "acme")]),
        )
        .await
        .unwrap();
    let stored = f.service.store().upstream_credentials().await.unwrap();
    assert_eq!(
        stored["ledger"].headers["x-api-key"].expose(),
        "hk-live-9876"
    );
    assert_eq!(
        f.service.credential_summaries().await.unwrap()["ledger"].header_names,
        ["x-api-key", "x-tenant"]
    );

    for (name, expected) in [
        ("Authorization", "bearer token"),
        ("Host", "cannot be overridden"),
        ("Connection", "cannot be overridden"),
        ("Mcp-Session-Id", "cannot be overridden"),
        ("bad name", "not an HTTP header name"),
    ] {
        let err = f
            .service
            .register_upstream("root", &upstream, headers(&[(name, "v")]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{name}: {err}");
    }
    let stdio = Upstream {
        name: slug("local"),
        kind: UpstreamKind::Stdio {
            command: "/bin/true".into(),
            args: vec![],
        },
    };
    let err = f
        .service
        .register_upstream("root", &stdio, headers(&[("X-Tenant", "acme")]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("for an HTTP upstream"), "{err}");
    assert_eq!(
        f.service.store().upstream_credentials().await.unwrap(),
        stored
    );

    let events = f
        .service
        .store()
        .audit_admin_changes("upstream:ledger", 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    assert!(
        !events[0].payload.contains("hk-live-9876"),
        "{}",
        events[0].payload
    );
    assert!(events[0].payload.contains("x-api-key"));
}
