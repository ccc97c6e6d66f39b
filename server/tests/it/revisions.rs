//! Skill revisions over MCP and HTTP: a curator agent, through the gateway and the built-in
//! in-process curation upstream, reads feedback, records a cited pattern and proposes a
//! revision; a bad citation is refused and stores nothing; curator tools reach only the
//! skills of the caller's scope; proposals are rate-limited per key; the HTTP route runs
//! the same tool through the gateway and leaves the same audit trail.

use crate::common;

use common::{Client, Server, call, init, learn, platform};
use futures::TryStreamExt;
use serde_json::{Value, json};
use skillgate_core::store::Store;
use skillgate_core::store::revisions::{CandidateRecord, CandidateStatus, Proposer};

async fn store(server: &Server) -> Store {
    Store::open(&server.database_url())
        .await
        .expect("the server's database opens")
}

async fn candidates(store: &Store, skill: Option<&str>) -> Vec<CandidateRecord> {
    store
        .list_candidates(None, skill, None, 200)
        .await
        .unwrap()
        .items
}

/// Every stored audit event as `(session, kind, actor, payload)`.
async fn events(server: &Server) -> Vec<(Option<String>, String, Option<String>, Value)> {
    store(server)
        .await
        .audit_events(0, None)
        .map_ok(|row| {
            let payload = serde_json::from_str(&row.payload).unwrap();
            (row.session_id, row.kind, row.actor, payload)
        })
        .try_collect()
        .await
        .unwrap()
}

/// A support agent rates `skill` (of a role it learns) and returns the feedback id and its
/// session.
async fn rated(
    server: &Server,
    key: &str,
    role: &str,
    skill: &str,
    comment: &str,
) -> (String, String) {
    let agent = server.connect(key).await;
    let (session, _) = init(&agent).await;
    let learned = learn(&agent, &session, &format!("/roles/{role}")).await;
    assert!(!learned.is_error, "{}", learned.text);
    let reply = platform(
        &agent,
        "feedback_skill",
        json!({"skill": skill, "rating": 2, "session_id": session, "comment": comment}),
    )
    .await;
    assert!(!reply.is_error, "{}", reply.text);
    (
        reply.structured["feedback_id"].as_str().unwrap().to_owned(),
        session,
    )
}

/// A curator connection with a session that learned `skill-curator`.
async fn curator_session(server: &Server, name: &str) -> (String, Client, String) {
    let key = server.create_key(name, "curation");
    let client = server.connect(&key).await;
    let (session, _) = init(&client).await;
    let learned = learn(&client, &session, "/roles/skill-curator").await;
    assert!(!learned.is_error, "{}", learned.text);
    (key, client, session)
}

