//! The Connect page through the real binary and the demo catalog: client configurations
//! with the server's real `/mcp` URL and no secret, and the admin's try-it panel, whose
//! calls go through the gateway (upstream included) and come back exactly as an agent of
//! the scope gets them over MCP, audited as the admin's. Pages are rendered server-side;
//! forms are posted as a browser without JavaScript posts them, or as the hydrated page's
//! background fetch.

use crate::common;

use common::console::{
    Browser, REVIEWER_PASSWORD, VIEWER_PASSWORD, add_user, encode, fetch_post, http, navigation,
    page, sign_in, sign_in_admin,
};
use common::{Server, call, init, learn};
use reqwest::StatusCode;
use reqwest::header::LOCATION;
use serde_json::{Value, json};

/// Text as the page's HTML carries it, back to what was rendered.
fn unescape(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A try-it step posted as the hydrated page's background fetch: status and JSON answer.
async fn try_by_fetch(
    server: &Server,
    browser: &Browser,
    step: &str,
    fields: &[(&str, &str)],
) -> (StatusCode, Value) {
    let (status, text) = fetch_post(server, browser, &format!("/console/api/{step}"), fields).await;
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// The newest step of a transcript the server answered with.
fn last_step(transcript: &Value) -> &Value {
    transcript["steps"]
        .as_array()
        .and_then(|steps| steps.last())
        .unwrap_or_else(|| panic!("a transcript with steps: {transcript}"))
}

fn step_text(step: &Value) -> String {
    step["text"]
        .as_array()
        .expect("text blocks")
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

fn step_structured(step: &Value) -> Value {
    serde_json::from_str(step["structured"].as_str().expect("structured content")).unwrap()
}

#[tokio::test]
async fn the_page_shows_every_clients_configuration_with_the_real_mcp_url_and_no_secret() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let (status, html) = page(&server, &admin.cookie, "/connect?key=demo-support").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains(r#"href="/connect""#),
        "the navigation links the page"
    );
    assert!(
        !html.contains(&server.support_key),
        "no key secret anywhere in the page or its data"
    );
    let text = unescape(&html);
    let url = server.mcp_url();
    for (id, shape) in [
        ("claude-desktop", "\"mcp-remote\""),
        ("claude-code", "claude mcp add --transport http skillgate"),
        ("vscode", "\"type\": \"http\""),
        ("cursor", "\"headers\": {"),
        ("python", "streamablehttp_client(URL, headers=headers)"),
        ("typescript", "new StreamableHTTPClientTransport(new URL("),
    ] {
        let at = text
            .find(&format!(r#"id="{id}""#))
            .unwrap_or_else(|| panic!("a {id} configuration: {text}"));
        let section = &text[at..];
        let section = &section[..section.find("</section>").unwrap()];
        assert!(section.contains(&url), "{id} names {url}: {section}");
        assert!(section.contains("<YOUR SKILLGATE KEY>"), "{id}: {section}");
        assert!(section.contains(shape), "{id} has {shape}: {section}");
    }
    // It says whose key goes there and where a key comes from.
    let prefix = &server.support_key[..12];
    assert!(text.contains(&format!("{prefix}…")), "the key's prefix");
    assert!(
        text.contains("skillgate key create --name my-agent --scope support"),
        "{text}"
    );
    assert!(text.contains("shows each one only once"), "{text}");

    let (status, html) = page(&server, &admin.cookie, "/connect?scope=curation").await;
    assert_eq!(status, StatusCode::OK);
    assert!(unescape(&html).contains("/roles/skill-curator"), "{html}");
    let (status, html) = page(&server, &admin.cookie, "/connect?scope=no-such-scope").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("There is no scope named"), "{html}");
    assert!(!html.contains(r#"id="cursor""#), "no configuration for it");
}

#[tokio::test]
async fn an_admins_try_it_gets_exactly_what_an_agent_of_the_scope_gets_audited_as_the_admin() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;

    // The same three steps over real MCP with a key of the scope.
    let agent = server.connect(&server.support_key).await;
    let (agent_session, _) = init(&agent).await;
    let agent_learned = learn(&agent, &agent_session, "/roles/tier-1-support").await;
    assert!(!agent_learned.is_error, "{}", agent_learned.text);
    let lookup = json!({"customer_id": "C-1001"});
    let agent_called = call(&agent, &agent_session, "lookup_customer", lookup.clone()).await;
    assert!(!agent_called.is_error, "{}", agent_called.text);
    let forbidden = json!({"user_id": "U-2001", "confirm": true});
    let agent_denied = call(
        &agent,
        &agent_session,
        "delete_user_account",
        forbidden.clone(),
    )
    .await;

    let (status, started) =
        try_by_fetch(&server, &admin, "try_init", &[("scope", "support")]).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let session = started["session_id"]
        .as_str()
        .expect("a session")
        .to_owned();
    assert_ne!(session, agent_session);
    assert_eq!(started["actor"], "console:admin");
    let init_text = step_text(last_step(&started));
    assert!(
        init_text.starts_with(&format!("Session {session} started (scope: support)")),
        "{init_text}"
    );

    let (status, learned) = try_by_fetch(
        &server,
        &admin,
        "try_learn",
        &[
            ("scope", "support"),
            ("session_id", &session),
            ("path", "/roles/tier-1-support"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{learned}");
    let step = last_step(&learned);
    assert_eq!(step_text(step), agent_learned.text, "learn reads the same");
    assert_eq!(step_structured(step), agent_learned.structured);

    let arguments = lookup.to_string();
    let (_, called) = try_by_fetch(
        &server,
        &admin,
        "try_call",
        &[
            ("scope", "support"),
            ("session_id", &session),
            ("tool", "lookup_customer"),
            ("arguments", &arguments),
        ],
    )
    .await;
    let step = last_step(&called);
    assert_eq!(step["is_error"], false, "{step}");
    assert_eq!(step_text(step), agent_called.text, "the upstream's answer");
    assert_eq!(
        server.executed("lookup_customer").len(),
        2,
        "the try-it call ran on the real upstream, like the agent's"
    );

    let arguments = forbidden.to_string();
    let (_, denied) = try_by_fetch(
        &server,
        &admin,
        "try_call",
        &[
            ("scope", "support"),
            ("session_id", &session),
            ("tool", "delete_user_account"),
            ("arguments", &arguments),
        ],
    )
    .await;
    let step = last_step(&denied);
    assert_eq!(step["is_error"], true);
    let denied_text = step_text(step);
    assert!(denied_text.starts_with("ACCESS DENIED"), "{denied_text}");
    assert_eq!(denied_text, agent_denied.text);
    assert_eq!(step_structured(step), agent_denied.structured);
    assert!(server.executed("delete_user_account").is_empty());
    assert_eq!(
        denied["steps"].as_array().unwrap().len(),
        4,
        "one transcript"
    );

    // Audited as the admin's, in the try-it session; the timeline names them.
    let events = server.audit_events();
    let mine: Vec<&Value> = events
        .iter()
        .filter(|e| e["session_id"] == session.as_str())
        .collect();
    assert!(mine.len() >= 5, "{mine:?}");
    for event in &mine {
        assert_eq!(event["actor"], "console:admin", "{event}");
    }
    let kinds: Vec<&str> = mine.iter().filter_map(|e| e["kind"].as_str()).collect();
    for kind in [
        "session_started",
        "learn_granted",
        "call_allowed",
        "call_result",
        "call_denied",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let (status, timeline) = page(&server, &admin.cookie, &format!("/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        timeline.contains("<code>console:admin</code>"),
        "{timeline}"
    );
    assert!(timeline.contains("delete_user_account"), "{timeline}");

    // The agent's key cannot use the admin's session.
    let stolen = learn(&agent, &session, "/roles/retention-desk").await;
    assert_eq!(stolen.code(), "ACCESS_DENIED", "{}", stolen.text);
}

#[tokio::test]
async fn without_javascript_try_it_comes_back_to_the_page_with_the_session_in_its_forms() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let from = "/connect?scope=support";
    let posted = http()
        .post(format!("{}/console/api/try_init", server.base))
        .headers(navigation(&server, &admin.cookie, from))
        .body(encode(&[
            ("csrf_token", &admin.token),
            ("scope", "support"),
            ("task_summary", ""),
        ]))
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_redirection(), "{}", posted.status());
    let back = posted.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(back.ends_with(from), "back to the page: {back}");
    let (_, html) = page(&server, &admin.cookie, from).await;
    let text = unescape(&html);
    let at = text
        .find("started (scope: support)")
        .unwrap_or_else(|| panic!("the page shows init's answer: {text}"));
    let session = text[..at]
        .rsplit("Session ")
        .next()
        .unwrap()
        .trim()
        .to_owned();
    assert!(session.starts_with("ses_"), "{session}");
    assert!(
        html.contains(&format!(r#"name="session_id" value="{session}""#)),
        "the learn and call forms carry the session: {html}"
    );

    let posted = http()
        .post(format!("{}/console/api/try_learn", server.base))
        .headers(navigation(&server, &admin.cookie, from))
        .body(encode(&[
            ("csrf_token", &admin.token),
            ("scope", "support"),
            ("session_id", &session),
            ("path", "/roles/tier-1-support"),
        ]))
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_redirection(), "{}", posted.status());
    let (_, html) = page(&server, &admin.cookie, from).await;
    let text = unescape(&html);
    assert!(text.contains("# Role tier-1-support") || text.contains("tier-1-support"));
    assert!(
        text.contains(r#"data-tool="learn""#),
        "the learn step is shown: {text}"
    );
    assert!(text.contains("check_refund_eligibility"), "{text}");

    // A form post without the page's token is refused before anything runs.
    let before = server.audit_events().len();
    let forged = http()
        .post(format!("{}/console/api/try_init", server.base))
        .headers(navigation(&server, &admin.cookie, from))
        .body(encode(&[("scope", "support")]))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert_eq!(server.audit_events().len(), before, "nothing audited");
}

#[tokio::test]
async fn a_viewer_is_refused_try_it_and_only_the_refusals_are_audited() {
    let server = Server::start();
    add_user(&server, "vic", "viewer", VIEWER_PASSWORD);
    let vic = sign_in(&server, "vic", VIEWER_PASSWORD).await;
    let (status, html) = page(&server, &vic.cookie, "/connect").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"id="claude-code""#), "{html}");
    assert!(html.contains("needs the admin console role"), "{html}");
    assert!(!html.contains("Run init_skilder"), "no try-it form: {html}");

    let before = server.audit_events();
    let (status, body) = try_by_fetch(&server, &vic, "try_init", &[("scope", "support")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.to_string().contains("admin"), "{body}");
    let (status, _) = try_by_fetch(
        &server,
        &vic,
        "try_call",
        &[
            ("scope", "support"),
            ("session_id", "ses_x"),
            ("tool", "lookup_customer"),
            ("arguments", "{}"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Nothing ran as vic's try-it; each refused request is on the record as a refusal.
    let after = server.audit_events();
    assert!(after.iter().all(|e| e["actor"] != "console:vic"));
    let fresh = &after[before.len()..];
    assert_eq!(fresh.len(), 2, "{fresh:#?}");
    for (event, function) in fresh.iter().zip(["try_init", "try_call"]) {
        assert_eq!(event["kind"], "admin_refused", "{event}");
        assert_eq!(event["actor"], "vic", "{event}");
        assert_eq!(event["payload"]["code"], "FORBIDDEN", "{event}");
        assert_eq!(event["payload"]["action"], "console.call", "{event}");
        let target = event["payload"]["target"].as_str().unwrap_or_default();
        assert!(target.starts_with("console:/console/api/"), "{event}");
        assert!(target.contains(function), "{event}");
    }
}

#[tokio::test]
async fn bad_try_it_input_is_a_clear_error_and_runs_nothing() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let (status, body) = try_by_fetch(&server, &admin, "try_init", &[("scope", "nope")]).await;
    assert_ne!(status, StatusCode::OK);
    assert!(body.to_string().contains("Choose a scope"), "{body}");
    let (_, started) = try_by_fetch(&server, &admin, "try_init", &[("scope", "support")]).await;
    let session = started["session_id"].as_str().unwrap().to_owned();
    let before = server.audit_events().len();
    let (status, body) = try_by_fetch(
        &server,
        &admin,
        "try_call",
        &[
            ("scope", "support"),
            ("session_id", &session),
            ("tool", "lookup_customer"),
            ("arguments", "{not json"),
        ],
    )
    .await;
    assert_ne!(status, StatusCode::OK);
    assert!(body.to_string().contains("not JSON"), "{body}");
    let (status, body) = try_by_fetch(
        &server,
        &admin,
        "try_learn",
        &[
            ("scope", "support"),
            ("session_id", ""),
            ("path", "/roles/x"),
        ],
    )
    .await;
    assert_ne!(status, StatusCode::OK);
    assert!(body.to_string().contains("init_skilder first"), "{body}");
    assert_eq!(server.audit_events().len(), before, "nothing ran");
    assert!(server.executed("lookup_customer").is_empty());
}

#[tokio::test]
async fn an_admin_cannot_approve_a_hold_their_own_try_it_raised() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let admin = sign_in_admin(&server).await;
    let (_, started) = try_by_fetch(&server, &admin, "try_init", &[("scope", "support")]).await;
    let session = started["session_id"].as_str().unwrap().to_owned();
    let step = |tool: &'static str, arguments: Value| {
        let session = session.clone();
        let arguments = arguments.to_string();
        let admin = &admin;
        let server = &server;
        async move {
            let (status, t) = try_by_fetch(
                server,
                admin,
                "try_call",
                &[
                    ("scope", "support"),
                    ("session_id", &session),
                    ("tool", tool),
                    ("arguments", &arguments),
                ],
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{t}");
            last_step(&t).clone()
        }
    };
    let (_, learned) = try_by_fetch(
        &server,
        &admin,
        "try_learn",
        &[
            ("scope", "support"),
            ("session_id", &session),
            ("path", "/roles/tier-1-support"),
        ],
    )
    .await;
    assert_eq!(last_step(&learned)["is_error"], false);
    let checked = step(
        "check_refund_eligibility",
        json!({"customer_id": "C-1003", "order_id": "O-5005"}),
    )
    .await;
    assert_eq!(checked["is_error"], false, "{checked}");
    let held = step(
        "process_refund",
        json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": 300,
               "reason": "Premium support not delivered"}),
    )
    .await;
    assert!(step_text(&held).starts_with("APPROVAL REQUIRED"), "{held}");
    let hold = step_structured(&held)["hold_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, body) = try_by_fetch(
        &server,
        &admin,
        "approve_hold",
        &[("id", &hold), ("reason", "Mine, fine")],
    )
    .await;
    assert_ne!(status, StatusCode::OK);
    assert!(
        body.to_string().contains("another reviewer must decide it"),
        "{body}"
    );
    // Another reviewer may; the hold shows who raised it.
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let (_, queue) = page(&server, &rita.cookie, "/holds").await;
    assert!(queue.contains("console:admin"), "{queue}");
    let (status, body) = try_by_fetch(
        &server,
        &rita,
        "deny_hold",
        &[("id", &hold), ("reason", "Only a trial")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(server.executed("process_refund").is_empty());
}
