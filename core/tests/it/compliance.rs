//! The compliance reading of the audit chain against a real SQLite file: session filters,
//! timelines, exports an outside party can re-verify, tamper detection and retention.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::audit::chain::{event_hash, link};
use skillgate_core::audit::{
    Anchor, AuditLog, AuditRow, BadEvent, BadReason, CallOutcome, CheckpointSigner, ExportFormat,
    Extent, NewEvent, canonical_json, verify_exported_jsonl,
};
use skillgate_core::compliance::{Compliance, Outcome, SessionFilter, Tone};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::store::{Store, stamp};

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    log: AuditLog,
    compliance: Compliance,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "audit.db");
    let store = Store::open(&url).await.unwrap();
    Fixture {
        _dir: dir,
        log: AuditLog::new(store.clone()),
        compliance: Compliance::new(store.clone()),
        store,
    }
}

fn versions(skill: &str) -> BTreeMap<String, u32> {
    BTreeMap::from([(skill.to_owned(), 2)])
}

/// Four sessions through the real audit log:
/// - `s-ok`: support-bot, scope support, learns tier-1-support, a refund that succeeds;
/// - `s-violation`: support-bot, a refund over the limit (rule max_refund_per_call);
/// - `s-denied`: billing-agent, scope billing, a tool outside its roles, then a failing call;
/// - `s-grew`: billing-agent, learns a second role.
async fn four_sessions(log: &AuditLog) {
    let refund = json!({ "order": "O-1", "amount": 40 });
    let events = vec![
        NewEvent::session_started(
            "s-ok",
            "support-bot",
            "support",
            Some("Refund a damaged mug"),
        ),
        NewEvent::learn_granted(
            "s-ok",
            "support-bot",
            "/roles/tier-1-support",
            "tier-1-support",
            &versions("refund-handling"),
        ),
        allowed_event(
            "s-ok",
            "support-bot",
            "issue_refund",
            refund.clone(),
            "tier-1-support",
            &versions("refund-handling"),
        ),
        NewEvent::call_result(
            "s-ok",
            "support-bot",
            "issue_refund",
            12,
            &CallOutcome::Ok {
                result_size: 10,
                result_digest: "ab".into(),
            },
        ),
        NewEvent::session_started(
            "s-violation",
            "support-bot",
            "support",
            Some("Refund a whole order"),
        ),
        NewEvent::learn_granted(
            "s-violation",
            "support-bot",
            "/roles/tier-1-support",
            "tier-1-support",
            &versions("refund-handling"),
        ),
        NewEvent::call_denied(
            "support-bot",
            "issue_refund",
            json!({ "amount": 900, "card": { "sha256": "00ff" } }),
            "GOVERNANCE_VIOLATION",
            Some("max_refund_per_call"),
        )
        .in_session("s-violation"),
        NewEvent::session_started(
            "s-denied",
            "billing-agent",
            "billing",
            Some("Correct an invoice"),
        ),
        NewEvent::learn_granted(
            "s-denied",
            "billing-agent",
            "/roles/billing-admin",
            "billing-admin",
            &versions("billing-operations"),
        ),
        NewEvent::call_denied(
            "billing-agent",
            "delete_account",
            json!({}),
            "ACCESS_DENIED",
            None,
        )
        .in_session("s-denied"),
        allowed_event(
            "s-denied",
            "billing-agent",
            "adjust_invoice",
            json!({ "invoice": "I-9" }),
            "billing-admin",
            &versions("billing-operations"),
        ),
        NewEvent::call_result(
            "s-denied",
            "billing-agent",
            "adjust_invoice",
            900,
            &CallOutcome::Error {
                message: "upstream timed out".into(),
            },
        ),
        NewEvent::session_started("s-grew", "billing-agent", "billing", None),
        NewEvent::learn_granted(
            "s-grew",
            "billing-agent",
            "/roles/billing-admin",
            "billing-admin",
            &versions("billing-operations"),
        ),
        NewEvent::learn_granted(
            "s-grew",
            "billing-agent",
            "/roles/tier-1-support",
            "tier-1-support",
            &versions("refund-handling"),
        ),
        NewEvent::admin_change(
            "alice",
            "update",
            "limit:max_refund_per_call",
            json!(500),
            json!(400),
        ),
    ];
    for event in events {
        log.append(event).await.unwrap();
    }
}

