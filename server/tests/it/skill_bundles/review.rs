//! Who may approve a skill that arrived as an upload: an admin's upload is a candidate that
//! only another reviewer may approve, a zip without provenance still needs an agent's
//! citations, oversized frontmatter or zips are refused naming their limit, and the
//! operator's command-line import is decided in the console like any other.

use super::*;

/// The URL of the approve/reject form of `candidate`, as a reviewer who may decide it sees it.
async fn decision_url(server: &Server, reviewer: &Browser, candidate: &str) -> String {
    let (status, html) = page(
        server,
        &reviewer.cookie,
        &format!("/candidates/{candidate}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    action(&html, "decide_candidate")
}

/// An approval of `candidate` posted to `url` as `browser`: the server function's status
/// and answer, whatever they are.
async fn decide(
    server: &Server,
    browser: &Browser,
    url: &str,
    candidate: &str,
) -> (StatusCode, String) {
    fetch_post(
        server,
        browser,
        url,
        &[
            ("id", candidate),
            ("decision", "approve"),
            ("reason", "Reads right."),
        ],
    )
    .await
}

#[tokio::test]
async fn an_admin_uploads_a_plain_skill_md_as_a_candidate_that_only_another_reviewer_may_approve() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let admin = sign_in_admin(&server).await;
    let md = skill_md("admin");

    // A reviewer's upload still cites sources: refused, nothing recorded.
    let response = upload(&server, &rita, Some(&rita.token), "SKILL.md", md.as_bytes()).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let (_, html) = page(&server, &rita.cookie, &format!("/skills/{SKILL}")).await;
    assert!(
        html.contains("cite existing feedback, session or pattern IDs: the proposal cites none"),
        "{html}"
    );

    // The admin's plain SKILL.md, citing nothing, is a candidate pending review.
    let response = upload(
        &server,
        &admin,
        Some(&admin.token),
        "SKILL.md",
        md.as_bytes(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let (_, html) = page(&server, &admin.cookie, &format!("/skills/{SKILL}")).await;
    assert!(
        html.contains(
            "recorded from SKILL.md with verdict UNEVALUATED; another reviewer decides it."
        ),
        "{html}"
    );
    let candidate = candidate_in(&html);

    // The gate says honestly that it had nothing to evaluate; the admin cannot approve it.
    let (_, detail) = page(&server, &admin.cookie, &format!("/candidates/{candidate}")).await;
    assert!(
        detail.contains(skillgate_core::revisions::ADMIN_WITHOUT_EVIDENCE),
        "{detail}"
    );
    assert!(detail.contains("You proposed this candidate"), "{detail}");
    let url = decision_url(&server, &rita, &candidate).await;
    let (status, answer) = decide(&server, &admin, &url, &candidate).await;
    assert_ne!(status, StatusCode::OK, "{answer}");
    assert!(answer.contains("someone else must decide it"), "{answer}");

    // Another reviewer approves it, and the skill serves the uploaded file.
    let (status, answer) = decide(&server, &rita, &url, &candidate).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(
        answer.contains("version 2 of refund-handling is now current"),
        "{answer}"
    );
    let files = unzip(
        &export_zip(&server, Some(&rita.cookie), 2)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    assert_eq!(files[0].1, md.as_bytes());

    // Pasted instead of uploaded, with an empty provenance: the same for an admin.
    let (_, html) = page(&server, &admin.cookie, &format!("/skills/{SKILL}")).await;
    let url = action(&html, "upload_skill_md");
    let pasted = server_fn(
        &server,
        &admin,
        &url,
        &[
            ("skill", SKILL),
            ("skill_md", &skill_md("pasted")),
            ("provenance", ""),
        ],
    )
    .await;
    assert!(
        pasted.contains("recorded with verdict UNEVALUATED"),
        "{pasted}"
    );

    // The proposal is audited as admin-authored.
    let audit = server.cli(&["audit", "export"]);
    let events = String::from_utf8_lossy(&audit.stdout);
    let proposed: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("skill_candidate.propose") && l.contains(&candidate))
        .collect();
    assert_eq!(proposed.len(), 1, "{events}");
    assert!(
        proposed[0].contains("\"admin_authored\":true"),
        "{}",
        proposed[0]
    );
}

#[tokio::test]
async fn an_admin_zip_without_provenance_is_a_candidate_but_an_agent_must_still_cite() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let md = skill_md("zip-admin");
    let bundle = zip_of(&[
        ("refund-handling/SKILL.md", md.as_bytes()),
        (
            "refund-handling/references/refund-policy.md",
            POLICY.as_bytes(),
        ),
    ]);
    let response = upload(
        &server,
        &admin,
        Some(&admin.token),
        "refund-handling.zip",
        &bundle,
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let (_, html) = page(&server, &admin.cookie, &format!("/skills/{SKILL}")).await;
    assert!(
        html.contains(
            "recorded from refund-handling.zip with verdict UNEVALUATED; another reviewer decides it."
        ),
        "{html}"
    );
    let section = candidates_section(&server, &admin).await;
    assert!(section.contains(&candidate_in(&html)), "{section}");

    // A curator agent proposing the same change without sources is refused.
    let key = server.create_key("curator", "curation");
    let curator = server.connect(&key).await;
    let (session, _) = common::init(&curator).await;
    let learned = common::learn(&curator, &session, "/roles/skill-curator").await;
    assert!(!learned.is_error, "{}", learned.text);
    let refused = common::call(
        &curator,
        &session,
        "propose_skill_revision",
        json!({"skill": SKILL, "base_version": 1,
               "instructions": "# Refunds\n\nRead the order id back first.",
               "note": "Uploaded by an agent.", "sources": []}),
    )
    .await;
    assert!(refused.is_error, "{}", refused.text);
    assert!(
        refused
            .text
            .contains("cite existing feedback, session or pattern IDs: the proposal cites none"),
        "{}",
        refused.text
    );
    let audit = server.cli(&["audit", "export"]);
    let events = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(
        events
            .lines()
            .filter(|l| l.contains("skill_candidate.propose"))
            .count(),
        1,
        "{events}"
    );
}

#[tokio::test]
async fn an_oversized_frontmatter_skill_md_or_zip_is_refused_naming_its_limit() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let md = skill_md("big");
    let fat_front = md.replacen(
        "---\n",
        &format!("---\nnotes: \"{}\"\n", "x".repeat(70 * 1024)),
        1,
    );
    let long_md = format!("{md}{}", "y".repeat(300 * 1024));
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "SKILL.md",
            fat_front.clone().into_bytes(),
            "SKILL.md: frontmatter is more than 65536 bytes; at most 65536 bytes (64 KiB) are accepted"
                .to_owned(),
        ),
        (
            "SKILL.md",
            long_md.clone().into_bytes(),
            format!(
                "SKILL.md: is {} bytes; a SKILL.md may be at most 262144 bytes (256 KiB)",
                long_md.len()
            ),
        ),
        (
            "bundle.zip",
            zip_of(&[("refund-handling/SKILL.md", long_md.as_bytes())]),
            "refund-handling/SKILL.md: unpacks to more than 262144 bytes; a SKILL.md may be at most 262144 bytes (256 KiB)"
                .to_owned(),
        ),
        (
            "bundle.zip",
            zip_of(&[("refund-handling/SKILL.md", fat_front.as_bytes())]),
            "refund-handling/SKILL.md: frontmatter is more than 65536 bytes; at most 65536 bytes (64 KiB) are accepted"
                .to_owned(),
        ),
        (
            "bundle.zip",
            vec![b'P'; 3 * 1024 * 1024],
            "The upload is larger than 2097152 bytes (2 MiB); nothing was recorded.".to_owned(),
        ),
    ];
    for (name, bytes, expected) in cases {
        let response = upload(&server, &admin, Some(&admin.token), name, &bytes).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{expected}");
        let (_, html) = page(&server, &admin.cookie, &format!("/skills/{SKILL}")).await;
        assert!(
            html.contains(&format!("class=\"notice error\">{expected}")),
            "{expected}: {html}"
        );
    }
    let section = candidates_section(&server, &admin).await;
    assert!(
        section.contains("No candidates for this skill."),
        "{section}"
    );

    // The command line refuses the same, and a file too large before reading it.
    let dir = server.dir().to_owned();
    let fat = dir.join("SKILL.md");
    std::fs::write(&fat, &fat_front).unwrap();
    let refused = server.cli(&["skill", "import", fat.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("at most 65536 bytes (64 KiB)"),
        "{refused:?}"
    );
    let huge = dir.join("huge.zip");
    std::fs::write(&huge, vec![b'P'; 3 * 1024 * 1024]).unwrap();
    let refused = server.cli(&["skill", "import", huge.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("the file is 3145728 bytes; at most 2097152 bytes (2 MiB) are accepted"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn the_operator_imports_a_plain_skill_md_that_a_console_reviewer_then_decides() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let admin = sign_in_admin(&server).await;
    let dir = server.dir().to_owned();
    let plain = dir.join("SKILL.md");
    std::fs::write(&plain, skill_md("operator")).unwrap();

    let imported = server.cli(&["skill", "import", plain.to_str().unwrap()]);
    assert!(imported.status.success(), "{imported:?}");
    let stdout = String::from_utf8_lossy(&imported.stdout);
    assert!(
        stdout.contains("recorded with verdict UNEVALUATED"),
        "{stdout}"
    );
    let operator = candidate_in(&format!(
        "Candidate {}",
        &stdout[stdout.find("cand_").unwrap()..]
    ));
    // As the console admin: sources optional, and then not theirs to decide.
    let as_admin = server.cli(&["skill", "import", plain.to_str().unwrap(), "--as", "admin"]);
    assert!(as_admin.status.success(), "{as_admin:?}");
    let stdout = String::from_utf8_lossy(&as_admin.stdout);
    let by_admin = candidate_in(&format!(
        "Candidate {}",
        &stdout[stdout.find("cand_").unwrap()..]
    ));
    let url = decision_url(&server, &rita, &by_admin).await;
    let (status, answer) = decide(&server, &admin, &url, &by_admin).await;
    assert_ne!(status, StatusCode::OK, "{answer}");
    assert!(answer.contains("someone else must decide it"), "{answer}");

    let url = decision_url(&server, &rita, &operator).await;
    let (status, answer) = decide(&server, &rita, &url, &operator).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // A skill that does not exist yet is not created by an upload: the refusal says how.
    let other = dir.join("new-skill.md");
    std::fs::write(
        &other,
        "---\nname: brand-new-skill\ndescription: Something new.\n---\n\nDo it.\n",
    )
    .unwrap();
    let refused = server.cli(&["skill", "import", other.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains(
            "there is no skill `brand-new-skill`: an upload proposes a new version of an existing skill"
        ),
        "{refused:?}"
    );
}
