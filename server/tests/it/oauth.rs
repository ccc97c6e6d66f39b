//! The OAuth 2.1 authorization server of the real binary, over HTTP: discovery from a
//! 401, dynamic registration, a console sign-in and consent (the forms a page without
//! JavaScript posts), the code exchange with PKCE, a governed call on `/mcp` with the
//! token, and the refusals. The browser and a real SDK client are in end2end/.

use crate::common;

use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use serde_json::{Value, json};

use common::console::{
    Browser, FORM, add_user, encode, http, mcp_status, navigation, page, sign_in,
};
use common::{Server, call, init, learn};

const VERIFIER: &str = "verifier-verifier-verifier-verifier-verifier-0123456789";
const PASSWORD: &str = "a long password for alice";

fn challenge() -> String {
    PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(VERIFIER.into()))
        .as_str()
        .to_owned()
}

fn callback(port: u16) -> String {
    format!("http://127.0.0.1:{port}/callback")
}

fn query_of(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// alice, a viewer allowed the `support` scope, signed in.
async fn alice(server: &Server) -> Browser {
    add_user(server, "alice", "viewer", PASSWORD);
    let out = server.cli(&["user", "scopes", "alice", "--allow", "support"]);
    assert!(out.status.success(), "{out:?}");
    sign_in(server, "alice", PASSWORD).await
}

async fn register(server: &Server) -> String {
    let response = http()
        .post(format!("{}/oauth/register", server.base))
        .json(&json!({
            "client_name": "Round Trip",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "none",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let client: Value = response.json().await.unwrap();
    client["client_id"].as_str().unwrap().to_owned()
}

fn authorize_url(server: &Server, client_id: &str, redirect: &str, resource: &str) -> String {
    let query = encode(&[
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect),
        ("state", "xyz"),
        ("code_challenge", &challenge()),
        ("code_challenge_method", "S256"),
        ("resource", resource),
    ]);
    format!("{}/oauth/authorize?{query}", server.base)
}

/// Starts an authorization for `client_id` and returns the consent page it sends the
/// browser to.
async fn consent_page(server: &Server, client_id: &str, redirect: &str) -> String {
    let response = http()
        .get(authorize_url(
            server,
            client_id,
            redirect,
            &server.mcp_url(),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    response.headers()[LOCATION].to_str().unwrap().to_owned()
}

/// Authorizes, consents as `browser` and returns the redirect back to the client.
async fn consent(server: &Server, browser: &Browser, client_id: &str, redirect: &str) -> String {
    let consent_page = consent_page(server, client_id, redirect).await;
    let request = consent_page
        .strip_prefix("/oauth/consent/")
        .expect("sent to the consent page");
    let response = http()
        .post(format!("{}/oauth/consent", server.base))
        .headers(navigation(server, &browser.cookie, &consent_page))
        .body(encode(&[
            ("csrf_token", &browser.token),
            ("request", request),
            ("scope", "support"),
            ("decision", "approve"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    response.headers()[LOCATION].to_str().unwrap().to_owned()
}

async fn token(
    server: &Server,
    fields: &[(&str, &str)],
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = http()
        .post(format!("{}/oauth/token", server.base))
        .header(CONTENT_TYPE, FORM)
        .body(encode(fields))
        .send()
        .await
        .unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.json().await.unwrap())
}

async fn exchange(server: &Server, client_id: &str, code: &str, redirect: &str) -> Value {
    let mcp = server.mcp_url();
    let (status, headers, body) = token(
        server,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect),
            ("code_verifier", VERIFIER),
            ("client_id", client_id),
            ("resource", &mcp),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers[CACHE_CONTROL], "no-store");
    body
}

/// A registered client, alice's consent and the code exchanged: the client and its tokens.
async fn signed_in(server: &Server, callback_port: u16) -> (String, Value) {
    let client_id = register(server).await;
    let browser = alice(server).await;
    let redirect = callback(callback_port);
    let back = consent(server, &browser, &client_id, &redirect).await;
    let code = query_of(&back, "code").expect("a code");
    let tokens = exchange(server, &client_id, &code, &redirect).await;
    (client_id, tokens)
}

#[tokio::test]
async fn a_client_that_knows_only_the_url_discovers_the_authorization_server() {
    let server = Server::start();
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let challenge = response.headers()[WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .to_owned();
    let metadata_url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the challenge names the resource metadata");
    let resource: Value = http()
        .get(metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resource["resource"], server.mcp_url());
    let issuer = resource["authorization_servers"][0].as_str().unwrap();
    assert_eq!(issuer, server.base);
    let response = http()
        .get(format!("{issuer}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert!(
        response.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let metadata: Value = response.json().await.unwrap();
    assert_eq!(metadata["issuer"], issuer);
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(
        metadata["registration_endpoint"],
        format!("{issuer}/oauth/register")
    );
}

#[tokio::test]
async fn a_person_signs_in_consents_and_the_client_makes_a_governed_call_as_them() {
    let server = Server::start();
    let client_id = register(&server).await;
    // Signed out, the consent page sends the browser to sign in and back.
    let consent_page = consent_page(&server, &client_id, &callback(40001)).await;
    let response = http()
        .get(format!("{}{consent_page}", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let login = response.headers()[LOCATION].to_str().unwrap();
    assert_eq!(
        query_of(&format!("{}{login}", server.base), "next").as_deref(),
        Some(consent_page.as_str())
    );

    let browser = alice(&server).await;
    let back = consent(&server, &browser, &client_id, &callback(40001)).await;
    assert!(back.starts_with(&callback(40001)), "{back}");
    assert_eq!(query_of(&back, "state").as_deref(), Some("xyz"));
    assert_eq!(
        query_of(&back, "iss").as_deref(),
        Some(server.base.as_str())
    );
    let code = query_of(&back, "code").expect("a code");
    let tokens = exchange(&server, &client_id, &code, &callback(40001)).await;
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "support");
    let access = tokens["access_token"].as_str().unwrap();

    let client = server.connect(access).await;
    let (session, _) = init(&client).await;
    assert!(
        !learn(&client, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let reply = call(
        &client,
        &session,
        "check_refund_eligibility",
        json!({"customer_id": "C-1003", "order_id": "O-5005"}),
    )
    .await;
    assert!(!reply.is_error, "{}", reply.text);
    assert_eq!(server.executed("check_refund_eligibility").len(), 1);
    // The audit names the person and the client; the consent is alice's admin change.
    let events = server.audit_events();
    let started = events
        .iter()
        .find(|e| e["kind"] == "session_started")
        .unwrap();
    let actor = started["actor"].as_str().unwrap();
    assert!(actor.starts_with("oauth:alice via Round Trip #"), "{actor}");
    assert!(events.iter().any(|e| e["kind"] == "admin_change"
        && e["actor"] == "alice"
        && e["payload"]["action"] == "oauth_grant.create"));
    // The session timeline in the console shows them too.
    let (_, html) = page(&server, &browser.cookie, &format!("/sessions/{session}")).await;
    assert!(
        html.contains("oauth:alice via Round Trip"),
        "the timeline names person and client"
    );
    // Bound to /mcp: the same token is refused on /api/v1.
    let api = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/skills/refund-policy/candidates",
            server.base
        ))
        .header(AUTHORIZATION, format!("Bearer {access}"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_revoked_refresh_token_ends_the_grant_on_the_next_request() {
    let server = Server::start();
    let (client_id, tokens) = signed_in(&server, 40002).await;
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();
    assert_eq!(mcp_status(&server, access).await, StatusCode::OK);
    let revoked = http()
        .post(format!("{}/oauth/revoke", server.base))
        .header(CONTENT_TYPE, FORM)
        .body(encode(&[("token", refresh), ("client_id", &client_id)]))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::OK);
    assert_eq!(mcp_status(&server, access).await, StatusCode::UNAUTHORIZED);
    let (status, _, body) = token(
        &server,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
}

#[tokio::test]
async fn an_unregistered_redirect_uri_is_refused_on_a_page_and_not_followed() {
    let server = Server::start();
    let client_id = register(&server).await;
    let response = http()
        .get(authorize_url(
            &server,
            &client_id,
            "https://attacker.example.com/cb",
            &server.mcp_url(),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.headers().get(LOCATION).is_none());
    let html = response.text().await.unwrap();
    assert!(html.contains("is not registered for this client"), "{html}");
}

#[tokio::test]
async fn a_token_request_for_another_resource_or_without_the_verifier_is_refused() {
    let server = Server::start();
    let client_id = register(&server).await;
    let browser = alice(&server).await;
    let back = consent(&server, &browser, &client_id, &callback(40003)).await;
    let code = query_of(&back, "code").unwrap();
    let redirect = callback(40003);
    let (status, _, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &redirect),
            ("code_verifier", VERIFIER),
            ("client_id", &client_id),
            ("resource", "https://other.example.com/mcp"),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_target"))
    );
    let (status, _, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &redirect),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // An authorization request for another resource goes back to the client refused.
    let response = http()
        .get(authorize_url(
            &server,
            &client_id,
            &redirect,
            "https://other.example.com/mcp",
        ))
        .send()
        .await
        .unwrap();
    let location = response.headers()[LOCATION].to_str().unwrap();
    assert_eq!(
        query_of(location, "error").as_deref(),
        Some("invalid_target")
    );
}

#[tokio::test]
async fn a_consent_post_without_the_form_token_is_refused() {
    let server = Server::start();
    let client_id = register(&server).await;
    let browser = alice(&server).await;
    let consent_page = consent_page(&server, &client_id, &callback(40004)).await;
    let request = consent_page.strip_prefix("/oauth/consent/").unwrap();
    let response = http()
        .post(format!("{}/oauth/consent", server.base))
        .headers(navigation(&server, &browser.cookie, &consent_page))
        .body(encode(&[
            ("request", request),
            ("scope", "support"),
            ("decision", "approve"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn with_the_authorization_server_off_mcp_takes_keys_only() {
    let server = Server::start_with(&["--oauth=false"]);
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()[WWW_AUTHENTICATE],
        r#"Bearer realm="skillgate""#
    );
    let metadata = http()
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_ne!(metadata.status(), StatusCode::OK);
}

#[tokio::test]
async fn an_access_token_is_refused_at_mcp_once_it_expired() {
    let server = Server::start_with(&["--oauth-access-token-ttl", "1"]);
    let (client_id, tokens) = signed_in(&server, 40005).await;
    assert_eq!(tokens["expires_in"], 1);
    // Waiting out a lifetime, not a race: the token's expiry is stored with it.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .header(
            AUTHORIZATION,
            format!("Bearer {}", tokens["access_token"].as_str().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(
        response.headers()[WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .contains(r#"error="invalid_token""#),
        "a client is told to refresh"
    );
    // The refresh token still works.
    let (status, _, refreshed) = token(
        &server,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{refreshed}");
    assert!(
        refreshed["access_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("sga_"))
    );
}

/// `POST /oauth/register` of a public client, with `X-Forwarded-For: forwarded` when
/// given; the status, the `Retry-After` seconds and the body.
async fn register_from(
    server: &Server,
    forwarded: Option<&str>,
) -> (StatusCode, Option<u64>, Value) {
    let mut request = http()
        .post(format!("{}/oauth/register", server.base))
        .json(&json!({
            "client_name": "Rate Limited",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "none",
        }));
    if let Some(forwarded) = forwarded {
        request = request.header("x-forwarded-for", forwarded);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (
        status,
        retry_after,
        response.json().await.unwrap_or(Value::Null),
    )
}

/// The OAuth clients registered so far, from the database.
async fn registered_clients(server: &Server) -> i64 {
    let pool = skillgate_core::store::testing::raw_pool(&server.database_url()).await;
    sqlx::query_scalar("SELECT COUNT(*) FROM oauth_clients")
        .fetch_one(&pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_registration_past_the_per_address_budget_is_answered_429_with_retry_after_and_stores_nothing()
 {
    let server = Server::start_with(&["--oauth-register-limit", "3"]);
    for _ in 0..3 {
        let (status, _, body) = register_from(&server, None).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, retry_after, body) = register_from(&server, None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited");
    let retry_after = retry_after.expect("a Retry-After header");
    assert!(
        (3000..=3600).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    assert_eq!(
        registered_clients(&server).await,
        3,
        "the refused registration stored a client"
    );

    // The authorization endpoint has its own budget, refused on a page.
    let server = Server::start_with(&["--oauth-request-limit", "2"]);
    let client_id = register(&server).await;
    let url = authorize_url(&server, &client_id, &callback(40010), &server.mcp_url());
    for _ in 0..2 {
        let response = http().get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
    }
    let response = http().get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        response
            .headers()
            .contains_key(reqwest::header::RETRY_AFTER)
    );
    let html = response.text().await.unwrap();
    assert!(html.contains("too many"), "{html}");
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_client_is_limited_by_its_forwarded_address() {
    let server = Server::start_with(&[
        "--trusted-proxies",
        "127.0.0.1/32,10.0.0.0/8",
        "--oauth-register-limit",
        "2",
    ]);
    // Two clients behind the proxy (a chain of two proxies for the second).
    for forwarded in ["203.0.113.1", "203.0.113.2, 10.1.1.1"] {
        for _ in 0..2 {
            let (status, _, body) = register_from(&server, Some(forwarded)).await;
            assert_eq!(status, StatusCode::CREATED, "{forwarded}: {body}");
        }
    }
    let (status, _, _) = register_from(&server, Some("203.0.113.1")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // The first client forges a leftmost entry; the proxy appended its real address.
    let (status, _, _) = register_from(&server, Some("198.51.100.77, 203.0.113.1")).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "a forged entry was believed"
    );
    // A third client still has its whole budget.
    let (status, _, body) = register_from(&server, Some("203.0.113.3")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn a_forwarded_for_header_from_an_untrusted_peer_is_ignored() {
    // The test's own connections come from 127.0.0.1, which is not trusted here.
    let server = Server::start_with(&[
        "--trusted-proxies",
        "10.0.0.0/8",
        "--oauth-register-limit",
        "2",
    ]);
    for forwarded in ["203.0.113.1", "203.0.113.2"] {
        let (status, _, body) = register_from(&server, Some(forwarded)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, _, _) = register_from(&server, Some("203.0.113.3")).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "each forged address got a budget of its own"
    );
}
