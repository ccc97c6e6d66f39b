//! Agents with the company's identity provider's access tokens at `/mcp` (issue #52): the
//! real binary trusting the loopback provider of `skillgate_core::issuers::testing`.

use std::sync::atomic::Ordering;

use reqwest::StatusCode;
use serde_json::{Value, json};
use skillgate_core::issuers::testing::{Provider, SigningKey, reshape, with};

use crate::common::Server;
use crate::common::openid::OpenIdProvider;

/// The resource every token here is for: the server's `--public-url` and `/mcp`.
const PUBLIC_URL: &str = "https://gateway.test";
const AUDIENCE: &str = "https://gateway.test/mcp";

/// The server, trusting `provider`: group `support-agents` → `support` of `default`, scope
/// word `mcp:refunds` → `support` of `finance`; keys fetched again at most once a minute.
/// `more` are more `serve` arguments.
fn server_trusting(provider: &Provider, dir: &tempfile::TempDir, more: &[&str]) -> Server {
    server_trusting_issuer(&provider.issuer, 60, dir, more)
}

/// The server of [`server_trusting`], trusting `issuer`, whose keys are fetched again at
/// most once per `key_refresh_seconds`.
fn server_trusting_issuer(
    issuer: &str,
    key_refresh_seconds: u64,
    dir: &tempfile::TempDir,
    more: &[&str],
) -> Server {
    let file = dir.path().join("issuers.yaml");
    std::fs::write(
        &file,
        format!(
            "issuers:
  - issuer: {issuer}
    algorithms: [ES256, EdDSA]
    key_refresh_seconds: {key_refresh_seconds}
    scopes:
      - {{ claim: groups, value: support-agents, scope: support }}
      - {{ claim: scope, value: 'mcp:refunds', scope: support, workspace: finance }}
"
        ),
    )
    .unwrap();
    let mut args = vec![
        "--trusted-issuers",
        file.to_str().unwrap(),
        "--public-url",
        PUBLIC_URL,
    ];
    args.extend_from_slice(more);
    Server::start_with(&args)
}

