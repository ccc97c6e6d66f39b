//! People sign in to the console through the company's OpenID provider (issue #52): the
//! real binary and panva's oidc-provider on loopback, the browser's part played over HTTP
//! (the browser suite plays it in Chromium).

use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION};
use serde_json::{Value, json};

use crate::common::Server;
use crate::common::console::{self, http, page, session_cookie};
use crate::common::openid::OpenIdProvider;

/// What the server calls itself: the redirect URI registered at the provider is under it.
/// The browser's part rewrites the provider's redirect to the server's real address.
const PUBLIC_URL: &str = "https://console.test";
const CLIENT_SECRET: &str = "console-client-secret-0123456789";

fn provider() -> OpenIdProvider {
    OpenIdProvider::start(&json!({
        "resource": "https://console.test/mcp",
        "apps": [{
            "client_id": "skillgate-console",
            "client_secret": CLIENT_SECRET,
            "redirect_uris": [format!("{PUBLIC_URL}/auth/sso/callback")],
        }],
        "accounts": {
            "alice": {"groups": ["skillgate-reviewers"], "email": "alice@acme.test"},
            "admin": {"groups": ["skillgate-reviewers"]},
        },
    }))
}

/// The server with single sign-on through `provider`; `more` are more lines of the file.
fn server_with_sso(provider: &OpenIdProvider, dir: &tempfile::TempDir, more: &str) -> Server {
    let file = dir.path().join("console-sso.yaml");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{CLIENT_SECRET}\n")).unwrap();
    std::fs::write(
        &file,
        format!(
            "issuer: {}
client_id: skillgate-console
client_secret_file: {}
algorithms: [ES256]
roles:
  - {{ group: skillgate-admins, role: admin }}
  - {{ group: skillgate-reviewers, role: reviewer }}
{more}",
            provider.issuer,
            secret.display()
        ),
    )
    .unwrap();
    Server::start_with(&[
        "--console-sso",
        file.to_str().unwrap(),
        "--public-url",
        PUBLIC_URL,
    ])
}

