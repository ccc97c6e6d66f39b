//! A desk catalog for the tests of held calls: a refund role whose refunds above 200 wait
//! for a reviewer, a scope with it, and no upstream connected (a call that runs ends in an
//! upstream error, after its `call_allowed`).

use std::sync::Arc;

use chrono::Utc;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::audit::AuditLog;
use skillgate_core::gateway::{AgentIdentity, Gateway, GatewayOptions, ToolReply};
use skillgate_core::holds::{Decider, Holds};
use skillgate_core::model::{ApprovalCondition, ArgCheck, CmpOp, Limit, Role, Scope};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::{Store, testing};
use skillgate_core::upstream::UpstreamPool;

pub struct Fixture {
    pub gateway: Gateway,
    pub audit: AuditLog,
    pub store: Store,
    pub catalog: Arc<CatalogHandle>,
    pub holds: Holds,
    pub admin: AdminService,
    _dir: tempfile::TempDir,
}

pub fn slug(s: &str) -> Slug {
    Slug::parse(s).unwrap()
}

/// A desk role: refunds up to `per_call` each and 1000 per session (a cumulative cap, so
/// every refund reserves), above 200 only with a reviewer's approval; no step-order guard.
pub fn desk_role(per_call: u32) -> Role {
    Role {
        slug: slug("refund-desk"),
        title: "Refund desk".to_owned(),
        description: "Refunds with approval above 200.".to_owned(),
        instructions: "Refund within the limits.".to_owned(),
        skills: vec![slug("refund-handling")],
        limits: vec![
            Limit::ArgBound {
                tool: "process_refund".to_owned(),
                arg: "amount".to_owned(),
                check: ArgCheck::Compare {
                    op: CmpOp::Le,
                    value: Decimal::from(per_call),
                },
            },
            Limit::SumCap {
                tool: "process_refund".to_owned(),
                arg: "amount".to_owned(),
                max: Decimal::from(1000),
            },
            Limit::RequiresApproval {
                tool: "process_refund".to_owned(),
                when: Some(ApprovalCondition {
                    arg: "amount".to_owned(),
                    op: CmpOp::Gt,
                    value: Decimal::from(200),
                }),
                expires_in_minutes: None,
            },
        ],
    }
}

pub async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&testing::database_url(dir.path(), "p.db"))
        .await
        .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    let admin = AdminService::new(store.clone(), audit.clone(), catalog.clone());
    admin.create_role("alice", &desk_role(500)).await.unwrap();
    admin
        .create_scope(
            "alice",
            &Scope {
                slug: slug("desk"),
                description: String::new(),
                roles: vec![slug("refund-desk")],
                guardrails: Vec::new(),
            },
        )
        .await
        .unwrap();
    catalog.replace(store.compiled_catalog().await.unwrap());
    let gateway = Gateway::new(
        store.clone(),
        catalog.clone(),
        audit.clone(),
        Arc::new(UpstreamPool::default()),
        GatewayOptions::default(),
    );
    let holds = Holds::new(store.clone(), audit.clone(), catalog.clone());
    Fixture {
        gateway,
        audit,
        store,
        catalog,
        holds,
        admin,
        _dir: dir,
    }
}

pub fn agent() -> AgentIdentity {
    AgentIdentity {
        key_id: 1,
        key_name: "key-1".to_owned(),
        scope: slug("desk"),
        connection: Some("conn-1".to_owned()),
    }
}

pub fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

pub fn reply(reply: ToolReply) -> (String, Value) {
    match reply {
        ToolReply::Gateway {
            text, structured, ..
        } => (text, structured),
        ToolReply::Downstream { result, .. } => {
            panic!("nothing may run downstream here: {result:?}")
        }
    }
}

/// A session that learned the desk role.
pub async fn desk_session(f: &Fixture) -> String {
    let (_, started) = reply(f.gateway.init(&agent(), None).await.unwrap());
    let sid = started["session_id"].as_str().unwrap().to_owned();
    let (text, _) = reply(
        f.gateway
            .learn(&agent(), Some(sid.clone()), "/roles/refund-desk")
            .await
            .unwrap(),
    );
    assert!(text.contains("process_refund"), "{text}");
    sid
}

/// Raises a hold for a refund of `amount`; returns the reply, whose `hold_id` names it.
pub async fn held(f: &Fixture, sid: &str, amount: u32) -> ToolReply {
    let held = f
        .gateway
        .call(
            &agent(),
            Some(sid.to_owned()),
            "process_refund",
            refund(amount),
        )
        .await
        .unwrap();
    let (text, structured) = reply(held.clone());
    assert_eq!(structured["decision"], "pending_approval", "{text}");
    held
}

/// Raises a hold for a refund of `amount` and approves it; returns its id.
pub async fn approved_hold(f: &Fixture, sid: &str, amount: u32) -> String {
    let (_, held) = reply(held(f, sid, amount).await);
    let hold = held["hold_id"].as_str().unwrap().to_owned();
    f.holds
        .approve(&Decider::console("rita"), &hold, "checked", Utc::now())
        .await
        .unwrap();
    hold
}
