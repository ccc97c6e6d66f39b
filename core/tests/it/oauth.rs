//! The authorization server's flows against a real SQLite file with the demo catalog:
//! registration, consent, the code exchange with PKCE, rotating refresh tokens, revocation,
//! and what an access token is admitted as at `/mcp`.

use std::sync::Arc;

use chrono::{Duration, Utc};
use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::audit::{AuditLog, EventKind};
use skillgate_core::oauth::{
    AuthorizeError, AuthorizeRequest, ClientAuth, ConsentDecision, OAuthError, OAuthService,
    OAuthSettings, TokenRequest, TokenResponse,
};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, ConsoleUser, Password};

const ISSUER: &str = "http://127.0.0.1:3000";
const REDIRECT: &str = "http://127.0.0.1/callback";
const VERIFIER: &str = "a-verifier-of-at-least-forty-three-characters-0123456789";

struct Fixture {
    oauth: OAuthService,
    admin: Arc<AdminService>,
    store: Store,
    alice: ConsoleUser,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&skillgate_core::store::testing::database_url(
        dir.path(),
        "o.db",
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let handle = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let admin = Arc::new(AdminService::new(
        store.clone(),
        AuditLog::new(store.clone()),
        handle,
    ));
    let (alice, _) = admin
        .add_user(
            "admin",
            "alice",
            ConsoleRole::Viewer,
            Some(Password::new("a long password for alice")),
        )
        .await
        .unwrap();
    admin
        .set_user_scopes("admin", "alice", &[slug("support")])
        .await
        .unwrap();
    Fixture {
        oauth: OAuthService::new(store.clone(), admin.clone(), OAuthSettings::new(ISSUER)),
        admin,
        store,
        alice,
        _dir: dir,
    }
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

fn challenge() -> String {
    PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(VERIFIER.into()))
        .as_str()
        .to_owned()
}

async fn register(f: &Fixture) -> String {
    let client = f
        .oauth
        .register(json!({
            "client_name": "Test Client",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
        }))
        .await
        .unwrap();
    assert!(
        client.get("client_secret").is_none(),
        "a public client gets no secret"
    );
    client["client_id"].as_str().unwrap().to_owned()
}

fn request(client_id: &str) -> AuthorizeRequest {
    AuthorizeRequest {
        response_type: Some("code".into()),
        client_id: Some(client_id.into()),
        redirect_uri: Some("http://127.0.0.1:51234/callback".into()),
        state: Some("st4te".into()),
        code_challenge: Some(challenge()),
        code_challenge_method: Some("S256".into()),
        resource: Some(format!("{ISSUER}/mcp")),
        scope: None,
    }
}

fn public(client_id: &str) -> ClientAuth {
    ClientAuth {
        client_id: Some(client_id.into()),
        ..ClientAuth::default()
    }
}

fn query_of(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Register, authorize, consent to `support`: the code and the client.
async fn consented(f: &Fixture) -> (String, String) {
    let client_id = register(f).await;
    let id = f.oauth.authorize(request(&client_id)).await.unwrap();
    let back = f
        .oauth
        .decide(
            &id,
            &f.alice,
            ConsentDecision::Approve {
                scope: slug("support"),
            },
        )
        .await
        .unwrap();
    assert!(
        back.starts_with("http://127.0.0.1:51234/callback?"),
        "{back}"
    );
    assert_eq!(query_of(&back, "state").as_deref(), Some("st4te"));
    assert_eq!(query_of(&back, "iss").as_deref(), Some(ISSUER));
    (query_of(&back, "code").unwrap(), client_id)
}

fn code_exchange(code: &str) -> TokenRequest {
    TokenRequest {
        grant_type: Some("authorization_code".into()),
        code: Some(code.into()),
        redirect_uri: Some("http://127.0.0.1:51234/callback".into()),
        code_verifier: Some(VERIFIER.into()),
        resource: Some(format!("{ISSUER}/mcp")),
        ..TokenRequest::default()
    }
}

fn refresh_with(token: &str) -> TokenRequest {
    TokenRequest {
        grant_type: Some("refresh_token".into()),
        refresh_token: Some(token.into()),
        ..TokenRequest::default()
    }
}

/// Whether `/mcp` would admit `token` now.
async fn admitted(f: &Fixture, token: &str) -> bool {
    f.oauth
        .authenticate(token, Utc::now())
        .await
        .unwrap()
        .is_some()
}

/// The error the token endpoint refuses `request` from `client` with.
async fn refused(f: &Fixture, request: TokenRequest, client: ClientAuth) -> OAuthError {
    f.oauth
        .token(request, client)
        .await
        .err()
        .expect("the token request is refused")
}

async fn tokens(f: &Fixture) -> (TokenResponse, String) {
    let (code, client_id) = consented(f).await;
    let tokens = f
        .oauth
        .token(code_exchange(&code), public(&client_id))
        .await
        .unwrap();
    (tokens, client_id)
}

#[tokio::test]
async fn a_consented_code_becomes_a_token_admitted_as_the_person_client_and_scope() {
    let f = fixture().await;
    let (tokens, _) = tokens(&f).await;
    assert_eq!(tokens.token_type, "Bearer");
    assert_eq!(tokens.scope, "support");
    assert_eq!(tokens.expires_in, 900);
    let caller = f
        .oauth
        .authenticate(&tokens.access_token, Utc::now())
        .await
        .unwrap()
        .expect("the access token is admitted");
    assert_eq!(caller.scope, slug("support"));
    assert_eq!(caller.user_name, "alice");
    assert_eq!(caller.client_name, "Test Client");
    assert!(
        caller.key_name.starts_with("oauth:alice via Test Client #"),
        "{}",
        caller.key_name
    );
    // The consent is audited as by the person.
    let events = f
        .admin
        .audit()
        .admin_changes(&format!("oauth_grant:{}", caller.key_id), 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::AdminChange);
    assert_eq!(events[0].actor.as_deref(), Some("alice"));
    // A grant is not an agent key: key listings do not show it.
    assert!(f.store.list_agent_keys().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_access_token_is_refused_once_it_expired() {
    let f = fixture().await;
    let (tokens, _) = tokens(&f).await;
    let later = Utc::now() + Duration::minutes(16);
    assert!(
        f.oauth
            .authenticate(&tokens.access_token, later)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_code_without_its_pkce_verifier_or_with_another_is_refused() {
    let f = fixture().await;
    let (code, client_id) = consented(&f).await;
    let mut missing = code_exchange(&code);
    missing.code_verifier = None;
    let error = refused(&f, missing, public(&client_id)).await;
    assert_eq!(error.code(), "invalid_grant", "{error}");
    let mut wrong = code_exchange(&code);
    wrong.code_verifier = Some("another-verifier-of-at-least-forty-three-characters-xx".into());
    let error = refused(&f, wrong, public(&client_id)).await;
    assert_eq!(error.code(), "invalid_grant", "{error}");
    // Neither attempt used the code up.
    assert!(
        f.oauth
            .token(code_exchange(&code), public(&client_id))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_code_used_twice_revokes_the_grant_it_made() {
    let f = fixture().await;
    let (code, client_id) = consented(&f).await;
    let first = f
        .oauth
        .token(code_exchange(&code), public(&client_id))
        .await
        .unwrap();
    let replay = refused(&f, code_exchange(&code), public(&client_id)).await;
    assert_eq!(replay.code(), "invalid_grant");
    assert!(!admitted(&f, &first.access_token).await);
}

#[tokio::test]
async fn a_token_for_another_resource_is_refused_at_the_authorize_and_token_endpoints() {
    let f = fixture().await;
    let client_id = register(&f).await;
    let mut other = request(&client_id);
    other.resource = Some("https://other.example.com/mcp".into());
    match f.oauth.authorize(other).await {
        Err(AuthorizeError::Redirect(url)) => {
            assert_eq!(
                query_of(&url, "error").as_deref(),
                Some("invalid_target"),
                "{url}"
            );
            assert_eq!(query_of(&url, "state").as_deref(), Some("st4te"));
        }
        other => panic!("expected a redirect with invalid_target, got {other:?}"),
    }
    let (code, client_id) = consented(&f).await;
    let mut exchange = code_exchange(&code);
    exchange.resource = Some("https://other.example.com/mcp".into());
    let error = refused(&f, exchange, public(&client_id)).await;
    assert_eq!(error.code(), "invalid_target");
}

#[tokio::test]
async fn a_redirect_uri_that_does_not_match_is_shown_not_followed() {
    let f = fixture().await;
    let client_id = register(&f).await;
    let mut request = request(&client_id);
    request.redirect_uri = Some("https://attacker.example.com/callback".into());
    match f.oauth.authorize(request).await {
        Err(AuthorizeError::Show(OAuthError::InvalidRedirectUri(_))) => {}
        other => panic!("expected a refusal shown to the person, got {other:?}"),
    }
}

#[tokio::test]
async fn an_authorization_request_without_pkce_s256_is_sent_back_refused() {
    let f = fixture().await;
    let client_id = register(&f).await;
    for (challenge, method) in [
        (None, Some("S256")),
        (Some(challenge()), Some("plain")),
        (Some(challenge()), None),
    ] {
        let mut request = request(&client_id);
        request.code_challenge = challenge;
        request.code_challenge_method = method.map(str::to_owned);
        match f.oauth.authorize(request).await {
            Err(AuthorizeError::Redirect(url)) => {
                assert_eq!(
                    query_of(&url, "error").as_deref(),
                    Some("invalid_request"),
                    "{url}"
                )
            }
            other => panic!("expected invalid_request, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_refresh_token_rotates_and_a_replayed_one_revokes_the_grant() {
    let f = fixture().await;
    let (first, client_id) = tokens(&f).await;
    let second = f
        .oauth
        .token(refresh_with(&first.refresh_token), public(&client_id))
        .await
        .unwrap();
    assert_ne!(second.refresh_token, first.refresh_token);
    assert!(admitted(&f, &second.access_token).await);
    // The first refresh token again: a thief or a bug; either way the grant ends.
    let replay = refused(&f, refresh_with(&first.refresh_token), public(&client_id)).await;
    assert_eq!(replay.code(), "invalid_grant");
    assert!(!admitted(&f, &second.access_token).await);
    let after = refused(&f, refresh_with(&second.refresh_token), public(&client_id)).await;
    assert_eq!(after.code(), "invalid_grant");
}

#[tokio::test]
async fn a_revoked_refresh_token_is_refused_and_ends_its_access_tokens() {
    let f = fixture().await;
    let (tokens, client_id) = tokens(&f).await;
    f.oauth
        .revoke(&tokens.refresh_token, public(&client_id))
        .await
        .unwrap();
    let error = refused(&f, refresh_with(&tokens.refresh_token), public(&client_id)).await;
    assert_eq!(error.code(), "invalid_grant");
    assert!(!admitted(&f, &tokens.access_token).await);
}

#[tokio::test]
async fn another_client_cannot_use_or_revoke_a_clients_tokens() {
    let f = fixture().await;
    let (tokens, _) = tokens(&f).await;
    let other = register(&f).await;
    let error = refused(&f, refresh_with(&tokens.refresh_token), public(&other)).await;
    assert_eq!(error.code(), "invalid_grant");
    assert!(
        f.oauth
            .revoke(&tokens.refresh_token, public(&other))
            .await
            .is_err()
    );
    assert!(admitted(&f, &tokens.access_token).await);
}

#[tokio::test]
async fn taking_a_scope_away_or_revoking_the_grant_in_the_console_ends_its_tokens() {
    let f = fixture().await;
    let (tokens, _) = tokens(&f).await;
    f.admin
        .set_user_scopes("admin", "alice", &[])
        .await
        .unwrap();
    assert!(!admitted(&f, &tokens.access_token).await);
    f.admin
        .set_user_scopes("admin", "alice", &[slug("support")])
        .await
        .unwrap();
    let caller = f
        .oauth
        .authenticate(&tokens.access_token, Utc::now())
        .await
        .unwrap()
        .unwrap();
    f.oauth.revoke_grant(&f.alice, caller.key_id).await.unwrap();
    assert!(!admitted(&f, &tokens.access_token).await);
    let grants = f.oauth.grants(Some(f.alice.id)).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert!(grants[0].revoked_at.is_some());
}

#[tokio::test]
async fn a_person_consents_only_to_a_scope_an_admin_allowed_them_and_only_once() {
    let f = fixture().await;
    let client_id = register(&f).await;
    let id = f.oauth.authorize(request(&client_id)).await.unwrap();
    let page = f.oauth.consent_request(&id, &f.alice).await.unwrap();
    assert_eq!(page.allowed_scopes, vec![slug("support")]);
    assert_eq!(page.client_name, "Test Client");
    assert_eq!(page.redirect_host, "127.0.0.1:51234");
    let outside = f
        .oauth
        .decide(
            &id,
            &f.alice,
            ConsentDecision::Approve {
                scope: slug("billing"),
            },
        )
        .await
        .err()
        .unwrap();
    assert_eq!(outside.code(), "invalid_scope");
    f.oauth
        .decide(
            &id,
            &f.alice,
            ConsentDecision::Approve {
                scope: slug("support"),
            },
        )
        .await
        .unwrap();
    assert!(
        f.oauth
            .decide(
                &id,
                &f.alice,
                ConsentDecision::Approve {
                    scope: slug("support")
                }
            )
            .await
            .is_err(),
        "a request is answered once"
    );
}

#[tokio::test]
async fn a_refused_consent_sends_access_denied_back_and_makes_no_grant() {
    let f = fixture().await;
    let client_id = register(&f).await;
    let id = f.oauth.authorize(request(&client_id)).await.unwrap();
    let back = f
        .oauth
        .decide(&id, &f.alice, ConsentDecision::Deny)
        .await
        .unwrap();
    assert_eq!(query_of(&back, "error").as_deref(), Some("access_denied"));
    assert!(query_of(&back, "code").is_none());
    assert!(f.oauth.grants(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn registration_refuses_bad_metadata_and_can_be_turned_off() {
    let f = fixture().await;
    for bad in [
        json!({"redirect_uris": []}),
        json!({"redirect_uris": ["http://app.example.com/cb"]}),
        json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}),
        json!({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}),
        json!({"redirect_uris": "not a list"}),
    ] {
        assert!(f.oauth.register(bad.clone()).await.is_err(), "{bad}");
    }
    let confidential = f
        .oauth
        .register(json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"}))
        .await
        .unwrap();
    assert!(
        confidential["client_secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("sgs_"))
    );
    let mut settings = OAuthSettings::new(ISSUER);
    settings.dynamic_registration = false;
    let off = OAuthService::new(f.store.clone(), f.admin.clone(), settings.clone());
    let error = off
        .register(json!({"redirect_uris": [REDIRECT]}))
        .await
        .err()
        .unwrap();
    assert_eq!(error.code(), "unauthorized_client");
    assert!(settings.metadata().get("registration_endpoint").is_none());
}

#[tokio::test]
async fn a_confidential_client_must_send_its_secret_the_way_it_registered() {
    let f = fixture().await;
    let client: Value = f
        .oauth
        .register(json!({"client_name": "Server app", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"}))
        .await
        .unwrap();
    let (id, secret) = (
        client["client_id"].as_str().unwrap(),
        client["client_secret"].as_str().unwrap(),
    );
    let auth = |secret: Option<&str>, basic| ClientAuth {
        client_id: Some(id.into()),
        secret: secret.map(str::to_owned),
        basic,
    };
    let request = || TokenRequest {
        grant_type: Some("refresh_token".into()),
        refresh_token: Some("sgr_unknown".into()),
        ..TokenRequest::default()
    };
    for bad in [
        auth(None, false),
        auth(Some("sgs_wrong"), false),
        auth(Some(secret), true),
    ] {
        let error = refused(&f, request(), bad).await;
        assert_eq!(error.code(), "invalid_client");
    }
    // The right secret gets past client authentication to the grant check.
    let error = refused(&f, request(), auth(Some(secret), false)).await;
    assert_eq!(error.code(), "invalid_grant");
}

#[tokio::test]
async fn the_metadata_names_the_endpoints_pkce_and_the_resource() {
    let settings = OAuthSettings::new("https://skillgate.example.com/");
    let metadata = settings.metadata();
    assert_eq!(metadata["issuer"], "https://skillgate.example.com");
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    assert_eq!(
        metadata["token_endpoint"],
        "https://skillgate.example.com/oauth/token"
    );
    let resource = settings.resource_metadata(true);
    assert_eq!(resource["resource"], "https://skillgate.example.com/mcp");
    assert_eq!(
        resource["authorization_servers"],
        json!(["https://skillgate.example.com"])
    );
    assert_eq!(
        settings.resource_metadata_url(),
        "https://skillgate.example.com/.well-known/oauth-protected-resource/mcp"
    );
}