async fn ids(compliance: &Compliance, filter: SessionFilter) -> Vec<String> {
    compliance
        .sessions(&filter, None, 50)
        .await
        .unwrap()
        .sessions
        .into_iter()
        .map(|s| s.session_id)
        .collect()
}

#[tokio::test]
async fn the_sessions_list_is_newest_first_and_each_filter_narrows_it() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let c = &fx.compliance;
    assert_eq!(
        ids(c, SessionFilter::default()).await,
        ["s-grew", "s-denied", "s-violation", "s-ok"]
    );
    let by = |f: fn(&mut SessionFilter)| {
        let mut filter = SessionFilter::default();
        f(&mut filter);
        filter
    };
    assert_eq!(
        ids(c, by(|f| f.key = Some("support-bot".into()))).await,
        ["s-violation", "s-ok"]
    );
    assert_eq!(
        ids(c, by(|f| f.scope = Some("billing".into()))).await,
        ["s-grew", "s-denied"]
    );
    assert_eq!(
        ids(c, by(|f| f.role = Some("tier-1-support".into()))).await,
        ["s-grew", "s-violation", "s-ok"]
    );
    assert_eq!(
        ids(c, by(|f| f.tool = Some("delete_account".into()))).await,
        ["s-denied"]
    );
    assert_eq!(
        ids(c, by(|f| f.outcome = Some(Outcome::Violation))).await,
        ["s-violation"]
    );
    assert_eq!(
        ids(c, by(|f| f.outcome = Some(Outcome::Denial))).await,
        ["s-denied"]
    );
    assert_eq!(
        ids(c, by(|f| f.outcome = Some(Outcome::Error))).await,
        ["s-denied"]
    );
    // Free text matches task summaries and tool names, case-insensitively.
    assert_eq!(
        ids(c, by(|f| f.text = Some("REFUND A".into()))).await,
        ["s-violation", "s-ok"]
    );
    assert_eq!(
        ids(c, by(|f| f.text = Some("adjust_inv".into()))).await,
        ["s-denied"]
    );
    let tomorrow = stamp(Utc::now() + Duration::days(1));
    assert!(
        ids(
            c,
            SessionFilter {
                from: Some(tomorrow),
                ..Default::default()
            }
        )
        .await
        .is_empty()
    );
}

#[tokio::test]
async fn outcome_counts_ignore_the_outcome_filter_and_pages_follow_the_cursor() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let filter = SessionFilter {
        outcome: Some(Outcome::Violation),
        ..Default::default()
    };
    let page = fx.compliance.sessions(&filter, None, 50).await.unwrap();
    assert_eq!(
        (
            page.counts.sessions,
            page.counts.with_denial,
            page.counts.with_violation,
            page.counts.with_error
        ),
        (4, 1, 1, 1)
    );
    let first = fx
        .compliance
        .sessions(&SessionFilter::default(), None, 3)
        .await
        .unwrap();
    assert_eq!(first.sessions.len(), 3);
    let cursor = first.next_cursor.expect("a fourth session remains");
    let second = fx
        .compliance
        .sessions(&SessionFilter::default(), Some(cursor), 3)
        .await
        .unwrap();
    let rest: Vec<_> = second
        .sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    assert_eq!(rest, ["s-ok"]);
    assert_eq!(second.next_cursor, None);
    assert!(first.integrity.is_intact() && second.integrity.is_intact());
}

