//! `feedback_skill` through the real binary: every refusal is audited, a refusal that names
//! another key's session lands under the caller (never in the victim's session), names and
//! comments are bounded, and the per-key rate limit holds across replicas.

use crate::common;

use common::{Client, Reply, Server, init, learn, platform};
use futures::TryStreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use skillgate_core::store::Store;

/// One stored audit event, decoded for assertions.
#[derive(Debug)]
struct Event {
    session: Option<String>,
    kind: String,
    actor: Option<String>,
    payload: Value,
}

async fn events(server: &Server) -> Vec<Event> {
    let store = Store::open(&server.database_url()).await.unwrap();
    store
        .audit_events(0, None)
        .map_ok(|row| Event {
            session: row.session_id,
            kind: row.kind,
            actor: row.actor,
            payload: serde_json::from_str(&row.payload).unwrap(),
        })
        .try_collect()
        .await
        .unwrap()
}

fn denied_feedback(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| e.kind == "feedback" && e.payload["decision"] == "denied")
        .collect()
}

async fn feedback(client: &Client, arguments: Value) -> Reply {
    platform(client, "feedback_skill", arguments).await
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_refused_feedback_is_audited_in_the_callers_session_with_its_code_and_rule() {
    let server = Server::start();
    let agent = server.connect(&server.support_key).await;
    let (session, _) = init(&agent).await;

    let not_learned = feedback(
        &agent,
        json!({"skill": "refund-handling", "rating": 4, "session_id": session}),
    )
    .await;
    assert!(not_learned.is_error);
    assert_eq!(not_learned.code(), "ACCESS_DENIED", "{}", not_learned.text);

    assert!(
        !learn(&agent, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let bad_rating = feedback(
        &agent,
        json!({"skill": "refund-handling", "rating": 9, "session_id": session}),
    )
    .await;
    assert_eq!(
        bad_rating.code(),
        "INVALID_ARGUMENTS",
        "{}",
        bad_rating.text
    );
    assert!(bad_rating.text.contains("1 to 5"), "{}", bad_rating.text);

    let long_name = "refund-handling-".repeat(10);
    let too_long_skill = feedback(
        &agent,
        json!({"skill": long_name, "rating": 3, "session_id": session}),
    )
    .await;
    assert_eq!(too_long_skill.code(), "INVALID_ARGUMENTS");
    assert!(
        too_long_skill.text.contains("at most 64 characters")
            && too_long_skill.text.contains("160"),
        "{}",
        too_long_skill.text
    );

    let too_long_comment = feedback(
        &agent,
        json!({"skill": "refund-handling", "rating": 3, "session_id": session,
               "comment": "x".repeat(4001)}),
    )
    .await;
    assert_eq!(too_long_comment.code(), "INVALID_ARGUMENTS");
    assert!(
        too_long_comment.text.contains("at most 4000 characters"),
        "{}",
        too_long_comment.text
    );

    let events = events(&server).await;
    let denied = denied_feedback(&events);
    assert_eq!(denied.len(), 4, "{events:#?}");
    for event in &denied {
        assert_eq!(
            event.session.as_deref(),
            Some(session.as_str()),
            "{event:?}"
        );
        assert_eq!(event.actor.as_deref(), Some("demo-support"), "{event:?}");
        assert!(event.payload["rule"].as_str().is_some(), "{event:?}");
        assert!(event.payload.get("named_session_digest").is_none());
    }
    let codes: Vec<&str> = denied
        .iter()
        .map(|e| e.payload["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "ACCESS_DENIED",
            "INVALID_ARGUMENTS",
            "INVALID_ARGUMENTS",
            "INVALID_ARGUMENTS"
        ]
    );
    // The over-long name is kept as a digest, not stored in full.
    assert_eq!(
        denied[2].payload["skill_sha256"],
        json!(sha256_hex(&long_name))
    );
    assert!(denied[2].payload.get("skill").is_none());
    // Nothing was recorded as feedback.
    let store = Store::open(&server.database_url()).await.unwrap();
    assert_eq!(store.count_feedback("refund-handling").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_naming_another_keys_session_is_audited_under_the_caller_and_not_in_that_session()
{
    let server = Server::start();
    let victim = server.connect(&server.support_key).await;
    let (victim_session, _) = init(&victim).await;
    assert!(
        !learn(&victim, &victim_session, "/roles/tier-1-support")
            .await
            .is_error
    );

    let intruder_key = server.create_key("intruder", "support");
    let intruder = server.connect(&intruder_key).await;
    let refused = feedback(
        &intruder,
        json!({"skill": "refund-handling", "rating": 1, "session_id": victim_session}),
    )
    .await;
    assert!(refused.is_error);
    assert_eq!(refused.code(), "ACCESS_DENIED", "{}", refused.text);
    // Unknown, expired and foreign sessions read alike.
    let unknown = feedback(
        &intruder,
        json!({"skill": "refund-handling", "rating": 1, "session_id": "ses_does_not_exist"}),
    )
    .await;
    assert_eq!(unknown.text, refused.text);
    // No session at all: no id to digest.
    let none = feedback(&intruder, json!({"skill": "refund-handling", "rating": 1})).await;
    assert_eq!(none.code(), "ACCESS_DENIED");

    let events = events(&server).await;
    assert!(
        events
            .iter()
            .filter(|e| e.session.as_deref() == Some(victim_session.as_str()))
            .all(|e| e.actor.as_deref() == Some("demo-support")),
        "the intruder's refusal landed in the victim's session: {events:#?}"
    );
    let intruders: Vec<&Event> = denied_feedback(&events)
        .into_iter()
        .filter(|e| e.actor.as_deref() == Some("intruder"))
        .collect();
    assert_eq!(intruders.len(), 3, "{events:#?}");
    assert!(intruders.iter().all(|e| e.session.is_none()));
    assert_eq!(
        intruders[0].payload["named_session_digest"],
        json!(sha256_hex(&victim_session))
    );
    assert_eq!(
        intruders[1].payload["named_session_digest"],
        json!(sha256_hex("ses_does_not_exist"))
    );
    assert!(intruders[2].payload.get("named_session_digest").is_none());
    assert!(
        !events
            .iter()
            .any(|e| e.payload.to_string().contains(&victim_session)
                && e.actor.as_deref() == Some("intruder")),
        "the victim's session id is stored in clear under the intruder"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_feedback_rate_limit_refuses_the_sixty_first_call_across_replicas_and_audits_it() {
    let server = Server::start();
    let replica = server.replica();
    let first = server.connect(&server.support_key).await;
    let second = replica.connect(&server.support_key).await;
    let (session, _) = init(&first).await;
    assert!(
        !learn(&first, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let rate =
        |rating: i64| json!({"skill": "refund-handling", "rating": rating, "session_id": session});

    // Sixty calls split over two processes sharing one database.
    for n in 0..60 {
        let client = if n % 2 == 0 { &first } else { &second };
        let reply = feedback(client, rate(1 + n % 5)).await;
        assert!(!reply.is_error, "call {}: {}", n + 1, reply.text);
    }
    let limited = feedback(&second, rate(5)).await;
    assert!(limited.is_error, "{}", limited.text);
    assert_eq!(limited.code(), "GOVERNANCE_VIOLATION", "{}", limited.text);
    assert!(
        limited
            .text
            .contains("rate limit: at most 60 `feedback_skill` calls per key per minute; retry in"),
        "{}",
        limited.text
    );
    let retry = limited.structured["retry_after_secs"].as_u64().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");

    // Another key has its own budget.
    let other_key = server.create_key("other-support", "support");
    let other = server.connect(&other_key).await;
    let (other_session, _) = init(&other).await;
    learn(&other, &other_session, "/roles/tier-1-support").await;
    let allowed = feedback(
        &other,
        json!({"skill": "refund-handling", "rating": 4, "session_id": other_session}),
    )
    .await;
    assert!(!allowed.is_error, "{}", allowed.text);

    let store = Store::open(&server.database_url()).await.unwrap();
    assert_eq!(store.count_feedback("refund-handling").await.unwrap(), 61);
    let events = events(&server).await;
    let denied = denied_feedback(&events);
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denied[0].session.as_deref(), Some(session.as_str()));
    assert_eq!(denied[0].payload["code"], "GOVERNANCE_VIOLATION");
    assert!(
        denied[0].payload["rule"]
            .as_str()
            .unwrap()
            .starts_with("rate limit:")
    );
}
