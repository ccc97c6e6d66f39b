//! The MCP Skills extension (SEP-2640) through the real binary and rmcp's client: a key sees
//! and reads only the skills of the roles its scope allows, by every method the extension
//! has; reads are audited with the version served and refusals as denied learns; and
//! reading a skill unlocks none of its tools.

use crate::common;

use common::{Client, Server, call, init};
use rmcp::model::{
    ErrorCode, GetSkillRequestParams, PaginatedRequestParams, ReadResourceDirectoryRequestParams,
    ReadResourceRequestParams, ResourceContents, SkillResources,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

const ADMIN_SKILL: &str = "skill://system-admin/account-administration/SKILL.md";
const ADMIN_FOLDER: &str = "skill://system-admin/account-administration";
const REFUND_SKILL: &str = "skill://tier-1-support/refund-handling/SKILL.md";

fn invalid_params(result: Result<impl std::fmt::Debug, ServiceError>, what: &str) {
    match result {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{what}: {error:?}")
        }
        other => panic!("{what}: expected -32602, got {other:?}"),
    }
}

/// Every URI a client can learn of through listing: skills, their manifests, resources and
/// the directories of each listed skill.
async fn everything_listed(client: &Client) -> Vec<String> {
    let mut uris = Vec::new();
    for skill in client.list_all_skills().await.expect("skills/list") {
        uris.push(skill.uri.clone());
        if let SkillResources::Files(files) = &skill.resources {
            uris.extend(files.iter().map(|f| f.uri.clone()));
        }
        let folder = skill.uri.trim_end_matches("/SKILL.md").to_owned();
        let listing = client
            .read_resource_directory(ReadResourceDirectoryRequestParams::new(folder))
            .await
            .expect("a listed skill's folder reads");
        uris.extend(listing.resources.iter().map(|r| r.uri.clone()));
    }
    let mut cursor = None;
    loop {
        let page = client
            .list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .expect("resources/list");
        uris.extend(page.resources.iter().map(|r| r.uri.clone()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    uris
}

#[tokio::test]
async fn a_support_key_never_sees_or_reads_system_admin_skills_through_any_method() {
    let server = Server::start();
    let ops_key = server.create_key("ops-bot", "ops");
    let support = server.connect(&server.support_key).await;
    let ops = server.connect(&ops_key).await;

    // The skill exists: the ops key lists it and reads it.
    let ops_listed = everything_listed(&ops).await;
    assert!(
        ops_listed.iter().any(|u| u == ADMIN_SKILL),
        "{ops_listed:?}"
    );
    let read = ops
        .read_resource(ReadResourceRequestParams::new(ADMIN_SKILL))
        .await
        .expect("the ops key reads its own skill");
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("SKILL.md is text: {read:?}");
    };
    assert!(text.contains("name: account-administration"), "{text}");

    // The support key learns of nothing of system-admin's by listing...
    let listed = everything_listed(&support).await;
    assert!(listed.iter().any(|u| u == REFUND_SKILL), "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|u| !u.contains("system-admin") && !u.contains("account-administration")),
        "{listed:?}"
    );
    // ... and gets -32602, as for a skill that does not exist, by every direct request.
    invalid_params(
        support
            .get_skill(GetSkillRequestParams::new(ADMIN_SKILL))
            .await,
        "skills/get",
    );
    invalid_params(
        support
            .read_resource(ReadResourceRequestParams::new(ADMIN_SKILL))
            .await,
        "resources/read",
    );
    invalid_params(
        support
            .read_resource_directory(ReadResourceDirectoryRequestParams::new(ADMIN_FOLDER))
            .await,
        "resources/directory/read",
    );
    invalid_params(
        support
            .read_resource(ReadResourceRequestParams::new(
                "skill://tier-1-support/account-administration/SKILL.md",
            ))
            .await,
        "resources/read under a role of the key's own scope",
    );

    // Each refusal is audited under the support key as a denied learn of what it asked for;
    // the ops key's read is audited with the version it was served.
    let events = server.audit_events();
    let denied: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["kind"] == "learn_denied" && e["actor"] == "demo-support")
        .map(|e| {
            (
                e["payload"]["path"].as_str().unwrap_or_default(),
                e["payload"]["via"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        denied,
        [
            (ADMIN_SKILL, "skills/get"),
            (ADMIN_SKILL, "resources/read"),
            (ADMIN_FOLDER, "resources/directory/read"),
            (
                "skill://tier-1-support/account-administration/SKILL.md",
                "resources/read"
            ),
        ]
    );
    let reads: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "skill_read")
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0]["actor"], "ops-bot");
    assert_eq!(reads[0]["payload"]["uri"], ADMIN_SKILL);
    assert_eq!(reads[0]["payload"]["version"], 1);
    assert_eq!(reads[0]["session_id"], Value::Null);
}

#[tokio::test]
async fn reading_a_roles_skill_unlocks_none_of_its_tools() {
    let server = Server::start();
    let support = server.connect(&server.support_key).await;
    let read = support
        .read_resource(ReadResourceRequestParams::new(REFUND_SKILL))
        .await
        .expect("the support key reads tier-1-support's refund skill");
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("SKILL.md is text: {read:?}");
    };
    assert!(
        text.contains("`learn` with path `/roles/tier-1-support`"),
        "{text}"
    );

    let (session, _) = init(&support).await;
    let refused = call(
        &support,
        &session,
        "check_refund_eligibility",
        json!({"order_id": "O-1001"}),
    )
    .await;
    assert!(refused.is_error, "{}", refused.text);
    assert_eq!(refused.code(), "ACCESS_DENIED");
    assert!(
        server.executed("check_refund_eligibility").is_empty(),
        "nothing ran"
    );
}

#[tokio::test]
async fn a_skill_entry_matches_the_file_it_describes() {
    let server = Server::start();
    let support = server.connect(&server.support_key).await;
    let entry = support
        .get_skill(GetSkillRequestParams::new(REFUND_SKILL))
        .await
        .expect("skills/get");
    assert_eq!(entry.skill.frontmatter.name, "refund-handling");
    let SkillResources::Files(files) = &entry.skill.resources else {
        panic!("a manifest of files: {entry:?}");
    };
    for file in files {
        let read = support
            .read_resource(ReadResourceRequestParams::new(&file.uri))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", file.uri));
        let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
            panic!("text: {read:?}");
        };
        file.verify(text.as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", file.uri));
    }
    let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            REFUND_SKILL,
            "skill://tier-1-support/refund-handling/references/refund-policy.md"
        ]
    );
}