#[tokio::test]
async fn a_timeline_decodes_each_event_and_marks_where_the_scope_grew() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let t = fx
        .compliance
        .timeline("s-violation", 200)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.summary.scope.as_deref(), Some("support"));
    let kinds: Vec<_> = t.entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["session_started", "learn_granted", "call_denied"]);
    let violation = &t.entries[2];
    assert_eq!(violation.tone, Tone::Violation);
    assert_eq!(violation.rule.as_deref(), Some("max_refund_per_call"));
    assert!(
        violation
            .arguments
            .iter()
            .any(|a| a.name == "card" && a.digest)
    );
    assert_eq!(t.entries[1].skill_versions, ["refund-handling@2"]);
    assert!(t.integrity.is_intact());

    let grew = fx
        .compliance
        .timeline("s-grew", 200)
        .await
        .unwrap()
        .unwrap();
    let marks: Vec<bool> = grew.entries.iter().map(|e| e.scope_grew).collect();
    assert_eq!(marks, [false, false, true]);
    assert!(fx.compliance.timeline("nope", 200).await.unwrap().is_none());
}

#[tokio::test]
async fn an_export_of_the_whole_chain_re_verifies_outside_the_database() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let mut out = Vec::new();
    let n = fx
        .compliance
        .export(
            None,
            &SessionFilter::default(),
            ExportFormat::Jsonl,
            &mut out,
        )
        .await
        .unwrap();
    assert_eq!(n, 16);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &out).unwrap();
    let report =
        verify_exported_jsonl(std::io::BufReader::new(std::fs::File::open(&file).unwrap()))
            .unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.verified_tip, fx.store.audit_tip().await.unwrap());

    // One edited line is named by the re-verification.
    let text = String::from_utf8(out)
        .unwrap()
        .replace("\"amount\":900", "\"amount\":90");
    let report = verify_exported_jsonl(text.as_bytes()).unwrap();
    assert_eq!(
        report.first_bad,
        Some(BadEvent {
            seq: 7,
            reason: BadReason::Changed
        })
    );
}

#[tokio::test]
async fn a_filtered_export_carries_the_chain_fields_of_each_event() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let filter = SessionFilter {
        scope: Some("billing".into()),
        ..Default::default()
    };
    let mut jsonl = Vec::new();
    fx.compliance
        .export(None, &filter, ExportFormat::Jsonl, &mut jsonl)
        .await
        .unwrap();
    let lines: Vec<Value> = String::from_utf8(jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    let mut last = 0;
    for line in &lines {
        assert!(["s-denied", "s-grew"].contains(&line["session_id"].as_str().unwrap()));
        let seq = line["seq"].as_u64().unwrap();
        assert!(seq > last, "chain order");
        last = seq;
        // Each event's hash is recomputable from the exported fields alone.
        let row = AuditRow {
            seq,
            at: line["at"].as_str().unwrap().into(),
            session_id: line["session_id"].as_str().map(Into::into),
            kind: line["kind"].as_str().unwrap().into(),
            actor: line["actor"].as_str().map(Into::into),
            payload: canonical_json(&line["payload"]),
            prev_hash: line["prev_hash"].as_str().unwrap().into(),
            hash: line["hash"].as_str().unwrap().into(),
        };
        assert_eq!(event_hash(&row).as_deref(), Some(row.hash.as_str()));
    }

    let mut csv = Vec::new();
    fx.compliance
        .export(
            Some("s-grew"),
            &SessionFilter::default(),
            ExportFormat::Csv,
            &mut csv,
        )
        .await
        .unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    assert_eq!(
        reader.headers().unwrap(),
        skillgate_core::audit::export::COLUMNS.as_slice()
    );
    assert_eq!(reader.records().count(), 3);
}

