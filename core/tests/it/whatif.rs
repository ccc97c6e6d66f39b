//! What-if replay on a real recorded log: an agent's calls go through the gateway (the
//! desk catalog: refunds up to 500 each and 1000 a session, above 200 held), then the log
//! is decided again under a proposed catalog. On SQLite and PostgreSQL.

use futures::TryStreamExt;
use rust_decimal::Decimal;
use skillgate_core::audit::AuditEvent;
use skillgate_core::model::{Catalog, Limit};
use skillgate_core::policy::CompiledCatalog;
use skillgate_core::whatif::{ReplayReport, Subject, Verdict, replay};

use crate::desk::{Fixture, agent, desk_role, desk_session, fixture, refund, reply};

async fn log(f: &Fixture) -> Vec<AuditEvent> {
    f.audit.events(None).try_collect().await.unwrap()
}

fn current(f: &Fixture) -> CompiledCatalog {
    CompiledCatalog::compile(f.catalog.load().catalog().clone())
}

/// The live catalog with `edit` applied to it.
fn proposed(f: &Fixture, edit: impl FnOnce(&mut Catalog)) -> CompiledCatalog {
    let mut catalog = f.catalog.load().catalog().clone();
    edit(&mut catalog);
    CompiledCatalog::compile(catalog)
}

fn desk_limits(catalog: &mut Catalog) -> &mut Vec<Limit> {
    &mut catalog
        .roles
        .iter_mut()
        .find(|r| r.slug.as_str() == "refund-desk")
        .unwrap()
        .limits
}

/// Refunds of each amount in one session; returns the session and each call's decision.
async fn refunds(f: &Fixture, amounts: &[u32]) -> (String, Vec<String>) {
    let sid = desk_session(f).await;
    let mut decisions = Vec::new();
    for &amount in amounts {
        let answer = f
            .gateway
            .call(
                &agent(),
                Some(sid.clone()),
                "process_refund",
                refund(amount),
            )
            .await
            .unwrap();
        let (_, structured) = reply(answer);
        decisions.push(structured["decision"].as_str().unwrap().to_owned());
    }
    (sid, decisions)
}

async fn replayed(f: &Fixture, proposal: &CompiledCatalog) -> ReplayReport {
    replay(&current(f), proposal, log(f).await)
}

#[tokio::test]
async fn a_lowered_cap_flips_exactly_the_calls_past_it_and_later_calls_see_the_changed_usage() {
    let f = fixture().await;
    // 150 + 150 + 150 + 90 = 540: all under today's 1000.
    let (sid, decisions) = refunds(&f, &[150, 150, 150, 90]).await;
    assert_eq!(decisions, ["allowed"; 4]);
    let lowered = proposed(&f, |c| {
        for limit in desk_limits(c) {
            if let Limit::SumCap { max, .. } = limit {
                *max = Decimal::from(400);
            }
        }
    });
    let report = replayed(&f, &lowered).await;
    // Under 400 the third refund (450) is refused; the fourth then fits (300 + 90), which
    // a replay that kept the log's usage (540) would have refused too.
    assert_eq!(report.changes.len(), 1, "{report:#?}");
    let change = &report.changes[0];
    assert_eq!(change.session_id, sid);
    assert_eq!(
        (change.before, change.after),
        (Verdict::Allowed, Verdict::Denied)
    );
    assert_eq!(
        change.subject,
        Subject::Call {
            tool: "process_refund".into()
        }
    );
    assert!(
        change.rule.as_deref().unwrap().contains("400"),
        "{change:?}"
    );
    assert_eq!(change.role.as_deref(), Some("refund-desk"));
    assert_eq!(change.key, "key-1");
    let calls: Vec<u64> = log(&f)
        .await
        .into_iter()
        .filter(|e| e.kind.as_str() == "call_allowed")
        .map(|e| e.seq)
        .collect();
    assert_eq!(change.seq, calls[2], "the third call");
    assert_eq!(report.decided, 5, "one learn and four calls");
    assert!(report.undecidable.is_empty());
    assert!(report.flips());

    // The catalog in force changes nothing.
    let same = replayed(&f, &current(&f)).await;
    assert!(!same.flips(), "{same:#?}");
}