fn proposal(skill: &str, sources: Value) -> Value {
    json!({"skill": skill, "base_version": 1,
           "instructions": "# Refunds\n\nRead the order id back before refunding.",
           "note": "Agents refunded the wrong order.", "sources": sources})
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
    let items = listed.result()["feedback"].as_array().unwrap();
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
    assert_eq!(skill.result()["version"], 1, "{}", skill.text);
    let instructions = skill.result()["instructions"].as_str().unwrap().to_owned();

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
    let pattern_id = pattern.result()["pattern_id"].as_str().unwrap().to_owned();

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
    assert!(candidates(&store, None).await.is_empty());

    let proposed = call(
        &curator,
        &session,
        "propose_skill_revision",
        proposal(json!([feedback_id, pattern_id, support_session])),
    )
    .await;
    assert!(!proposed.is_error, "{}", proposed.text);
    assert_eq!(proposed.result()["verdict"], "ACCEPT", "{}", proposed.text);
    let candidate_id = proposed.result()["candidate_id"].as_str().unwrap();

    let stored = store
        .list_candidates(
            Some(CandidateStatus::Pending),
            Some("refund-handling"),
            None,
            50,
        )
        .await
        .unwrap()
        .items;
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
    let admin = skillgate_core::admin::AdminService::open(human.clone())
        .await
        .unwrap();
    let fb = skillgate_core::revisions::Revisions::new(std::sync::Arc::new(admin))
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
    assert!(candidates(&human, None).await.is_empty());

    // A skill outside the key's scope reads as one that does not exist.
    let outside = http
        .post(format!(
            "{}/api/v1/skills/billing-operations/candidates",
            server.base
        ))
        .bearer_auth(&curator)
        .json(&body(json!([fb])))
        .send()
        .await
        .unwrap();
    assert_eq!(outside.status(), 404);
    let message: Value = outside.json().await.unwrap();
    assert_eq!(
        message["message"],
        "there is no skill `billing-operations` in your scope"
    );

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
    let stored = candidates(&human, Some("customer-lookup")).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].proposer, Proposer::Agent("curator-api".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn curator_tools_refuse_a_skill_that_no_role_of_the_callers_scope_includes() {
    let server = Server::start();
    // A billing agent rates a skill of the billing scope, which the curation scope lacks.
    let billing_key = server.create_key("billing-bot", "billing");
    let (fb, _) = rated(
        &server,
        &billing_key,
        "billing-admin",
        "billing-operations",
        "PRIVATE-BILLING-REMARK",
    )
    .await;
    let (_, curator, session) = curator_session(&server, "curator-reach").await;

    let refusals = [
        ("get_skill", json!({"skill": "billing-operations"})),
        (
            "list_skill_feedback",
            json!({"skill": "billing-operations"}),
        ),
        (
            "add_wiki_pattern",
            json!({"skill": "billing-operations", "name": "p", "content": "c", "sources": [fb]}),
        ),
        (
            "propose_skill_revision",
            proposal("billing-operations", json!([fb])),
        ),
    ];
    for (tool, arguments) in refusals {
        let reply = call(&curator, &session, tool, arguments).await;
        assert!(reply.is_error, "{tool}: {}", reply.text);
        assert_eq!(
            reply.text, "there is no skill `billing-operations` in your scope",
            "{tool}"
        );
        assert_eq!(reply.result()["code"], "NOT_FOUND", "{tool}");
        for leak in [
            "view_billing_history",
            "PRIVATE-BILLING-REMARK",
            fb.as_str(),
        ] {
            assert!(!reply.text.contains(leak) && !reply.structured.to_string().contains(leak));
        }
    }
    // A skill that does not exist reads the same.
    let missing = call(
        &curator,
        &session,
        "get_skill",
        json!({"skill": "no-such-skill"}),
    )
    .await;
    assert_eq!(
        missing.text,
        "there is no skill `no-such-skill` in your scope"
    );

    let store = store(&server).await;
    assert_eq!(
        store.list_patterns("billing-operations").await.unwrap().1,
        0
    );
    assert!(
        candidates(&store, Some("billing-operations"))
            .await
            .is_empty()
    );
    // A skill of a role in scope is readable.
    let own = call(
        &curator,
        &session,
        "get_skill",
        json!({"skill": "refund-handling"}),
    )
    .await;
    assert!(!own.is_error, "{}", own.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_skill_feedback_answers_in_bounded_pages_with_a_cursor_to_the_next() {
    let server = Server::start();
    let mut ids = Vec::new();
    for n in 0..3 {
        let (fb, _) = rated(
            &server,
            &server.support_key,
            "tier-1-support",
            "refund-handling",
            &format!("remark {n}"),
        )
        .await;
        ids.push(fb);
    }
    let (_, curator, session) = curator_session(&server, "curator-pages").await;
    let first = call(
        &curator,
        &session,
        "list_skill_feedback",
        json!({"skill": "refund-handling", "limit": 2}),
    )
    .await;
    assert!(!first.is_error, "{}", first.text);
    let listed = |reply: &common::Reply| -> Vec<String> {
        reply.result()["feedback"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["feedback_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(listed(&first), ids[..2]);
    assert_eq!(first.result()["next_after"], json!(ids[1]));

    let second = call(
        &curator,
        &session,
        "list_skill_feedback",
        json!({"skill": "refund-handling", "limit": 2, "after": ids[1]}),
    )
    .await;
    assert_eq!(listed(&second), ids[2..]);
    assert_eq!(second.result()["next_after"], Value::Null);

    // The page size is bounded by the tool's schema, and a made-up cursor is refused.
    let huge = call(
        &curator,
        &session,
        "list_skill_feedback",
        json!({"skill": "refund-handling", "limit": 100000}),
    )
    .await;
    assert_eq!(huge.code(), "INVALID_ARGUMENTS", "{}", huge.text);
    let bad = call(
        &curator,
        &session,
        "list_skill_feedback",
        json!({"skill": "refund-handling", "after": "fb_made_up"}),
    )
    .await;
    assert!(bad.is_error);
    assert!(bad.text.contains("the page cursor"), "{}", bad.text);
}

/// `(kind, what)` of each event `actor` caused, without ids: the shape of its trail.
fn trail(
    events: &[(Option<String>, String, Option<String>, Value)],
    actor: &str,
) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|(_, _, who, _)| who.as_deref() == Some(actor))
        .map(|(_, kind, _, payload)| {
            let what = ["tool", "role", "action"]
                .iter()
                .find_map(|key| payload[*key].as_str())
                .unwrap_or_default();
            let status = payload["status"].as_str().unwrap_or_default();
            (kind.clone(), format!("{what} {status}").trim().to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_api_leaves_the_same_audit_events_as_the_mcp_tool() {
    let server = Server::start();
    let (fb, _) = rated(
        &server,
        &server.support_key,
        "tier-1-support",
        "refund-handling",
        "confirm the order id",
    )
    .await;

    let (_, mcp, session) = curator_session(&server, "curator-mcp").await;
    let over_mcp = call(
        &mcp,
        &session,
        "propose_skill_revision",
        proposal("refund-handling", json!([fb])),
    )
    .await;
    assert!(!over_mcp.is_error, "{}", over_mcp.text);

    let http_key = server.create_key("curator-http", "curation");
    let mut body = proposal("refund-handling", json!([fb]));
    body.as_object_mut().unwrap().remove("skill");
    let over_http = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/skills/refund-handling/candidates",
            server.base
        ))
        .bearer_auth(&http_key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(over_http.status(), 201);
    let created: Value = over_http.json().await.unwrap();
    assert_eq!(created["verdict"], over_mcp.result()["verdict"]);

    let events = events(&server).await;
    let expected: Vec<(String, String)> = [
        ("session_started", ""),
        ("learn_granted", "skill-curator"),
        ("call_allowed", "propose_skill_revision"),
        ("admin_change", "skill_candidate.propose"),
        ("call_result", "propose_skill_revision ok"),
    ]
    .iter()
    .map(|(k, w)| ((*k).to_owned(), (*w).to_owned()))
    .collect();
    assert_eq!(trail(&events, "curator-mcp"), expected);
    assert_eq!(trail(&events, "curator-http"), expected);
    // The HTTP proposal ran in a governance session of its own key, like the MCP one.
    let http_sessions: Vec<&Option<String>> = events
        .iter()
        .filter(|(_, kind, who, _)| {
            who.as_deref() == Some("curator-http") && kind != "admin_change"
        })
        .map(|(session, ..)| session)
        .collect();
    assert!(
        http_sessions
            .iter()
            .all(|s| s.is_some() && *s == http_sessions[0])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn proposals_are_rate_limited_per_key_over_mcp_and_http_and_the_refusal_is_audited() {
    let server = Server::start();
    let (fb, _) = rated(
        &server,
        &server.support_key,
        "tier-1-support",
        "refund-handling",
        "confirm the order id",
    )
    .await;
    let (key, curator, session) = curator_session(&server, "curator-loop").await;
    for n in 1..=20 {
        let reply = call(
            &curator,
            &session,
            "propose_skill_revision",
            proposal("refund-handling", json!([fb])),
        )
        .await;
        assert!(!reply.is_error, "proposal {n}: {}", reply.text);
    }
    let limited = call(
        &curator,
        &session,
        "propose_skill_revision",
        proposal("refund-handling", json!([fb])),
    )
    .await;
    assert!(limited.is_error, "{}", limited.text);
    assert!(
        limited
            .text
            .starts_with("rate limit: at most 20 skill proposals per key per hour; retry in"),
        "{}",
        limited.text
    );
    assert_eq!(limited.result()["code"], "RATE_LIMITED");

    // The HTTP route shares the key's budget.
    let mut body = proposal("refund-handling", json!([fb]));
    body.as_object_mut().unwrap().remove("skill");
    let over_http = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/skills/refund-handling/candidates",
            server.base
        ))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(over_http.status(), 429);
    let retry_after: u64 = over_http.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry_after), "{retry_after}");

    // Another curator key is not affected.
    let (_, other, other_session) = curator_session(&server, "curator-calm").await;
    let fine = call(
        &other,
        &other_session,
        "propose_skill_revision",
        proposal("refund-handling", json!([fb])),
    )
    .await;
    assert!(!fine.is_error, "{}", fine.text);

    let store = store(&server).await;
    assert_eq!(candidates(&store, Some("refund-handling")).await.len(), 21);
    let events = events(&server).await;
    let refused: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, who, payload)| {
            kind == "call_result"
                && who.as_deref() == Some("curator-loop")
                && payload["status"] == "error"
        })
        .map(|(.., payload)| payload)
        .collect();
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused
            .iter()
            .all(|p| p["error"].as_str().unwrap().starts_with("rate limit:")),
        "{refused:#?}"
    );
}