#[tokio::test]
async fn a_tampered_event_is_named_by_the_full_check_the_timeline_and_the_list() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    // Someone with write access to the file softens the violation's amount.
    sqlx::query("UPDATE audit_events SET payload = replace(payload, '900', '90') WHERE seq = 7")
        .execute(fx.store.test_pool())
        .await
        .unwrap();
    let bad = Some(BadEvent {
        seq: 7,
        reason: BadReason::Changed,
    });
    assert_eq!(fx.compliance.verify_all().await.unwrap().first_bad, bad);
    let timeline = fx
        .compliance
        .timeline("s-violation", 200)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(timeline.integrity.first_bad, bad);
    let list = fx
        .compliance
        .sessions(&SessionFilter::default(), None, 50)
        .await
        .unwrap();
    assert_eq!(list.integrity.first_bad, bad);
    // A session whose own events are intact still verifies on its own timeline.
    assert!(
        fx.compliance
            .timeline("s-grew", 200)
            .await
            .unwrap()
            .unwrap()
            .integrity
            .is_intact()
    );
}

#[tokio::test]
async fn an_event_rewritten_with_a_recomputed_hash_is_caught_by_its_successor() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let rows = fx.store.audit_session_rows("s-ok", 0, 10).await.unwrap();
    let mut forged = rows[2].clone();
    forged.payload = forged.payload.replace("40", "4");
    forged.hash = event_hash(&forged).unwrap();
    sqlx::query("UPDATE audit_events SET payload = $1, hash = $2 WHERE seq = $3")
        .bind(&forged.payload)
        .bind(&forged.hash)
        .bind(forged.seq as i64)
        .execute(fx.store.test_pool())
        .await
        .unwrap();
    let timeline = fx.compliance.timeline("s-ok", 200).await.unwrap().unwrap();
    assert_eq!(
        timeline.integrity.first_bad,
        Some(BadEvent {
            seq: 3,
            reason: BadReason::Changed
        })
    );
}

