//! What-if replay on a real recorded log: an agent's calls go through the gateway (the
//! desk catalog: refunds up to 500 each and 1000 a session, above 200 held), then the log
//! is decided again under a proposed catalog. On SQLite and PostgreSQL.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use rust_decimal::Decimal;
use skillgate_core::audit::{AuditEvent, CheckpointSigner};
use skillgate_core::model::{Catalog, Limit};
use skillgate_core::policy::CompiledCatalog;
use skillgate_core::whatif::{
    ReplayReport, ReplayRequest, Subject, Verdict, WhatIfError, Window, replay, replay_stored,
};

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
    replay(
        &current(f),
        proposal,
        log(f).await,
        DateTime::<Utc>::MIN_UTC,
    )
}

#[tokio::test]
async fn a_lowered_cap_flips_exactly_the_calls_past_it_and_later_calls_see_the_changed_usage() {
    let f = fixture().await;
    // 150 + 150 + 150 + 90 = 540: all under today's 1000.
    let (sid, decisions) = refunds(&f, &[150, 150, 150, 90]).await;
    assert_eq!(decisions, ["allowed"; 4]);
    let lowered = lowered_to(&f, 400);
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

    let lowered = lowered_to(&f, 100);
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

fn lowered_to(f: &Fixture, cap: u32) -> CompiledCatalog {
    proposed(f, |c| {
        for limit in desk_limits(c) {
            if let Limit::SumCap { max, .. } = limit {
                *max = Decimal::from(cap);
            }
        }
    })
}

async fn stored(
    f: &Fixture,
    proposal: &CompiledCatalog,
    window: &Window,
    now: DateTime<Utc>,
) -> Result<ReplayReport, WhatIfError> {
    let current = current(f);
    let request = ReplayRequest {
        current: &current,
        proposed: proposal,
        window,
        actor: "cli:alice",
        file_digest: "0123abcd",
    };
    replay_stored(&f.store, &f.audit, request, now, |_| {}).await
}

#[tokio::test]
async fn a_stored_window_is_replayed_and_the_replay_audited_with_its_counts_changing_nothing_else()
{
    let f = fixture().await;
    refunds(&f, &[150, 150, 150, 90]).await;
    let revision = f.catalog.load().revision().to_owned();
    let before = log(&f).await;
    let mut read = 0;
    let current = current(&f);
    let lowered = lowered_to(&f, 400);
    let request = ReplayRequest {
        current: &current,
        proposed: &lowered,
        window: &Window::last("1h").unwrap(),
        actor: "cli:alice",
        file_digest: "0123abcd",
    };
    let report = replay_stored(&f.store, &f.audit, request, Utc::now(), |_| read += 1)
        .await
        .unwrap();
    let started = before
        .iter()
        .find(|e| e.kind.as_str() == "session_started")
        .unwrap()
        .seq;
    let from_start = before.iter().filter(|e| e.seq >= started).count();
    assert_eq!(
        read, from_start,
        "the log read once, from the session's start"
    );
    assert!(
        from_start < before.len(),
        "the admin changes before it are not read"
    );
    assert_eq!((report.sessions, report.decided), (1, 5), "{report:#?}");
    assert_eq!(report.count(Verdict::Allowed, Verdict::Denied), 1);

    let after = log(&f).await;
    assert_eq!(after.len(), before.len() + 1, "one event: the replay's own");
    assert_eq!(after[..before.len()], before[..], "nothing else written");
    let event = after.last().unwrap();
    assert_eq!(event.kind.as_str(), "what_if_replay");
    assert_eq!(event.actor.as_deref(), Some("cli:alice"));
    assert_eq!(event.session_id, None);
    assert_eq!(event.payload["window"]["last"], "1h");
    assert_eq!(event.payload["catalog_file_sha256"], "0123abcd");
    assert_eq!(event.payload["flips"]["allowed_to_denied"], 1);
    assert_eq!(event.payload["decided"], 5);
    assert_eq!(
        f.catalog.load().revision(),
        revision,
        "the catalog is untouched"
    );
    assert!(f.audit.verify().await.unwrap().is_intact());

    // An hour from now the window holds no call: refused, and not audited.
    let later = Utc::now() + chrono::Duration::hours(2);
    let empty = stored(&f, &lowered, &Window::last("1h").unwrap(), later).await;
    assert!(
        matches!(empty, Err(WhatIfError::EmptyWindow { .. })),
        "{empty:?}"
    );
    assert_eq!(log(&f).await.len(), after.len());
}

#[tokio::test]
async fn chosen_sessions_are_replayed_whole_and_unknown_ones_or_pruned_windows_are_refused() {
    let f = fixture().await;
    let (first, _) = refunds(&f, &[150, 150, 150]).await;
    let (second, _) = refunds(&f, &[150, 150, 150]).await;
    let lowered = lowered_to(&f, 400);
    let only = Window::Sessions(vec![second.clone()]);
    let report = stored(&f, &lowered, &only, Utc::now()).await.unwrap();
    assert_eq!(report.changes.len(), 1, "{report:#?}");
    assert_eq!(report.changes[0].session_id, second);
    let both = Window::Sessions(vec![first, second]);
    assert_eq!(
        stored(&f, &lowered, &both, Utc::now())
            .await
            .unwrap()
            .changes
            .len(),
        2
    );

    let written = log(&f).await.len();
    let unknown = Window::Sessions(vec!["sess_nope".into()]);
    let refused = stored(&f, &lowered, &unknown, Utc::now()).await;
    assert!(matches!(refused, Err(WhatIfError::UnknownSession(ref id)) if id == "sess_nope"));
    assert_eq!(
        log(&f).await.len(),
        written,
        "a refused replay writes nothing"
    );

    // Retention deleted the oldest events: a window reaching before what is kept is refused.
    let signer = CheckpointSigner::generate();
    f.audit
        .prune_through(3, &signer, "retention")
        .await
        .unwrap();
    let month = stored(&f, &lowered, &Window::last("30d").unwrap(), Utc::now()).await;
    assert!(
        matches!(month, Err(WhatIfError::BeyondRetention { .. })),
        "{month:?}"
    );
}

#[tokio::test]
async fn an_editors_proposal_is_replayed_against_the_live_catalog_and_named_by_its_digest() {
    let f = fixture().await;
    refunds(&f, &[150, 150, 150, 90]).await;
    let live = f.catalog.load();
    let mut edited = live.catalog().clone();
    for limit in desk_limits(&mut edited) {
        if let Limit::SumCap { max, .. } = limit {
            *max = Decimal::from(400);
        }
    }
    let digest = skillgate_core::admin::proposal_digest(&edited);
    let report = f
        .admin
        .what_if("alice", edited.clone(), &Window::last("1h").unwrap())
        .await
        .unwrap();
    assert_eq!(report.count(Verdict::Allowed, Verdict::Denied), 1);
    assert_eq!(
        f.catalog.load().revision(),
        live.revision(),
        "nothing was saved"
    );
    let event = log(&f).await.pop().unwrap();
    assert_eq!(event.kind.as_str(), "what_if_replay");
    assert_eq!(event.actor.as_deref(), Some("alice"));
    assert_eq!(event.payload["catalog_file_sha256"], digest.as_str());
    assert_ne!(
        digest,
        skillgate_core::admin::proposal_digest(live.catalog()),
        "the digest names the edit, not the catalog in force"
    );
}
