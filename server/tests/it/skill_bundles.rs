//! Agent Skills bundles through the real binary: a reviewer uploads a zip as a multipart form
//! the way a browser without JavaScript posts it, another reviewer approves the candidate,
//! and the version exports as a zip whose SKILL.md is the uploaded file byte for byte; bad
//! bundles, missing form tokens, foreign origins and viewers are refused with nothing
//! written; `skillgate skill import|export` make the same round trip from the command line.

use crate::common;

use std::io::{Cursor, Read, Write};

use common::Server;
use common::console::{
    Browser, REVIEWER_PASSWORD, VIEWER_PASSWORD, add_user, fetch_post, http, navigation, page,
    sign_in, sign_in_admin,
};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_DISPOSITION, CONTENT_TYPE, COOKIE, HeaderValue, LOCATION};
use serde_json::{Value, json};

mod review;

const SKILL: &str = "refund-handling";

/// A SKILL.md with frontmatter beyond name and description, YAML a renderer would write
/// differently (quotes, a folded description, key order) and trailing blank lines.
fn skill_md(marker: &str) -> String {
    format!(
        "---\nname: refund-handling\nlicense: Apache-2.0\ndescription: >-\n  Issue refunds within\n  policy ({marker}).\nmetadata:\n  author: \"support team\"\n  version: '2.1'\nallowed-tools: check_refund_eligibility process_refund\n---\n\n# Refunds\n\nRead the order id back first ({marker}).\n\n"
    )
}

const POLICY: &str = "# Refund policy\n\nRefunds within 30 days of delivery.\n";

fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (path, bytes) in files {
        writer.start_file(*path, options).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut file = archive.by_index(i).unwrap();
            let mut content = Vec::new();
            file.read_to_end(&mut content).unwrap();
            (file.name().to_owned(), content)
        })
        .collect()
}

/// A multipart form body as Chromium builds it: the form token first, then the file.
/// The boundary has capitals, as browsers' do.
const BOUNDARY: &str = "----WebKitFormBoundaryQ7mZ2bTkXyZ";

