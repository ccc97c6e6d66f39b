//! Skill revisions over MCP: a curator agent, through the gateway and the built-in
//! in-process curation upstream, reads feedback, records a cited pattern and proposes a
//! revision; a bad citation is refused and stores nothing.

mod common;

use common::{Server, call, init, learn, platform};
use serde_json::{Value, json};
use skillgate_core::store::Store;
use skillgate_core::store::revisions::{CandidateStatus, Proposer};

async fn store(server: &Server) -> Store {
    Store::open(&server.database_url())
        .await
        .expect("the server's database opens")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_curator_agent_reads_feedback_adds_a_cited_pattern_and_proposes_a_revision() {
    let server = Server::start();

    // A support agent uses refund-handling and rates it.
    let support = server.connect(&server.support_key).await;
    let (support_session, _) = init(&support).await;
    assert!(
        !learn(&support, &support_session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let feedback = platform(
        &support,
        "feedback_skill",
        json!({"skill": "refund-handling", "rating": 2, "session_id": support_session,
               "comment": "It never says to confirm the order id before refunding."}),
    )
    .await;
    assert!(!feedback.is_error, "{}", feedback.text);
    let feedback_id = feedback.structured["feedback_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(feedback.text.contains(&feedback_id), "{}", feedback.text);

    // The curator learns its role through the same router as every other role.
    let curator_key = server.create_key("curator-bot", "curation");
    let curator = server.connect(&curator_key).await;
    let (session, catalog) = init(&curator).await;
    assert!(catalog.text.contains("skill-curator"), "{}", catalog.text);
    let learned = learn(&curator, &session, "/roles/skill-curator").await;
    assert!(!learned.is_error, "{}", learned.text);
    assert!(
        learned.text.contains("propose_skill_revision"),
        "{}",
        learned.text
    );

    let listed = call(
        &curator,
        &session,
        "list_skill_feedback",
        json!({"skill": "refund-handling"}),
    )
    .await;
    assert!(!listed.is_error, "{}", listed.text);
    let items = listed.structured["feedback"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{:?}", listed.structured);
    assert_eq!(items[0]["feedback_id"], json!(feedback_id));
    assert_eq!(items[0]["session_id"], json!(support_session));

    let skill = call(
        &curator,
        &session,
        "get_skill",
        json!({"skill": "refund-handling"}),
    )
    .await;
    assert_eq!(skill.structured["version"], 1, "{}", skill.text);
    let instructions = skill.structured["instructions"]
        .as_str()
        .unwrap()
        .to_owned();

    let pattern = call(
        &curator,
        &session,
        "add_wiki_pattern",
        json!({"skill": "refund-handling", "name": "confirm-order-id",
               "content": "Read the order id back to the customer before any refund.",
               "sources": [feedback_id]}),
    )
    .await;
    assert!(!pattern.is_error, "{}", pattern.text);
    let pattern_id = pattern.structured["pattern_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let store = store(&server).await;
    let proposal = |sources: Value| {
        json!({
            "skill": "refund-handling", "base_version": 1,
            "instructions": format!("{instructions}\n\nRead the order id back to the customer before refunding."),
            "note": "Agents refunded the wrong order; the pattern says to confirm the id.",
            "sources": sources,
            "evidence": {"direction": "maximize", "min_improvement": 0.05,
                         "incumbent_score": 0.70, "candidate_score": 0.80,
                         "tasks": [{"id": "wrong-order", "incumbent": 0, "candidate": 1}]},
        })
    };

    let refused = call(
        &curator,
        &session,
        "propose_skill_revision",
        proposal(json!([feedback_id, "fb_made_up"])),
    )
    .await;
    assert!(refused.is_error, "{}", refused.text);
    assert!(
        refused
            .text
            .contains("cite existing feedback, session or pattern IDs"),
        "{}",
        refused.text
    );
    assert!(refused.text.contains("fb_made_up"), "{}", refused.text);
    assert!(store.list_candidates(None, None).await.unwrap().is_empty());

    let proposed = call(
        &curator,
        &session,
        "propose_skill_revision",
        proposal(json!([feedback_id, pattern_id, support_session])),
    )
    .await;
    assert!(!proposed.is_error, "{}", proposed.text);
    assert_eq!(
        proposed.structured["verdict"], "ACCEPT",
        "{}",
        proposed.text
    );
    let candidate_id = proposed.structured["candidate_id"].as_str().unwrap();

    let stored = store
        .list_candidates(Some(CandidateStatus::Pending), Some("refund-handling"))
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id, candidate_id);
    assert_eq!(stored[0].proposer, Proposer::Agent("curator-bot".into()));
    assert_eq!(
        stored[0].sources,
        [feedback_id.as_str(), &pattern_id, &support_session]
    );
    let summary = stored[0].verdict_explanation["summary"].as_str().unwrap();
    assert!(
        summary.contains("0.8 − 0.7 = 0.1 > min_improvement 0.05"),
        "{summary}"
    );

    // The proposal changed nothing an agent learns until a human approves it.
    let relearned = learn(&support, &support_session, "/refund-handling").await;
    assert!(
        !relearned.text.contains("Read the order id back"),
        "{}",
        relearned.text
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_support_agent_cannot_reach_the_curator_tools() {
    let server = Server::start();
    let support = server.connect(&server.support_key).await;
    let (session, _) = init(&support).await;
    let denied = learn(&support, &session, "/roles/skill-curator").await;
    assert!(denied.is_error);
    assert!(denied.text.starts_with("ACCESS DENIED"), "{}", denied.text);
    let call = call(
        &support,
        &session,
        "list_skill_feedback",
        json!({"skill": "refund-handling"}),
    )
    .await;
    assert_eq!(call.code(), "ACCESS_DENIED", "{}", call.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_api_takes_proposals_only_from_keys_whose_scope_includes_the_curator_role() {
    let server = Server::start();
    let human = store(&server).await;
    let fb = skillgate_core::revisions::Revisions::new(
        human.clone(),
        std::sync::Arc::new(skillgate_core::policy::CatalogHandle::new(
            human.compiled_catalog().await.unwrap(),
        )),
        skillgate_core::audit::AuditLog::new(human.clone()),
    )
    .add_human_feedback(
        "customer-lookup",
        2,
        "Say which id format you need.",
        false,
        "rita",
    )
    .await
    .unwrap();
    let url = format!("{}/api/v1/skills/customer-lookup/candidates", server.base);
    let body = |sources: Value| {
        json!({"base_version": 1, "instructions": "# Customer lookup\n\nAsk for the C-1234 id.",
               "note": "Agents guessed id formats.", "sources": sources,
               "evidence": {"pairs": [{"case_id": "id-format", "verdict": "better"}]}})
    };
    let http = reqwest::Client::new();
    let curator = server.create_key("curator-api", "curation");

    let anonymous = http
        .post(&url)
        .json(&body(json!([fb])))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let support = http
        .post(&url)
        .bearer_auth(&server.support_key)
        .json(&body(json!([fb])))
        .send()
        .await
        .unwrap();
    assert_eq!(support.status(), 403);
    let bad = http
        .post(&url)
        .bearer_auth(&curator)
        .json(&body(json!(["sess_nope"])))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    let message: Value = bad.json().await.unwrap();
    assert!(
        message["message"]
            .as_str()
            .unwrap()
            .starts_with("cite existing feedback, session or pattern IDs"),
        "{message}"
    );
    assert!(human.list_candidates(None, None).await.unwrap().is_empty());

    let created = http
        .post(&url)
        .bearer_auth(&curator)
        .json(&body(json!([fb])))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["verdict"], "ACCEPT", "{created}");
    let stored = human
        .list_candidates(None, Some("customer-lookup"))
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].proposer, Proposer::Agent("curator-api".into()));
}
