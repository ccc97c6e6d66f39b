//! The per-key rate limit store: one statement reserves a slot, so two processes sharing a
//! database never hand out more slots than the limit; the window slides.

use std::time::Duration;

use chrono::Utc;
use skillgate_core::revisions::limits::{FEEDBACK, RateLimit, Slot};
use skillgate_core::store::Store;

const SMALL: RateLimit = RateLimit {
    action: "test_action",
    what: "test actions",
    max: 20,
    window: Duration::from_secs(60),
};

async fn two_replicas() -> (tempfile::TempDir, Store, Store) {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "limits.db");
    let first = Store::open(&url).await.unwrap();
    let second = Store::open(&url).await.unwrap();
    (dir, first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_reservations_from_two_processes_never_exceed_the_limit() {
    let (_dir, first, second) = two_replicas().await;
    let now = Utc::now();
    let tasks: Vec<_> = (0..60)
        .map(|n| {
            let store = if n % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            tokio::spawn(async move { SMALL.reserve(&store, "key:loop", now).await })
        })
        .collect();
    let mut reserved = 0;
    for task in tasks {
        if task.await.unwrap().unwrap() == Slot::Reserved {
            reserved += 1;
        }
    }
    assert_eq!(reserved, 20);
    // Other keys and other actions have their own budgets.
    assert_eq!(
        SMALL.reserve(&first, "key:calm", now).await.unwrap(),
        Slot::Reserved
    );
    assert_eq!(
        FEEDBACK.reserve(&first, "key:loop", now).await.unwrap(),
        Slot::Reserved
    );
}

#[tokio::test]
async fn the_window_slides_and_a_refusal_says_when_the_oldest_slot_frees() {
    let (_dir, store, _) = two_replicas().await;
    let start = Utc::now();
    for n in 0..20 {
        let at = start + chrono::Duration::seconds(n);
        assert_eq!(
            SMALL.reserve(&store, "key:a", at).await.unwrap(),
            Slot::Reserved
        );
    }
    let at = start + chrono::Duration::seconds(30);
    assert_eq!(
        SMALL.reserve(&store, "key:a", at).await.unwrap(),
        Slot::Refused {
            retry_in: Duration::from_secs(30)
        }
    );
    // Once the first slot is a full window old, exactly one more fits.
    let later = start + chrono::Duration::seconds(60);
    assert_eq!(
        SMALL.reserve(&store, "key:a", later).await.unwrap(),
        Slot::Reserved
    );
    assert!(matches!(
        SMALL.reserve(&store, "key:a", later).await.unwrap(),
        Slot::Refused { .. }
    ));
}