/// Appends `n` linked events stamped `age` ago, one session per 10 events.
async fn old_events(store: &Store, n: u64, age: Duration) {
    let at = stamp(Utc::now() - age);
    store
        .audit_append_with(|tip| {
            let mut tip = tip.clone();
            (0..n)
                .map(|i| {
                    let row = link(
                        &tip,
                        at.clone(),
                        Some(format!("old-{}", (tip.seq + 1) / 10)),
                        if i % 10 == 0 {
                            "session_started"
                        } else {
                            "feedback"
                        }
                        .into(),
                        Some("k".into()),
                        canonical_json(&json!({ "scope": "support", "i": i })),
                    );
                    tip = Anchor {
                        seq: row.seq,
                        hash: row.hash.clone(),
                    };
                    row
                })
                .collect()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn retention_prunes_whole_segments_and_the_rest_still_verifies() {
    let fx = fixture().await;
    old_events(&fx.store, 2500, Duration::days(40)).await;
    four_sessions(&fx.log).await;
    let admin = AdminService::new(
        fx.store.clone(),
        fx.log.clone(),
        Arc::new(CatalogHandle::new(
            fx.store.compiled_catalog().await.unwrap(),
        )),
    );
    assert!(admin.set_retention_days("root", Some(0)).await.is_err());
    admin.set_retention_days("root", Some(30)).await.unwrap();
    assert_eq!(fx.compliance.retention_days().await.unwrap(), Some(30));

    let signer = CheckpointSigner::generate();
    let pruned = fx
        .compliance
        .prune_older_than(30, Utc::now(), &signer, "retention")
        .await
        .unwrap()
        .unwrap();
    let anchor = pruned.anchor;
    assert_eq!(anchor.seq, 2000, "whole segments of 1000 only");
    let report = fx.compliance.verify_all().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.start, anchor);
    // What was left, the `admin_change` that set the period, and the signed `audit_pruned`.
    assert_eq!(report.events, 500 + 16 + 1 + 1);
    let checked = fx
        .compliance
        .verify_integrity(&signer.trusted(), Extent::Whole)
        .await
        .unwrap();
    assert!(checked.is_intact(), "{checked:?}");
    assert!(fx.store.audit_session("old-1").await.unwrap().is_none());
    assert!(fx.store.audit_session("old-249").await.unwrap().is_some());
    // The timeline right after the anchor still links to it.
    let timeline = fx
        .compliance
        .timeline("old-200", 200)
        .await
        .unwrap()
        .unwrap();
    assert!(timeline.integrity.is_intact(), "{:?}", timeline.integrity);
    // Nothing else old enough fills a segment.
    assert_eq!(
        fx.compliance
            .prune_older_than(30, Utc::now(), &signer, "retention")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn summaries_of_events_appended_before_the_migration_are_backfilled() {
    // Events from before the summaries exist only in SQLite databases.
    if skillgate_core::store::testing::sqlite_only("summaries_backfill") {
        return;
    }
    // The migration's backfill and the writer's upsert must agree: rebuild the table
    // with the migration's SQL and compare.
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let live = fx
        .compliance
        .sessions(&SessionFilter::default(), None, 50)
        .await
        .unwrap()
        .sessions;
    let sql = include_str!("../../../migrations/sqlite/0006_audit_session_summaries.sql");
    let backfill = &sql[sql.find("-- Backfill").unwrap()..sql.find("-- Console-editable").unwrap()];
    sqlx::query("DELETE FROM audit_session_summaries")
        .execute(fx.store.test_pool())
        .await
        .unwrap();
    sqlx::raw_sql(backfill)
        .execute(fx.store.test_pool())
        .await
        .unwrap();
    let rebuilt = fx
        .compliance
        .sessions(&SessionFilter::default(), None, 50)
        .await
        .unwrap()
        .sessions;
    let norm = |mut v: Vec<skillgate_core::store::audit_query::SessionSummary>| {
        for s in &mut v {
            s.roles.sort();
            s.tools.sort();
        }
        v
    };
    assert_eq!(norm(rebuilt), norm(live));
}

/// A `call_allowed` event as the gateway writes it for a permitted call (the typed
/// constructor takes a policy permit; these tests exercise storage, not policy).
fn allowed_event(
    session_id: &str,
    actor: &str,
    tool: &str,
    arguments: serde_json::Value,
    role: &str,
    skill_versions: &std::collections::BTreeMap<String, u32>,
) -> NewEvent {
    NewEvent::new(
        skillgate_core::audit::EventKind::CallAllowed,
        serde_json::json!({
            "tool": tool,
            "arguments": arguments,
            "decision": "allowed",
            "role": role,
            "skill_versions": skill_versions,
        }),
    )
    .in_session(session_id)
    .by(actor)
}

#[tokio::test]
async fn the_overview_counts_refusals_and_names_the_most_refused_tools_and_rules() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    fx.log
        .append(
            NewEvent::learn_denied("billing-agent", "/roles/security-fraud", "ACCESS_DENIED")
                .in_session("s-denied"),
        )
        .await
        .unwrap();
    let overview = fx.compliance.overview(Utc::now()).await.unwrap();
    let totals = |series: &[(String, u64, u64, u64)]| {
        series.iter().fold((0, 0, 0), |(s, d, v), (_, bs, bd, bv)| {
            (s + bs, d + bd, v + bv)
        })
    };
    // Denials: the refused call to delete_account and the refused learn; one violation.
    assert_eq!(totals(&overview.last_24h), (4, 2, 1));
    assert_eq!(totals(&overview.last_7d), (4, 2, 1));
    assert_eq!(
        overview.top_denied_tools,
        [("delete_account".to_owned(), 1)]
    );
    assert_eq!(
        overview.top_violated_rules,
        [("max_refund_per_call".to_owned(), 1)]
    );
}

#[tokio::test]
async fn a_later_timeline_page_still_marks_where_the_scope_grew() {
    let fx = fixture().await;
    four_sessions(&fx.log).await;
    let first = fx
        .compliance
        .timeline_page("s-grew", None, 2)
        .await
        .unwrap()
        .unwrap();
    let after = first.next_after.expect("a second page");
    let second = fx
        .compliance
        .timeline_page("s-grew", Some(after), 2)
        .await
        .unwrap()
        .unwrap();
    let kinds: Vec<_> = second.entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["learn_granted"]);
    assert_eq!(second.entries[0].role.as_deref(), Some("tier-1-support"));
    assert!(second.entries[0].scope_grew);
}