#[tokio::test]
async fn a_tool_removed_from_a_role_flips_its_calls_held_ones_too() {
    let f = fixture().await;
    let (_, decisions) = refunds(&f, &[100, 300]).await;
    assert_eq!(decisions, ["allowed", "pending_approval"]);
    let without = proposed(&f, |c| {
        let role = c
            .roles
            .iter_mut()
            .find(|r| r.slug.as_str() == "refund-desk")
            .unwrap();
        role.skills.clear();
    });
    let report = replayed(&f, &without).await;
    let flips: Vec<(Verdict, Verdict)> =
        report.changes.iter().map(|c| (c.before, c.after)).collect();
    assert_eq!(
        flips,
        [
            (Verdict::Allowed, Verdict::Denied),
            (Verdict::Held, Verdict::Denied)
        ],
        "{report:#?}"
    );
    assert_eq!(report.count(Verdict::Allowed, Verdict::Denied), 1);
}

#[tokio::test]
async fn a_looser_limit_flips_denials_to_allowed_and_a_role_out_of_scope_flips_the_learn() {
    let f = fixture().await;
    // 600 is over today's 500 per refund.
    let (_, decisions) = refunds(&f, &[600]).await;
    assert_eq!(decisions, ["denied"]);
    let looser = proposed(&f, |c| {
        *desk_limits(c) = desk_role(700)
            .limits
            .into_iter()
            .filter(|l| !matches!(l, Limit::RequiresApproval { .. }))
            .collect();
    });
    let report = replayed(&f, &looser).await;
    assert_eq!(report.changes.len(), 1, "{report:#?}");
    let change = &report.changes[0];
    assert_eq!(
        (change.before, change.after),
        (Verdict::Denied, Verdict::Allowed)
    );
    assert!(
        change.rule.as_deref().unwrap().contains("500"),
        "the rule that no longer denies: {change:?}"
    );

    let out_of_scope = proposed(&f, |c| {
        c.scopes
            .iter_mut()
            .find(|s| s.slug.as_str() == "desk")
            .unwrap()
            .roles
            .clear();
    });
    let report = replayed(&f, &out_of_scope).await;
    assert_eq!(
        report.changes[0].subject,
        Subject::Learn {
            role: "refund-desk".into()
        },
        "{report:#?}"
    );
    assert_eq!(report.changes[0].before, Verdict::Allowed);
    assert_eq!(report.changes[0].after, Verdict::Denied);
    // Its call is then denied too (the log denied it already: not a change).
    assert_eq!(report.changes.len(), 1, "{report:#?}");
}

#[tokio::test]
async fn a_call_whose_sensitive_argument_is_a_digest_is_not_decidable_when_a_limit_on_it_changes() {
    let f = fixture().await;
    f.admin
        .set_sensitive_args("alice", "process_refund", &["amount".to_owned()])
        .await
        .unwrap();
    let (_, decisions) = refunds(&f, &[150]).await;
    assert_eq!(decisions, ["allowed"]);
    let recorded = log(&f).await;
    let allowed = recorded
        .iter()
        .find(|e| e.kind.as_str() == "call_allowed")
        .unwrap();
    assert!(allowed.payload["arguments"]["amount"]["sha256"].is_string());

    let lowered = proposed(&f, |c| {
        for limit in desk_limits(c) {
            if let Limit::SumCap { max, .. } = limit {
                *max = Decimal::from(100);
            }
        }
    });
    let report = replayed(&f, &lowered).await;
    assert!(report.changes.is_empty(), "never guessed: {report:#?}");
    assert_eq!(report.undecidable.len(), 1, "{report:#?}");
    assert!(report.undecidable[0].reason.contains("`amount`"));

    // A change that reads no argument is still known: the tool taken away.
    let without = proposed(&f, |c| {
        c.roles
            .iter_mut()
            .find(|r| r.slug.as_str() == "refund-desk")
            .unwrap()
            .skills
            .clear();
    });
    let report = replayed(&f, &without).await;
    assert_eq!(report.changes.len(), 1, "{report:#?}");
    assert_eq!(report.changes[0].after, Verdict::Denied);
}