fn multipart(token: Option<&str>, file_name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(token) = token {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\n{token}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"{file_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

/// The upload form posted from the skill's page without JavaScript.
async fn upload(
    server: &Server,
    browser: &Browser,
    token: Option<&str>,
    file_name: &str,
    bytes: &[u8],
) -> reqwest::Response {
    let mut headers = navigation(server, &browser.cookie, &format!("/skills/{SKILL}"));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(&format!("multipart/form-data; boundary={BOUNDARY}")).unwrap(),
    );
    http()
        .post(format!("{}/console/skills/{SKILL}/bundle", server.base))
        .headers(headers)
        .body(multipart(token, file_name, bytes))
        .send()
        .await
        .unwrap()
}

/// The URL a page's server-function form posts to (`/console/api/<name>…`).
fn action(html: &str, name: &str) -> String {
    let start = html
        .find(&format!("action=\"/console/api/{name}"))
        .unwrap_or_else(|| panic!("a form posting to {name}: {html}"))
        + "action=\"".len();
    let end = html[start..].find('"').unwrap();
    html[start..start + end].to_owned()
}

/// A server function called as the hydrated page calls it; its JSON answer.
async fn server_fn(
    server: &Server,
    browser: &Browser,
    url: &str,
    fields: &[(&str, &str)],
) -> String {
    let (status, text) = fetch_post(server, browser, url, fields).await;
    assert_eq!(status, StatusCode::OK, "{url}: {text}");
    text
}

/// Reviewer feedback on the skill, to cite: its id.
async fn feedback(server: &Server, browser: &Browser) -> String {
    let (_, html) = page(server, &browser.cookie, &format!("/skills/{SKILL}")).await;
    let url = action(&html, "add_feedback");
    let answer = server_fn(
        server,
        browser,
        &url,
        &[
            ("skill", SKILL),
            ("rating", "2"),
            ("comment", "Read the order id back."),
            ("kind", "general"),
        ],
    )
    .await;
    let at = answer.find("fb_").expect("a feedback id");
    answer[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The candidate id a notice on the skill's page names.
fn candidate_in(html: &str) -> String {
    let at = html.find("Candidate cand_").expect("a recorded candidate") + "Candidate ".len();
    html[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

async fn approve(server: &Server, browser: &Browser, candidate: &str) -> String {
    let (status, html) = page(server, &browser.cookie, &format!("/candidates/{candidate}")).await;
    assert_eq!(status, StatusCode::OK);
    let url = action(&html, "decide_candidate");
    server_fn(
        server,
        browser,
        &url,
        &[
            ("id", candidate),
            ("decision", "approve"),
            ("reason", "The policy says so."),
        ],
    )
    .await
}

async fn export_zip(server: &Server, cookie: Option<&str>, version: u32) -> reqwest::Response {
    let mut request = http().get(format!(
        "{}/console/export/skills/{SKILL}/versions/{version}.zip",
        server.base
    ));
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, cookie);
    }
    request.send().await.unwrap()
}

async fn candidates_section(server: &Server, browser: &Browser) -> String {
    let (_, html) = page(server, &browser.cookie, &format!("/skills/{SKILL}")).await;
    let start = html
        .find("id=\"skill-candidates\"")
        .expect("the candidates section");
    html[start..].to_owned()
}

#[tokio::test]
async fn a_zip_uploaded_without_javascript_is_a_candidate_and_once_approved_exports_byte_identical()
{
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let admin = sign_in_admin(&server).await;
    let fb = feedback(&server, &rita).await;
    let md = skill_md("zip");
    let provenance =
        json!({"note": "Agents refunded the wrong orders.", "sources": [fb]}).to_string();
    let bundle = zip_of(&[
        ("refund-handling/SKILL.md", md.as_bytes()),
        (
            "refund-handling/references/refund-policy.md",
            POLICY.as_bytes(),
        ),
        ("refund-handling/provenance.json", provenance.as_bytes()),
    ]);

    let response = upload(
        &server,
        &rita,
        Some(&rita.token),
        "refund-handling.zip",
        &bundle,
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        response.headers()[LOCATION],
        "/skills/refund-handling#skill-candidates"
    );
    let (_, html) = page(&server, &rita.cookie, &format!("/skills/{SKILL}")).await;
    assert!(
        html.contains("recorded from refund-handling.zip with verdict UNEVALUATED; another reviewer decides it."),
        "{html}"
    );
    let candidate = candidate_in(&html);
    // The notice is shown once.
    let (_, again) = page(&server, &rita.cookie, &format!("/skills/{SKILL}")).await;
    assert!(!again.contains("recorded from refund-handling.zip"));

    // The reviewer sees what else the upload changes besides the instructions.
    let (_, detail) = page(&server, &admin.cookie, &format!("/candidates/{candidate}")).await;
    assert!(
        detail.contains(
            "Resources (they replace the current ones): </strong>refund-policy: Refund policy"
        ),
        "{detail}"
    );
    assert!(detail.contains("\"license\": \"Apache-2.0\""), "{detail}");
    let answer = approve(&server, &admin, &candidate).await;
    assert!(
        answer.contains("version 2 of refund-handling is now current"),
        "{answer}"
    );

    // A viewer may read exports too; nobody signed out may.
    add_user(&server, "vera", "viewer", VIEWER_PASSWORD);
    let vera = sign_in(&server, "vera", VIEWER_PASSWORD).await;
    assert_eq!(
        export_zip(&server, None, 2).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let response = export_zip(&server, Some(&vera.cookie), 2).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/zip");
    assert_eq!(
        response.headers()[CONTENT_DISPOSITION],
        "attachment; filename=\"refund-handling-v2.zip\""
    );
    let files = unzip(&response.bytes().await.unwrap());
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "refund-handling/SKILL.md",
            "refund-handling/references/refund-policy.md",
            "refund-handling/provenance.json"
        ]
    );
    assert_eq!(String::from_utf8_lossy(&files[0].1), md);
    assert_eq!(files[1].1, POLICY.as_bytes());
    let exported: Value = serde_json::from_slice(&files[2].1).unwrap();
    assert_eq!(exported["version"], 2);
    assert_eq!(exported["candidate"]["id"], candidate.as_str());
    assert_eq!(exported["candidate"]["reviewer"], "admin");

    // Version 1 never came from a file: its SKILL.md is rendered, with no license.
    let v1 = unzip(
        &export_zip(&server, Some(&vera.cookie), 1)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    let v1_md = String::from_utf8(v1[0].1.clone()).unwrap();
    assert!(
        v1_md.starts_with("---\nname: refund-handling\ndescription: "),
        "{v1_md}"
    );
    assert!(!v1_md.contains("license"));
    assert_eq!(
        export_zip(&server, Some(&vera.cookie), 9).await.status(),
        StatusCode::NOT_FOUND
    );

    // An admin edits the instructions in the console: the new version keeps the extra
    // frontmatter but not the uploaded file, which no longer says what the version holds.
    let (_, edit) = page(&server, &admin.cookie, &format!("/skills/{SKILL}/edit")).await;
    let field = "name=\"revision\" value=\"";
    let at = edit.find(field).expect("the revision field") + field.len();
    let revision: String = edit[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let saved = server_fn(
        &server,
        &admin,
        "/console/api/save_skill",
        &[
            ("slug", SKILL),
            ("revision", &revision),
            ("description", "Issue refunds within policy (edited)."),
            ("instructions", "# Refunds\n\nEdited in the console."),
            ("tools[check_refund_eligibility]", "on"),
            ("tools[process_refund]", "on"),
            ("resources[0][name]", "refund-policy"),
            ("resources[0][title]", "Refund policy"),
            (
                "resources[0][content]",
                "Refunds within 30 days of delivery.",
            ),
        ],
    )
    .await;
    assert_eq!(saved, "3");
    let v3 = unzip(
        &export_zip(&server, Some(&vera.cookie), 3)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    let v3_md = String::from_utf8(v3[0].1.clone()).unwrap();
    assert_ne!(v3_md, md);
    assert!(
        v3_md.starts_with(
            "---\nname: refund-handling\ndescription: Issue refunds within policy (edited).\n"
        ),
        "{v3_md}"
    );
    assert!(v3_md.contains("license: Apache-2.0\n"), "{v3_md}");
    assert!(v3_md.contains("author: support team"), "{v3_md}");
    assert!(
        v3_md.ends_with("---\n\n# Refunds\n\nEdited in the console.\n"),
        "{v3_md}"
    );
    assert_eq!(v3[1].1, POLICY.as_bytes());
}

#[tokio::test]
async fn a_bad_bundle_is_refused_on_the_page_naming_the_file_and_field_and_nothing_is_written() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let fb = feedback(&server, &rita).await;
    let provenance = json!({"sources": [fb]}).to_string();
    let md = skill_md("bad");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            zip_of(&[
                ("SKILL.md", md.as_bytes()),
                ("references/Policy Doc.md", POLICY.as_bytes()),
                ("provenance.json", provenance.as_bytes()),
            ]),
            "references/Policy Doc.md: resource name must be 1–64 lowercase letters, digits and single hyphens",
        ),
        (
            zip_of(&[
                (
                    "refund-handling/SKILL.md",
                    md.replace(">-\n  Issue refunds within\n  policy (bad).", "\"\"")
                        .as_bytes(),
                ),
                ("refund-handling/provenance.json", provenance.as_bytes()),
            ]),
            "refund-handling/SKILL.md: frontmatter description must be 1–1024 characters (it has 0)",
        ),
        (
            zip_of(&[
                ("SKILL.md", md.as_bytes()),
                ("provenance.json", b"{\"base_version\": \"latest\"}"),
            ]),
            "provenance.json: base_version must be a version number",
        ),
        (
            zip_of(&[("SKILL.md", md.as_bytes()), ("scripts/run.sh", b"true")]),
            "unknown files in the zip: scripts/run.sh",
        ),
    ];
    for (bundle, expected) in cases {
        let response = upload(&server, &rita, Some(&rita.token), "bundle.zip", &bundle).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let (_, html) = page(&server, &rita.cookie, &format!("/skills/{SKILL}")).await;
        assert!(
            html.contains(&format!("class=\"notice error\">{expected}")),
            "{expected}: {html}"
        );
        assert!(html.contains("Nothing was recorded."));
    }
    let section = candidates_section(&server, &rita).await;
    assert!(
        section.contains("No candidates for this skill."),
        "{section}"
    );
    let audit = server.cli(&["audit", "export"]);
    assert!(audit.status.success());
    // Refusals are audited as such (`admin_refused`); no candidate was proposed.
    let events = String::from_utf8_lossy(&audit.stdout);
    assert!(
        !events
            .lines()
            .any(|l| l.contains("skill_candidate.propose") && !l.contains("admin_refused")),
        "{events}"
    );
    assert!(
        events
            .lines()
            .any(|l| l.contains("admin_refused") && l.contains("REFUSED") && l.contains("rita")),
        "each refused upload is an admin_refused event by its uploader: {events}"
    );

    let big = vec![b'#'; 3 * 1024 * 1024];
    let response = upload(&server, &rita, Some(&rita.token), "SKILL.md", &big).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let (_, html) = page(&server, &rita.cookie, &format!("/skills/{SKILL}")).await;
    assert!(
        html.contains("The upload is larger than 2097152 bytes (2 MiB); nothing was recorded."),
        "{html}"
    );
}

#[tokio::test]
async fn an_upload_without_the_form_token_from_another_origin_or_by_a_viewer_is_refused() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    add_user(&server, "vera", "viewer", VIEWER_PASSWORD);
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let md = skill_md("refused");

    let response = upload(&server, &rita, None, "SKILL.md", md.as_bytes()).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response.text().await.unwrap().contains("form token"));
    let response = upload(
        &server,
        &rita,
        Some("not-the-token"),
        "SKILL.md",
        md.as_bytes(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    let mut headers = navigation(&server, &rita.cookie, &format!("/skills/{SKILL}"));
    headers.insert("origin", HeaderValue::from_static("http://evil.example"));
    headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(&format!("multipart/form-data; boundary={BOUNDARY}")).unwrap(),
    );
    let response = http()
        .post(format!("{}/console/skills/{SKILL}/bundle", server.base))
        .headers(headers)
        .body(multipart(Some(&rita.token), "SKILL.md", md.as_bytes()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    let vera = sign_in(&server, "vera", VIEWER_PASSWORD).await;
    let response = upload(&server, &vera, Some(&vera.token), "SKILL.md", md.as_bytes()).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("needs the reviewer role")
    );
    // The viewer's refusal is on the record (the token and origin refusals happen before
    // anyone is known, in the console's guard).
    let refusals: Vec<_> = server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "admin_refused")
        .collect();
    let [refusal] = refusals.as_slice() else {
        panic!("expected one admin_refused event, got {refusals:#?}");
    };
    assert_eq!(refusal["actor"], "vera", "{refusal}");
    assert_eq!(refusal["payload"]["code"], "FORBIDDEN", "{refusal}");
    assert_eq!(refusal["payload"]["action"], "skill_candidate.propose");
    assert_eq!(refusal["payload"]["target"], format!("skill:{SKILL}"));

    let section = candidates_section(&server, &rita).await;
    assert!(
        section.contains("No candidates for this skill."),
        "{section}"
    );
}

#[tokio::test]
async fn skill_import_and_export_on_the_command_line_round_trip_a_skill_md_byte_identical() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let admin = sign_in_admin(&server).await;
    let dir = server.dir().to_owned();

    // A plain SKILL.md cites nothing: refused, clearly, with a failing exit code.
    let md = skill_md("cli");
    let plain = dir.join("SKILL.md");
    std::fs::write(&plain, &md).unwrap();
    let refused = server.cli(&["skill", "import", plain.to_str().unwrap(), "--as", "rita"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cite existing feedback"),
        "{refused:?}"
    );
    let unknown = server.cli(&["skill", "import", plain.to_str().unwrap(), "--as", "nobody"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no console user"));

    let fb = feedback(&server, &rita).await;
    let provenance = json!({"sources": [fb]}).to_string();
    let bundle = dir.join("refund-handling.zip");
    std::fs::write(
        &bundle,
        zip_of(&[
            ("SKILL.md", md.as_bytes()),
            ("references/refund-policy.md", POLICY.as_bytes()),
            ("provenance.json", provenance.as_bytes()),
        ]),
    )
    .unwrap();
    let imported = server.cli(&["skill", "import", bundle.to_str().unwrap(), "--as", "rita"]);
    assert!(imported.status.success(), "{imported:?}");
    let stdout = String::from_utf8_lossy(&imported.stdout);
    assert!(
        stdout.contains(
            "of skill `refund-handling` (on version 1) recorded with verdict UNEVALUATED"
        ),
        "{stdout}"
    );
    let candidate = candidate_in(&format!(
        "Candidate {}",
        &stdout[stdout.find("cand_").unwrap()..]
    ));

    // Proposed as rita: she cannot decide it, the admin can.
    let (_, html) = page(&server, &rita.cookie, &format!("/candidates/{candidate}")).await;
    assert!(html.contains("You proposed this candidate"), "{html}");
    approve(&server, &admin, &candidate).await;

    let out = dir.join("out.zip");
    let exported = server.cli(&["skill", "export", SKILL, "--output", out.to_str().unwrap()]);
    assert!(exported.status.success(), "{exported:?}");
    assert!(
        String::from_utf8_lossy(&exported.stdout)
            .contains("wrote version 2 of skill `refund-handling`")
    );
    let files = unzip(&std::fs::read(&out).unwrap());
    assert_eq!(files[0].0, "refund-handling/SKILL.md");
    assert_eq!(files[0].1, md.as_bytes());
    assert_eq!(files[1].1, POLICY.as_bytes());

    // The export is itself an importable bundle, and the import was audited as the
    // console's upload is.
    let stdout = server.cli(&["skill", "export", SKILL, "--version", "1", "--output", "-"]);
    assert!(stdout.status.success());
    assert_eq!(unzip(&stdout.stdout)[0].0, "refund-handling/SKILL.md");
    let missing = server.cli(&["skill", "export", SKILL, "--version", "7"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("has no version 7"));
    let audit = server.cli(&["audit", "export"]);
    let events = String::from_utf8_lossy(&audit.stdout);
    let proposed = events
        .lines()
        .filter(|l| l.contains("skill_candidate.propose") && l.contains(&candidate))
        .count();
    assert_eq!(proposed, 1, "{events}");
}
