//! Lists are paged: candidates, feedback and session timelines come in bounded pages whose
//! cursor leads to the next page, every row exactly once, against a real SQLite file.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::audit::{AuditLog, NewEvent};
use skillgate_core::compliance::Compliance;
use skillgate_core::policy::CatalogHandle;
use skillgate_core::revisions::{Proposal, RevisionError, Revisions};
use skillgate_core::store::revisions::{MAX_PAGE, NewHumanFeedback, Proposer};
use skillgate_core::store::{Store, StoreError};

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    revisions: Revisions,
    audit: AuditLog,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "paging.db");
    let store = Store::open(&url).await.unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    Fixture {
        revisions: Revisions::new(Arc::new(AdminService::new(
            store.clone(),
            audit.clone(),
            catalog,
        ))),
        audit,
        store,
        _dir: dir,
    }
}

/// `n` feedback rows on refund-handling, one microsecond apart plus one pair at the same
/// instant (the cursor must not skip or repeat rows that share a timestamp).
async fn feedback_rows(store: &Store, n: usize) -> Vec<String> {
    let start = Utc::now() - Duration::hours(1);
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("fb_{i:05}");
        let at = start + Duration::microseconds((i as i64).min(n as i64 - 2));
        store
            .insert_human_feedback(&NewHumanFeedback {
                id: &id,
                skill: "refund-handling",
                version: 1,
                rating: 3,
                comment: "ok",
                requirement: false,
                author: "rita",
                at,
            })
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

#[tokio::test]
async fn feedback_pages_hold_at_most_the_page_size_and_their_cursors_cover_every_row_once() {
    let f = fixture().await;
    let ids = feedback_rows(&f.store, 230).await;
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = f
            .revisions
            .list_feedback("refund-handling", None, after.as_deref(), 100)
            .await
            .unwrap();
        assert!(page.items.len() <= 100);
        pages += 1;
        assert!(pages <= 3, "the cursor does not advance");
        seen.extend(page.items.iter().map(|f| f.id.clone()));
        match page.next {
            Some(next) => {
                assert_eq!(Some(&next), seen.last());
                after = Some(next);
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids, "oldest first, each row once");

    // A page is never larger than MAX_PAGE, whatever is asked for.
    let capped = f
        .revisions
        .list_feedback("refund-handling", None, None, 100_000)
        .await
        .unwrap();
    assert_eq!(capped.items.len(), MAX_PAGE as usize);
    assert!(capped.next.is_some());

    // A cursor that is not feedback of this skill is a clear error.
    let bad = f
        .revisions
        .list_feedback("customer-lookup", None, Some(&ids[0]), 10)
        .await
        .unwrap_err();
    assert!(
        matches!(bad, RevisionError::Store(StoreError::NotFound(ref what)) if what.contains("page cursor")),
        "{bad}"
    );
}

#[tokio::test]
async fn candidate_pages_go_newest_first_and_the_cursor_reaches_the_oldest() {
    let f = fixture().await;
    let fb = f
        .revisions
        .add_human_feedback("refund-handling", 2, "Confirm the order.", false, "rita")
        .await
        .unwrap();
    let mut proposed = Vec::new();
    for n in 0..45 {
        let candidate = f
            .revisions
            .propose(
                Proposal {
                    skill: "refund-handling".into(),
                    base_version: 1,
                    description: None,
                    instructions: format!("# Refunds\n\nVariant {n}."),
                    note: "Wrong orders were refunded.".into(),
                    sources: vec![fb.clone()],
                    evidence: Value::Null,
                    ..Proposal::default()
                },
                Proposer::User("paula".into()),
            )
            .await
            .unwrap();
        proposed.push(candidate.id);
    }
    proposed.reverse();
    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    let mut sizes = Vec::new();
    loop {
        let page = f
            .revisions
            .list_candidates(None, Some("refund-handling"), before.as_deref(), 20)
            .await
            .unwrap();
        sizes.push(page.items.len());
        assert!(sizes.len() <= 3, "the cursor does not advance: {sizes:?}");
        seen.extend(page.items.iter().map(|c| c.id.clone()));
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, [20, 20, 5]);
    assert_eq!(seen, proposed, "newest first, each candidate once");
    assert!(matches!(
        f.revisions
            .list_candidates(None, None, Some("cand_made_up"), 20)
            .await,
        Err(RevisionError::Store(StoreError::NotFound(_)))
    ));
}

#[tokio::test]
async fn a_session_timeline_is_paged_by_seq_and_each_event_names_its_actor() {
    let f = fixture().await;
    let mut events = vec![NewEvent::session_started(
        "s-long",
        "support-bot",
        "support",
        None,
    )];
    events.push(NewEvent::learn_granted(
        "s-long",
        "support-bot",
        "/roles/tier-1-support",
        "tier-1-support",
        &Default::default(),
    ));
    for n in 0..40 {
        events.push(
            NewEvent::call_denied(
                "support-bot",
                "process_refund",
                json!({ "amount": n }),
                "ACCESS_DENIED",
                Some("not unlocked"),
            )
            .in_session("s-long"),
        );
    }
    events.push(NewEvent::learn_granted(
        "s-long",
        "support-bot",
        "/roles/retention-desk",
        "retention-desk",
        &Default::default(),
    ));
    for event in events {
        f.audit.append(event).await.unwrap();
    }
    let compliance = Compliance::new(f.store.clone());
    let mut after = None;
    let mut seqs = BTreeSet::new();
    let mut sizes = Vec::new();
    let mut grew = Vec::new();
    loop {
        let page = compliance
            .timeline_page("s-long", after, 15)
            .await
            .unwrap()
            .unwrap();
        assert!(page.integrity.is_intact());
        sizes.push(page.entries.len());
        assert!(sizes.len() <= 3, "the cursor does not advance: {sizes:?}");
        for entry in &page.entries {
            assert!(seqs.insert(entry.seq), "seq {} shown twice", entry.seq);
            assert_eq!(entry.actor.as_deref(), Some("support-bot"));
            if entry.scope_grew {
                grew.push(entry.role.clone().unwrap());
            }
        }
        assert_eq!(page.more, page.next_after.is_some());
        match page.next_after {
            Some(next) => {
                assert_eq!(next, page.entries.last().unwrap().seq);
                after = Some(next);
            }
            None => break,
        }
    }
    assert_eq!(sizes, [15, 15, 13]);
    assert_eq!(seqs.len(), 43);
    // The second role is learned on the last page; it still reads as the scope growing.
    assert_eq!(grew, ["retention-desk"]);
}