/// `(code, reason)` of each `mcp.token` refusal in `default`'s chain.
fn token_refusals(server: &Server) -> Vec<(String, String)> {
    server
        .workspace_audit_events("default")
        .iter()
        .filter(|e| e["kind"] == "admin_refused" && e["payload"]["action"] == "mcp.token")
        .map(|e| {
            let p = &e["payload"];
            (
                p["code"].as_str().unwrap().to_owned(),
                p["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The code of the latest `mcp.token` refusal in `default`'s chain.
fn last_refusal(server: &Server) -> Option<String> {
    token_refusals(server).pop().map(|(code, _)| code)
}

/// `/mcp`'s RFC 9728 resource metadata as the server serves it.
async fn resource_metadata(server: &Server) -> Value {
    reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        server.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap()
}

/// A POST of `initialize` with `token`: its status and its body's message.
async fn initialize(server: &Server, token: &str) -> (StatusCode, String) {
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED {
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.contains(r#"error="invalid_token", error_description=""#)
                && challenge.contains("resource_metadata="),
            "{challenge}"
        );
    }
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (
        status,
        body["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn a_token_of_a_trusted_issuer_opens_a_session_in_its_mapped_scope_as_its_subject() {
    let key = SigningKey::es256("k1");
    let provider = Provider::start(&[&key]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_trusting(&provider, &dir, &[]);

    let token = key.sign(&provider.claims_for("alice", AUDIENCE));
    for _ in 0..2 {
        let client = server.connect(&token).await;
        let (_, reply) = crate::common::init(&client).await;
        assert!(
            reply.text.contains("tier-1-support"),
            "support's roles: {}",
            reply.text
        );
        let _ = client.cancel().await;
    }
    let events = server.workspace_audit_events("default");
    let alice = format!("alice@{}", provider.issuer);
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .collect();
    assert_eq!(started.len(), 2);
    assert!(
        started
            .iter()
            .all(|e| e["actor"] == alice.as_str() && e["payload"]["scope"] == "support")
    );
    // The credential was made once, through the door, on the first token.
    let admitted: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["kind"] == "admin_change" && e["payload"]["action"] == "external_subject.admit"
        })
        .collect();
    assert_eq!(admitted.len(), 1, "{admitted:?}");
    assert_eq!(admitted[0]["actor"], alice.as_str());
    assert_eq!(provider.key_fetches(), 1);

    // Listed beside the keys, by the command line and on the console's Scopes & keys page.
    let listed = server.cli(&["key", "list"]);
    let listed = String::from_utf8(listed.stdout).unwrap();
    let (keys, external) = listed
        .split_once("agents with tokens of trusted identity providers")
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        !keys.contains(&alice) && external.contains(&alice),
        "{listed}"
    );
    let admin = crate::common::console::sign_in_admin(&server).await;
    let (_, page) = crate::common::console::page(&server, &admin.cookie, "/scopes").await;
    let section = page
        .split(r#"id="external-agents""#)
        .nth(1)
        .unwrap_or_else(|| panic!("the page lists identity provider agents: {page}"));
    assert!(section.contains(&alice), "{section}");

    // Revoked here, the subject is refused whatever the provider says.
    let revoked = server.cli(&["key", "revoke", &alice]);
    assert!(revoked.status.success(), "{revoked:?}");
    assert_eq!(
        initialize(&server, &token).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(last_refusal(&server).as_deref(), Some("revoked"));

    // The resource metadata names the issuer beside Skillgate's own server.
    let metadata = resource_metadata(&server).await;
    assert_eq!(metadata["resource"], AUDIENCE);
    assert_eq!(
        metadata["authorization_servers"],
        json!([PUBLIC_URL, provider.issuer])
    );
}

#[tokio::test]
async fn a_token_whose_claims_map_into_a_workspace_is_served_by_that_workspace() {
    let key = SigningKey::ed25519("k1");
    let provider = Provider::start(&[&key]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_trusting(&provider, &dir, &[]);
    let claims = with(
        provider.claims_for("refund-bot", AUDIENCE),
        "groups",
        json!([]),
    );
    let token = key.sign(&with(claims, "scope", json!("openid mcp:refunds")));

    // No such workspace yet: refused, and the refusal is on the platform's record.
    assert_eq!(
        initialize(&server, &token).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(last_refusal(&server).as_deref(), Some("no_workspace"));

    server.create_workspace_like_default("finance");

    let client = server.connect(&token).await;
    crate::common::init(&client).await;
    let _ = client.cancel().await;
    let bot = format!("refund-bot@{}", provider.issuer);
    let in_finance = server.workspace_audit_events("finance");
    assert!(
        in_finance
            .iter()
            .any(|e| e["kind"] == "session_started" && e["actor"] == bot.as_str())
    );
    assert!(
        !server
            .workspace_audit_events("default")
            .iter()
            .any(|e| e["kind"] == "session_started" && e["actor"] == bot.as_str())
    );
}

#[tokio::test]
async fn every_refused_token_gets_its_reason_and_is_audited_and_an_unreachable_provider_gets_503() {
    let key = SigningKey::es256("k1");
    let provider = Provider::start(&[&key]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_trusting(&provider, &dir, &[]);
    let good = provider.claims_for("alice", AUDIENCE);
    let forger = SigningKey::es256("k1");
    let cases = [
        (forger.sign(&good), "bad_signature"),
        (
            key.sign(&with(good.clone(), "aud", json!("https://other.test/mcp"))),
            "wrong_audience",
        ),
        (
            key.sign(&with(
                good.clone(),
                "exp",
                json!(skillgate_core::issuers::testing::now() - 600),
            )),
            "expired",
        ),
        (key.sign_as("k-unknown", &good), "unknown_key"),
        (
            key.sign(&with(good.clone(), "groups", json!(["staff"]))),
            "no_scope",
        ),
        (
            key.sign(&with(good.clone(), "iss", json!("https://evil.test"))),
            "untrusted_issuer",
        ),
    ];
    // Each is audited with its code and with what the agent was told.
    let mut expected = Vec::new();
    for (token, code) in &cases {
        let (status, message) = initialize(&server, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{code}");
        assert!(!message.is_empty(), "{code}: the refusal says why");
        expected.push(((*code).to_owned(), message));
    }
    assert_eq!(token_refusals(&server), expected);
    // Agent keys keep working beside the provider's tokens.
    let client = server.connect(&server.support_key).await;
    crate::common::init(&client).await;
    let _ = client.cancel().await;

    // Keys not fetched yet when the provider goes down: nothing verifies, 503 and audited.
    let down = Provider::start(&[&key]).await;
    down.state.down.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    // Without Skillgate's own authorization server, its metadata is still served and
    // names the trusted issuer alone.
    let server = server_trusting(&down, &dir, &["--oauth=false"]);
    let (status, message) =
        initialize(&server, &key.sign(&down.claims_for("alice", AUDIENCE))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(message.contains("503"), "{message}");
    assert_eq!(last_refusal(&server).as_deref(), Some("issuer_unavailable"));
    let metadata = resource_metadata(&server).await;
    assert_eq!(metadata["authorization_servers"], json!([down.issuer]));
    // And a 401 points there (`initialize` checks the challenge).
    let stranger = with(
        down.claims_for("alice", AUDIENCE),
        "iss",
        json!("https://evil.test"),
    );
    assert_eq!(
        initialize(&server, &key.sign(&stranger)).await.0,
        StatusCode::UNAUTHORIZED
    );
}

/// The client secret of the real provider's services here.
const SERVICE_SECRET: &str = "refund-bot-secret-0123456789abcdef";

/// panva's oidc-provider with two services: `refund-bot` in group `support-agents` (mapped
/// to `support`) and `report-bot` in group `analysts` (mapped to nothing). It issues
/// tokens for this server's `/mcp` and, on request, for another server's.
fn real_provider() -> OpenIdProvider {
    OpenIdProvider::start(&json!({
        "resource": AUDIENCE,
        "other_resources": ["https://other.test/mcp"],
        "services": [
            {"client_id": "refund-bot", "client_secret": SERVICE_SECRET, "groups": ["support-agents"]},
            {"client_id": "report-bot", "client_secret": SERVICE_SECRET, "groups": ["analysts"]},
        ],
    }))
}

/// The `kid` a token's header names.
fn kid_of(token: &str) -> String {
    let mut kid = None;
    reshape(
        token,
        |header| {
            kid = header["kid"].as_str().map(str::to_owned);
            header
        },
        |claims| claims,
    );
    kid.expect("the provider names its key")
}

#[tokio::test]
async fn an_access_token_of_a_real_openid_provider_opens_a_session_and_a_key_rotation_there_is_picked_up()
 {
    let provider = real_provider();
    let dir = tempfile::tempdir().unwrap();
    // No bound between key fetches: the rotation below comes within the bound's minute.
    let server = server_trusting_issuer(&provider.issuer, 0, &dir, &[]);

    let first = provider
        .client_credentials("refund-bot", SERVICE_SECRET, AUDIENCE)
        .await;
    let client = server.connect(&first).await;
    let (_, reply) = crate::common::init(&client).await;
    assert!(reply.text.contains("tier-1-support"), "{}", reply.text);
    let _ = client.cancel().await;
    let bot = format!("refund-bot@{}", provider.issuer);
    assert!(server.workspace_audit_events("default").iter().any(|e| {
        e["kind"] == "session_started"
            && e["actor"] == bot.as_str()
            && e["payload"]["scope"] == "support"
    }));
    assert_eq!(provider.key_fetches().await, 1);

    // The provider rotates: the new key signs, the old one stays published.
    provider.rotate().await;
    let second = provider
        .client_credentials("refund-bot", SERVICE_SECRET, AUDIENCE)
        .await;
    assert_ne!(kid_of(&first), kid_of(&second));
    for token in [&second, &first] {
        let client = server.connect(token).await;
        crate::common::init(&client).await;
        let _ = client.cancel().await;
    }
    // The new key was fetched once, on its first token; the old one was still cached.
    assert_eq!(provider.key_fetches().await, 2);
    assert_eq!(token_refusals(&server), vec![]);
}

#[tokio::test]
async fn tokens_made_from_a_real_openid_providers_that_should_not_pass_are_refused_with_their_reason()
 {
    let provider = real_provider();
    let stranger = real_provider();
    let dir = tempfile::tempdir().unwrap();
    let server = server_trusting_issuer(&provider.issuer, 0, &dir, &[]);
    let genuine = provider
        .client_credentials("refund-bot", SERVICE_SECRET, AUDIENCE)
        .await;
    let unmapped = provider
        .client_credentials("report-bot", SERVICE_SECRET, AUDIENCE)
        .await;
    let cases = [
        (
            provider
                .client_credentials("refund-bot", SERVICE_SECRET, "https://other.test/mcp")
                .await,
            "wrong_audience",
        ),
        (
            stranger
                .client_credentials("refund-bot", SERVICE_SECRET, AUDIENCE)
                .await,
            "untrusted_issuer",
        ),
        (unmapped.clone(), "no_scope"),
        // report-bot's token claiming refund-bot's group.
        (
            reshape(
                &unmapped,
                |h| h,
                |c| with(c, "groups", json!(["support-agents"])),
            ),
            "bad_signature",
        ),
        (
            reshape(&genuine, |h| with(h, "kid", json!("key-forged")), |c| c),
            "unknown_key",
        ),
        (
            reshape(&genuine, |h| with(h, "alg", json!("none")), |c| c),
            "malformed",
        ),
        (
            reshape(&genuine, |h| with(h, "alg", json!("HS256")), |c| c),
            "algorithm",
        ),
    ];
    for (token, code) in &cases {
        let (status, message) = initialize(&server, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{code}: {message}");
        assert_eq!(last_refusal(&server).as_deref(), Some(*code), "{message}");
    }

    // The genuine token still opens a session; then the provider goes away, and a token
    // naming a key the gateway has not seen finds nothing to verify with: 503.
    let client = server.connect(&genuine).await;
    crate::common::init(&client).await;
    let _ = client.cancel().await;
    drop(provider);
    let unseen = reshape(&genuine, |h| with(h, "kid", json!("key-next")), |c| c);
    let (status, message) = initialize(&server, &unseen).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{message}");
    assert_eq!(last_refusal(&server).as_deref(), Some("issuer_unavailable"));
}
