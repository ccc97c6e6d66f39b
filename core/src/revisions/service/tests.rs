use super::*;
use crate::audit::EventKind;
use crate::revisions::bundle::Bundle;
use crate::store::revisions::Proposer;
use crate::store::test_store;
use serde_json::{Value, json};

async fn service() -> Revisions {
    let store = test_store().await;
    assert!(store.seed_demo("/usr/bin/skillgate").await.unwrap());
    Revisions::new(Arc::new(AdminService::open(store).await.unwrap()))
}

async fn feedback(revisions: &Revisions, requirement: bool) -> String {
    revisions
        .add_human_feedback(
            "refund-handling",
            3,
            "Confirm the order id first.",
            requirement,
            "rita",
        )
        .await
        .unwrap()
}

fn proposal(sources: Vec<String>, evidence: Value) -> Proposal {
    Proposal {
        skill: "refund-handling".into(),
        base_version: 1,
        description: None,
        instructions: "# Refunds\n\nConfirm the order id, then check eligibility.".into(),
        note: "Wrong orders were refunded.".into(),
        sources,
        evidence,
        ..Proposal::default()
    }
}

async fn admin_actions(revisions: &Revisions) -> Vec<String> {
    let store = revisions.store();
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT payload FROM audit_events WHERE kind = $1 ORDER BY seq")
            .bind(EventKind::AdminChange.as_str())
            .fetch_all(store.pool())
            .await
            .unwrap();
    rows.iter()
        .map(|p| {
            serde_json::from_str::<Value>(p).unwrap()["action"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn approval_makes_the_candidate_the_current_version_and_swaps_the_catalog() {
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    let candidate = revisions
        .propose(
            proposal(
                vec![fb],
                json!({"pairs": [{"case_id": "c1", "verdict": "better"}]}),
            ),
            Proposer::User("paula".into()),
        )
        .await
        .unwrap();
    assert_eq!(candidate.verdict, "ACCEPT");
    let version = revisions
        .approve(&candidate.id, "rita", "Matches the policy.")
        .await
        .unwrap();
    assert_eq!(version.version, 2);
    let served = revisions.admin.live();
    let skill = served.catalog().skill("refund-handling").unwrap();
    assert_eq!(skill.version, 2);
    assert!(skill.skill.instructions.contains("Confirm the order id"));
    let stored = revisions.candidate(&candidate.id).await.unwrap().candidate;
    assert_eq!(
        (
            stored.status,
            stored.approved_version,
            stored.decided_by.as_deref()
        ),
        (CandidateStatus::Approved, Some(2), Some("rita"))
    );
    assert!(matches!(
        revisions
            .reject(&candidate.id, "rita", "changed my mind")
            .await,
        Err(RevisionError::AlreadyDecided("approved"))
    ));
    let actions = admin_actions(&revisions).await;
    assert!(
        actions.ends_with(&[
            "skill_candidate.propose".into(),
            "skill_candidate.approve".into()
        ]),
        "{actions:?}"
    );
}

#[tokio::test]
async fn a_console_user_cannot_decide_what_they_proposed_through_try_it() {
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    let candidate = revisions
        .propose(
            proposal(vec![fb], Value::Null),
            Proposer::Agent(crate::gateway::console_actor("paula")),
        )
        .await
        .unwrap();
    assert!(matches!(
        revisions.approve(&candidate.id, "paula", "mine").await,
        Err(RevisionError::OwnProposal)
    ));
    revisions
        .reject(&candidate.id, "rita", "Not yet.")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_proposer_cannot_decide_their_own_candidate_and_a_reason_is_required() {
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    let candidate = revisions
        .propose(
            proposal(vec![fb], Value::Null),
            Proposer::User("paula".into()),
        )
        .await
        .unwrap();
    assert_eq!(candidate.verdict, "UNEVALUATED");
    assert!(matches!(
        revisions.approve(&candidate.id, "paula", "mine").await,
        Err(RevisionError::OwnProposal)
    ));
    assert!(matches!(
        revisions.reject(&candidate.id, "paula", "mine").await,
        Err(RevisionError::OwnProposal)
    ));
    assert!(matches!(
        revisions.reject(&candidate.id, "rita", "  ").await,
        Err(RevisionError::ReasonRequired)
    ));
    revisions
        .reject(&candidate.id, "rita", "No evidence.")
        .await
        .unwrap();
    assert_eq!(
        revisions
            .get_skill("refund-handling", None)
            .await
            .unwrap()
            .version,
        1
    );
}

#[tokio::test]
async fn a_candidate_on_a_version_that_is_no_longer_current_is_stale_and_cannot_be_approved() {
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    let first = revisions
        .propose(
            proposal(vec![fb.clone()], Value::Null),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap();
    let second = revisions
        .propose(
            proposal(vec![fb], Value::Null),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap();
    revisions.approve(&first.id, "rita", "ok").await.unwrap();
    let view = revisions.candidate(&second.id).await.unwrap();
    assert!(view.is_stale());
    assert!(matches!(
        revisions.approve(&second.id, "rita", "ok").await,
        Err(RevisionError::Stale {
            base: 1,
            current: 2
        })
    ));
    assert_eq!(
        revisions
            .get_skill("refund-handling", None)
            .await
            .unwrap()
            .version,
        2
    );
}

#[tokio::test]
async fn an_admin_authored_proposal_may_cite_nothing_and_the_gate_says_the_reviewer_decides() {
    let revisions = service().await;
    let admin_authored = |sources: Vec<String>| Proposal {
        authorship: Authorship::Admin,
        ..proposal(sources, Value::Null)
    };
    let candidate = revisions
        .propose(admin_authored(Vec::new()), Proposer::User("ada".into()))
        .await
        .unwrap();
    assert_eq!(candidate.verdict, "UNEVALUATED");
    assert_eq!(
        candidate.verdict_explanation["summary"],
        json!(ADMIN_WITHOUT_EVIDENCE)
    );
    assert!(matches!(
        revisions.approve(&candidate.id, "ada", "mine").await,
        Err(RevisionError::OwnProposal)
    ));
    revisions
        .approve(&candidate.id, "rita", "Reads right.")
        .await
        .unwrap();
    // An admin's citations must still exist; everyone else must cite.
    assert!(matches!(
        revisions
            .propose(
                admin_authored(vec!["fb_nope".into()]),
                Proposer::User("ada".into())
            )
            .await,
        Err(RevisionError::Citation(CitationError::Unknown { .. }))
    ));
    assert!(matches!(
        revisions
            .propose(
                proposal(Vec::new(), Value::Null),
                Proposer::User("rita".into())
            )
            .await,
        Err(RevisionError::Citation(CitationError::None))
    ));
}

#[tokio::test]
async fn a_bad_citation_stores_nothing_and_names_the_unknown_id() {
    let revisions = service().await;
    let err = revisions
        .propose(
            proposal(vec!["fb_nope".into()], Value::Null),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cite existing feedback, session or pattern IDs"),
        "{err}"
    );
    assert!(err.to_string().contains("fb_nope"), "{err}");
    assert!(
        revisions
            .list_candidates(None, None, None, 50)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(admin_actions(&revisions).await.is_empty());
}

#[tokio::test]
async fn feedback_on_another_skill_cannot_be_cited() {
    let revisions = service().await;
    let other = revisions
        .add_human_feedback("customer-lookup", 4, "Fine.", false, "rita")
        .await
        .unwrap();
    let err = revisions
        .propose(
            proposal(vec![other], Value::Null),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RevisionError::Citation(_)), "{err}");
}

#[tokio::test]
async fn a_pending_human_requirement_holds_paired_evidence_to_the_requirement_gate() {
    let revisions = service().await;
    let req = feedback(&revisions, true).await;
    let unanswered = revisions
        .propose(
            proposal(
                vec![req.clone()],
                json!({"pairs": [{"case_id": "c1", "verdict": "better"}]}),
            ),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap();
    assert_eq!(unanswered.verdict, "REVISION_REQUIRED");
    let answered = revisions
            .propose(
                proposal(
                    vec![req.clone()],
                    json!({"pairs": [{"case_id": "c1", "verdict": "better", "requirement_checks": [
                        {"source": req, "fulfilled": true, "evidence": "step 1 confirms the order id"}]}]}),
                ),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
    assert_eq!(answered.verdict, "ACCEPT");
}

#[tokio::test]
async fn an_earlier_version_can_be_restored() {
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    let c = revisions
        .propose(
            proposal(vec![fb], Value::Null),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap();
    revisions.approve(&c.id, "rita", "ok").await.unwrap();
    revisions
        .restore("refund-handling", 1, "rita")
        .await
        .unwrap();
    assert_eq!(
        revisions
            .admin
            .live()
            .catalog()
            .skill("refund-handling")
            .unwrap()
            .version,
        1
    );
    assert!(matches!(
        revisions.restore("refund-handling", 7, "rita").await,
        Err(RevisionError::Store(StoreError::NotFound(_)))
    ));
}

#[tokio::test]
async fn patterns_need_existing_citations_and_unique_names() {
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    assert!(matches!(
        revisions
            .add_pattern("refund-handling", "p", "content", &["x".into()], "bot")
            .await,
        Err(RevisionError::Citation(_))
    ));
    let p = revisions
        .add_pattern(
            "refund-handling",
            "p",
            "content",
            std::slice::from_ref(&fb),
            "bot",
        )
        .await
        .unwrap();
    assert!(matches!(
        revisions
            .add_pattern("refund-handling", "p", "again", &[fb], "bot")
            .await,
        Err(RevisionError::Store(StoreError::Conflict(_)))
    ));
    // A pattern is itself citable.
    revisions
        .propose(
            proposal(vec![p.id], Value::Null),
            Proposer::Agent("bot".into()),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn an_uploaded_skill_md_with_provenance_becomes_a_proposal() {
    let md = "---\nname: refund-handling\ndescription: Refunds, carefully.\n---\n# Refunds\n\nConfirm first.\n";
    let p = Proposal::from_upload(
        "refund-handling",
        3,
        md,
        Some(r#"{"note": "from eval", "sources": ["fb_1"], "evidence": {"no_action": true}}"#),
    )
    .unwrap();
    assert_eq!(
        (p.base_version, p.note.as_str(), p.sources.as_slice()),
        (3, "from eval", &["fb_1".to_owned()][..])
    );
    assert_eq!(p.description.as_deref(), Some("Refunds, carefully."));
    assert!(matches!(
        Proposal::from_upload("customer-lookup", 1, md, None),
        Err(RevisionError::SkillMd(SkillMdError::WrongSkill { .. }))
    ));
    assert!(matches!(
        Proposal::from_upload("refund-handling", 1, md, Some("{not json")),
        Err(RevisionError::Invalid(_))
    ));
}

#[tokio::test]
async fn an_approved_bundle_keeps_its_skill_md_references_and_frontmatter_until_an_edit() {
    use crate::revisions::bundle::zip_archive;
    use crate::revisions::skill_md::skill_md_text;
    let revisions = service().await;
    let fb = feedback(&revisions, false).await;
    let provenance = json!({"note": "Agents refunded wrong orders.", "sources": [fb]});
    let md = "---\nname: refund-handling\ndescription: >-\n  Refunds, carefully.\nlicense: Apache-2.0\nmetadata: {owner: support}\n---\n\n# Refunds\n\nConfirm first.\n";
    let zip = zip_archive(&[
        ("refund-handling/SKILL.md".into(), md.as_bytes().to_vec()),
        (
            "refund-handling/references/refund-policy.md".into(),
            b"# Refund policy\n\n30 days.\n".to_vec(),
        ),
        (
            "refund-handling/provenance.json".into(),
            provenance.to_string().into_bytes(),
        ),
    ])
    .unwrap();
    let bundle = Bundle::read("refund-handling.zip", &zip).unwrap();
    let proposal = Proposal::from_bundle("refund-handling", 1, bundle).unwrap();
    assert_eq!(proposal.note, "Agents refunded wrong orders.");
    let candidate = revisions
        .propose(proposal, Proposer::User("paula".into()))
        .await
        .unwrap();
    let version = revisions
        .approve(&candidate.id, "rita", "Matches the policy.")
        .await
        .unwrap();
    assert_eq!(version.skill.resources[0].title, "Refund policy");
    assert_eq!(
        version.skill.frontmatter_extra.get("license"),
        Some(&json!("Apache-2.0"))
    );
    let slug = version.skill.slug.clone();
    let stored = revisions
        .store()
        .skill_md_file(&slug, version.version)
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(md));
    let served = revisions.get_skill("refund-handling", None).await.unwrap();
    assert_eq!(skill_md_text(&served.skill, stored.as_deref()), md);

    // An edit (as the console saves one) keeps the extra fields, not the old file.
    let (head, revision) = revisions.head("refund-handling").await.unwrap();
    let mut edited = head.skill.clone();
    edited.instructions = "# Refunds\n\nConfirm the order id first.".into();
    let saved = revisions
        .store()
        .update_skill(&edited, revision)
        .await
        .unwrap();
    assert_eq!(
        revisions
            .store()
            .skill_md_file(&slug, saved.value.version)
            .await
            .unwrap(),
        None
    );
    let text = skill_md_text(&saved.value.skill, None);
    assert!(text.contains("license: Apache-2.0"), "{text}");
    assert!(text.contains("Confirm the order id first."), "{text}");
}

#[tokio::test]
async fn a_bundle_for_another_skill_or_with_a_bad_provenance_is_refused_by_file() {
    let md = "---\nname: refund-handling\ndescription: Refunds.\n---\nBody.\n";
    let zip = |provenance: &str| {
        crate::revisions::bundle::zip_archive(&[
            ("SKILL.md".into(), md.as_bytes().to_vec()),
            ("provenance.json".into(), provenance.as_bytes().to_vec()),
        ])
        .unwrap()
    };
    let read = |bytes: &[u8]| Bundle::read("b.zip", bytes).unwrap();
    let plain = Bundle::read("SKILL.md", md.as_bytes()).unwrap();
    let p = Proposal::from_bundle("refund-handling", 1, plain).unwrap();
    assert_eq!(
        (p.note.as_str(), p.resources.is_none()),
        ("Uploaded as SKILL.md.", true)
    );
    let err = Proposal::from_bundle("customer-lookup", 1, read(&zip("{}"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "SKILL.md: frontmatter name is `refund-handling` but this is skill `customer-lookup`"
    );
    let err = Proposal::from_bundle(
        "refund-handling",
        1,
        read(&zip(r#"{"base_version": "two"}"#)),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "provenance.json: base_version must be a version number"
    );
    // An exported folder's provenance names the version it holds: the base.
    let p = Proposal::from_bundle("refund-handling", 4, read(&zip(r#"{"version": 2}"#))).unwrap();
    assert_eq!(p.base_version, 2);
}