/// A browser's sign-in through the provider, up to the provider's redirect back: the
/// browser's sign-in cookie and the callback's path and query on the server.
async fn to_callback(
    server: &Server,
    provider: &OpenIdProvider,
    account: &str,
) -> (String, String) {
    let started = http()
        .get(format!("{}/auth/sso/start?next=/holds", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    let browser = started
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with("skillgate_sso="))
        .expect("the start sets the sign-in cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let authorize = started.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(authorize.starts_with(&provider.issuer), "{authorize}");
    for part in [
        "code_challenge_method=S256",
        "nonce=",
        "state=",
        "response_type=code",
    ] {
        assert!(authorize.contains(part), "{part}: {authorize}");
    }
    let back = provider.authorize_as(&authorize, account).await;
    assert_eq!(
        back.as_str().split('?').next(),
        Some(format!("{PUBLIC_URL}/auth/sso/callback").as_str())
    );
    (
        browser,
        format!("{}?{}", back.path(), back.query().unwrap()),
    )
}

/// The server's answer to the callback, with the browser's `cookie`.
async fn callback(server: &Server, path_and_query: &str, cookie: &str) -> reqwest::Response {
    let mut request = http().get(format!("{}{path_and_query}", server.base));
    if !cookie.is_empty() {
        request = request.header(COOKIE, cookie);
    }
    request.send().await.unwrap()
}

/// Signs `account` in through the provider: the console session's cookie.
async fn sign_in(server: &Server, provider: &OpenIdProvider, account: &str) -> String {
    let (browser, back) = to_callback(server, provider, account).await;
    let answer = callback(server, &back, &browser).await;
    assert_eq!(
        answer.status(),
        StatusCode::OK,
        "{account} is signed in: {:?}",
        answer.headers().get(LOCATION)
    );
    let cookie = session_cookie(answer.headers()).expect("a console session");
    let html = answer.text().await.unwrap();
    assert!(
        html.contains(r#"<meta http-equiv="refresh" content="0;url=/holds">"#),
        "{html}"
    );
    cookie
}

/// Where a refused callback sent the browser: the sign-in page's `code`.
fn refusal_code(answer: &reqwest::Response) -> String {
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert!(session_cookie(answer.headers()).is_none(), "no session");
    let location = answer.headers()[LOCATION].to_str().unwrap();
    let url = url::Url::parse(&format!("http://x{location}")).unwrap();
    assert_eq!(url.path(), "/login");
    url.query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap()
}

/// The `console.sso` refusals on the record: (actor, code).
fn refusals(server: &Server) -> Vec<(String, String)> {
    server
        .audit_events()
        .iter()
        .filter(|e| e["kind"] == "admin_refused" && e["payload"]["action"] == "console.sso")
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_owned(),
                e["payload"]["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn user_changes(server: &Server, name: &str) -> Vec<Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["kind"] == "admin_change"
                && e["payload"]["target"] == format!("console_user:{name}").as_str()
        })
        .collect()
}

#[tokio::test]
async fn a_person_signs_in_through_the_provider_with_the_role_of_their_groups_until_a_group_is_removed()
 {
    let provider = provider();
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_sso(&provider, &dir, "");

    // The first sign-in makes the console user, a reviewer, on the record as by alice.
    let cookie = sign_in(&server, &provider, "alice").await;
    let (status, _) = page(&server, &cookie, "/holds").await;
    assert_eq!(status, StatusCode::OK, "a reviewer's page");
    let (status, _) = page(&server, &cookie, "/users").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the users page is admins'");
    let changes = user_changes(&server, "alice");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["actor"], "alice");
    assert_eq!(changes[0]["payload"]["action"], "console_user.create");
    assert_eq!(changes[0]["payload"]["after"]["role"], "reviewer");
    assert_eq!(
        changes[0]["payload"]["after"]["issuer"],
        provider.issuer.as_str()
    );

    // Made an admin at the provider: the next sign-in makes her one here.
    provider
        .set_groups("alice", &["skillgate-admins", "skillgate-reviewers"])
        .await;
    let cookie = sign_in(&server, &provider, "alice").await;
    assert_eq!(page(&server, &cookie, "/users").await.0, StatusCode::OK);
    let changes = user_changes(&server, "alice");
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[1]["payload"]["action"], "console_user.update");
    assert_eq!(changes[1]["payload"]["before"]["role"], "reviewer");
    assert_eq!(changes[1]["payload"]["after"]["role"], "admin");

    // Out of every mapped group: refused at the next sign-in, and audited.
    provider.set_groups("alice", &["staff"]).await;
    let (browser, back) = to_callback(&server, &provider, "alice").await;
    assert_eq!(
        refusal_code(&callback(&server, &back, &browser).await),
        "no_role"
    );
    assert_eq!(refusals(&server), vec![("alice".into(), "no_role".into())]);

    // A provider account named like the local admin is not the local admin.
    let (browser, back) = to_callback(&server, &provider, "admin").await;
    assert_eq!(
        refusal_code(&callback(&server, &back, &browser).await),
        "conflict"
    );
    // And a person made by the provider has no password here, nor can an admin give one.
    let (status, location) = password_sign_in(&server, "alice", "any password").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(location.contains("error=invalid"), "{location}");
    let admin = console::sign_in_admin(&server).await;
    let (_, users) = page(&server, &admin.cookie, "/users").await;
    let row = users
        .split(r#"id="user-alice""#)
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("alice's row: {users}"));
    assert!(row.contains("identity provider"), "{row}");
    assert!(!row.contains("Reset password"), "{row}");
    let (_, refused) = console::fetch_post(
        &server,
        &admin,
        "/console/api/reset_user_password",
        &[("name", "alice"), ("csrf_token", &admin.token)],
    )
    .await;
    assert!(
        refused.contains("signs in through the identity provider"),
        "{refused}"
    );
    assert!(
        !user_changes(&server, "alice")
            .iter()
            .any(|e| e["payload"]["action"] == "console_user.reset_password")
    );

    // Disabled by an admin, she stays out though the provider puts her back in a group.
    let (_, saved) = console::fetch_post(
        &server,
        &admin,
        "/console/api/update_user",
        &[
            ("name", "alice"),
            ("role", "admin"),
            ("disabled", "on"),
            ("csrf_token", &admin.token),
        ],
    )
    .await;
    assert!(saved.contains(r#""error":false"#), "{saved}");
    provider.set_groups("alice", &["skillgate-reviewers"]).await;
    let (browser, back) = to_callback(&server, &provider, "alice").await;
    assert_eq!(
        refusal_code(&callback(&server, &back, &browser).await),
        "disabled"
    );
}

/// A password sign-in: the answer's status and where it sends the browser.
async fn password_sign_in(server: &Server, name: &str, password: &str) -> (StatusCode, String) {
    let answer = console::post_sign_in(server, name, password).await;
    let location = answer
        .headers()
        .get(LOCATION)
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (answer.status(), location)
}

#[tokio::test]
async fn a_replayed_forged_or_foreign_callback_signs_nobody_in_and_is_audited() {
    let provider = provider();
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_sso(&provider, &dir, "");

    // Replayed: the first answer signs in, the same again finds nothing.
    let (browser, back) = to_callback(&server, &provider, "alice").await;
    assert_eq!(
        callback(&server, &back, &browser).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        refusal_code(&callback(&server, &back, &browser).await),
        "unknown_state"
    );
    // Another browser's answer (login CSRF): without the cookie, or with another's.
    let (_, back) = to_callback(&server, &provider, "alice").await;
    assert_eq!(
        refusal_code(&callback(&server, &back, "").await),
        "other_browser"
    );
    let (theirs, _) = to_callback(&server, &provider, "alice").await;
    let (_, back) = to_callback(&server, &provider, "alice").await;
    assert_eq!(
        refusal_code(&callback(&server, &back, &theirs).await),
        "other_browser"
    );
    // Forged: a state nobody started; an answer naming another issuer (mix-up).
    assert_eq!(
        refusal_code(
            &callback(
                &server,
                "/auth/sso/callback?code=abc&state=made-up",
                &browser
            )
            .await
        ),
        "unknown_state"
    );
    let (browser, back) = to_callback(&server, &provider, "alice").await;
    let mixed = back.replace(
        &format!("iss={}", urlencode(&provider.issuer)),
        "iss=https%3A%2F%2Fevil.test",
    );
    assert_ne!(mixed, back, "the answer names its issuer (RFC 9207)");
    assert_eq!(
        refusal_code(&callback(&server, &mixed, &browser).await),
        "issuer_mismatch"
    );
    // A code the provider will not exchange (changed in transit).
    let (browser, back) = to_callback(&server, &provider, "alice").await;
    let changed = back.replace("code=", "code=x");
    assert_eq!(
        refusal_code(&callback(&server, &changed, &browser).await),
        "code_refused"
    );

    let codes: Vec<String> = refusals(&server)
        .into_iter()
        .map(|(_, code)| code)
        .collect();
    assert_eq!(
        codes,
        [
            "unknown_state",
            "other_browser",
            "other_browser",
            "unknown_state",
            "issuer_mismatch",
            "code_refused"
        ]
    );
    // Only the first answer made anything.
    assert_eq!(user_changes(&server, "alice").len(), 1);
}

fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[tokio::test]
async fn with_single_sign_on_passwords_are_for_break_glass_admins_or_off_and_sessions_end_at_their_maximum_age()
 {
    let provider = provider();
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_sso(&provider, &dir, "max_session_seconds: 3\n");
    console::add_user(&server, "vera", "viewer", console::VIEWER_PASSWORD);
    let (_, location) = password_sign_in(&server, "vera", console::VIEWER_PASSWORD).await;
    assert!(location.contains("error=password_off"), "{location}");
    let admin = console::sign_in_admin(&server).await;
    let (_, login) = page(&server, "", "/login").await;
    assert!(login.contains(r#"id="sso-sign-in""#) && login.contains(r#"id="break-glass""#));

    // The session of the provider's person and the local admin's both end at the age.
    let cookie = sign_in(&server, &provider, "alice").await;
    assert_eq!(page(&server, &cookie, "/holds").await.0, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    for cookie in [&cookie, &admin.cookie] {
        let (status, _) = page(&server, cookie, "/holds").await;
        assert_eq!(
            status,
            StatusCode::SEE_OTHER,
            "signed out at the maximum age"
        );
    }

    // Passwords off: the admin too must use the provider, and the form is gone.
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_sso(&provider, &dir, "password_sign_in: off\n");
    let password = server.admin_password.clone().unwrap();
    let (status, location) = password_sign_in(&server, "admin", &password).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(location.starts_with("/login?error="), "{location}");
    let (_, login) = page(&server, "", "/login").await;
    assert!(login.contains(r#"id="sso-sign-in""#) && !login.contains(r#"name="password""#));
}

#[tokio::test]
async fn sign_in_starts_and_callbacks_from_one_address_are_bounded_and_the_provider_is_asked_once()
{
    let provider = provider();
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_sso(&provider, &dir, "");
    let start = || http().get(format!("{}/auth/sso/start", server.base)).send();
    for _ in 0..30 {
        assert_eq!(start().await.unwrap().status(), StatusCode::SEE_OTHER);
    }
    let refused = start().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let callback = callback(&server, "/auth/sso/callback?state=s&code=c", "").await;
    assert_eq!(callback.status(), StatusCode::TOO_MANY_REQUESTS);
    // Thirty starts read the provider's discovery document once.
    assert_eq!(provider.discovery_fetches().await, 1);
}
