//! What admitting one `/mcp` request costs with an OAuth access token, against an agent key
//! (the baseline) in the same run, on a real SQLite file with the demo catalog.
//!
//! Every request re-authenticates (revocation takes effect at once), so this is paid on
//! every call. A key is one primary-key read on a direct connection; a token is one read
//! joining the token, the grant, its credential row, the person and their scopes, through
//! sqlx. Rounds alternate the two so drift in the machine hits both alike.
//!
//! `cargo bench -p skillgate-core --bench auth`

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use serde_json::json;
use skillgate_core::admin::AdminService;
use skillgate_core::audit::AuditLog;
use skillgate_core::keys::AgentKeys;
use skillgate_core::oauth::{
    AuthorizeRequest, ClientAuth, ConsentDecision, OAuthService, OAuthSettings, TokenRequest,
};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, Password};

const ISSUER: &str = "http://127.0.0.1:3000";
const VERIFIER: &str = "bench-verifier-bench-verifier-bench-verifier-0123";
const ROUNDS: usize = 5;
const PER_ROUND: u32 = 20_000;

/// Median time per admission of `admit` over `PER_ROUND` calls.
async fn per_call<F, Fut>(admit: &F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    for _ in 0..PER_ROUND {
        assert!(admit().await, "the credential is admitted");
    }
    started.elapsed() / PER_ROUND
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!(
        "sqlite://{}",
        dir.path().join("auth.db").display()
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
    let support = Slug::parse("support").unwrap();

    let keys = AgentKeys::new(store.clone());
    let (_, key) = keys
        .create(
            "bench",
            &support,
            std::slice::from_ref(&support),
            None,
            None,
        )
        .await
        .unwrap();
    let key = key.expose().to_owned();

    let (person, _) = admin
        .add_user(
            "bench",
            "person",
            ConsoleRole::Viewer,
            Some(Password::new("a long bench password")),
        )
        .await
        .unwrap();
    admin
        .set_user_scopes("bench", "person", std::slice::from_ref(&support))
        .await
        .unwrap();
    let oauth = OAuthService::new(store.clone(), admin.clone(), OAuthSettings::new(ISSUER));
    let client = oauth
        .register(json!({"client_name": "bench", "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}))
        .await
        .unwrap();
    let client_id = client["client_id"].as_str().unwrap().to_owned();
    let challenge =
        PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(VERIFIER.into()));
    let id = oauth
        .authorize(AuthorizeRequest {
            response_type: Some("code".into()),
            client_id: Some(client_id.clone()),
            redirect_uri: Some("http://127.0.0.1:1/cb".into()),
            code_challenge: Some(challenge.as_str().to_owned()),
            code_challenge_method: Some("S256".into()),
            ..AuthorizeRequest::default()
        })
        .await
        .unwrap();
    let back = oauth
        .decide(&id, &person, ConsentDecision::Approve { scope: support })
        .await
        .unwrap();
    let code = url::Url::parse(&back)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let tokens = oauth
        .token(
            TokenRequest {
                grant_type: Some("authorization_code".into()),
                code: Some(code),
                redirect_uri: Some("http://127.0.0.1:1/cb".into()),
                code_verifier: Some(VERIFIER.into()),
                ..TokenRequest::default()
            },
            ClientAuth {
                client_id: Some(client_id),
                ..ClientAuth::default()
            },
        )
        .await
        .unwrap();
    let access = tokens.access_token;

    let by_key = || async { keys.authenticate(&key, Utc::now()).await.is_ok() };
    let by_token =
        || async { matches!(oauth.authenticate(&access, Utc::now()).await, Ok(Some(_))) };
    // Warm both paths (prepared statements, connections) before measuring.
    per_call(&by_key).await;
    per_call(&by_token).await;
    let (mut keyed, mut tokened) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        keyed.push(per_call(&by_key).await);
        tokened.push(per_call(&by_token).await);
    }
    let (keyed, tokened) = (median(keyed), median(tokened));
    println!("admission of one /mcp request, median of {ROUNDS} alternated rounds of {PER_ROUND}:");
    println!(
        "  agent key (baseline)   {:>8.1} µs",
        keyed.as_secs_f64() * 1e6
    );
    println!(
        "  OAuth access token     {:>8.1} µs   {:.2}× the key",
        tokened.as_secs_f64() * 1e6,
        tokened.as_secs_f64() / keyed.as_secs_f64()
    );
}
