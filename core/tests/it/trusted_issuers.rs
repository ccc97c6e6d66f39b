//! Access tokens of a trusted external issuer (issue #52), against the identity provider
//! of `issuers::testing` served on loopback.

use std::sync::atomic::Ordering;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use skillgate_core::issuers::testing::{AUDIENCE, Provider, SigningKey, b64, now, with, without};
use skillgate_core::issuers::{TokenRefusal, TrustedIssuers, parse};

#[tokio::test]
async fn a_verified_token_is_admitted_with_the_scope_its_claims_map_to_and_its_subject() {
    let (es, ed) = (SigningKey::es256("k-es"), SigningKey::ed25519("k-ed"));
    let provider = Provider::start(&[&es, &ed]).await;
    let issuers = TrustedIssuers::new(provider.config(60));

    let caller = issuers
        .authenticate(&es.sign(&provider.claims("alice")))
        .await
        .unwrap();
    assert_eq!(
        (
            caller.issuer.as_str(),
            caller.subject.as_str(),
            caller.workspace.as_str(),
            caller.scope.as_str()
        ),
        (provider.issuer.as_str(), "alice", "default", "support")
    );
    // The second rule: one word of a space-delimited `scope` claim, into another workspace.
    let claims = with(
        without(provider.claims("refund-bot"), "groups"),
        "scope",
        json!("openid mcp:refunds"),
    );
    let caller = issuers.authenticate(&ed.sign(&claims)).await.unwrap();
    assert_eq!(
        (
            caller.subject.as_str(),
            caller.workspace.as_str(),
            caller.scope.as_str()
        ),
        ("refund-bot", "finance", "refunds")
    );
    // `aud` may be a list holding this server among others.
    let claims = with(
        provider.claims("bob"),
        "aud",
        json!(["https://other.test", AUDIENCE]),
    );
    assert!(issuers.authenticate(&es.sign(&claims)).await.is_ok());
    assert_eq!(
        provider.key_fetches(),
        1,
        "the keys are fetched once and cached"
    );
}

#[tokio::test]
async fn a_token_that_does_not_verify_is_refused_for_its_own_reason() {
    let es = SigningKey::es256("k-es");
    let provider = Provider::start(&[&es]).await;
    let issuers = TrustedIssuers::new(provider.config(3600));
    let good = provider.claims("alice");
    let forger = SigningKey::es256("k-es");
    let stranger = Provider::start(&[&forger]).await;
    let hs256 = {
        // An HMAC token keyed with the provider's public key, which anyone can read.
        let secret = serde_json::to_vec(&es.jwk).unwrap();
        jsonwebtoken::encode(
            &Header {
                kid: Some("k-es".into()),
                ..Header::new(Algorithm::HS256)
            },
            &good,
            &EncodingKey::from_secret(&secret),
        )
        .unwrap()
    };
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(&serde_json::to_vec(&good).unwrap())
    );
    let cases: Vec<(&str, String, TokenRefusal)> = vec![
        (
            "another issuer",
            forger.sign(&stranger.claims("alice")),
            TokenRefusal::UntrustedIssuer,
        ),
        (
            "the wrong audience",
            es.sign(&with(good.clone(), "aud", json!("https://other.test/mcp"))),
            TokenRefusal::WrongAudience,
        ),
        (
            "expired past the leeway",
            es.sign(&with(good.clone(), "exp", json!(now() - 120))),
            TokenRefusal::Expired,
        ),
        (
            "not valid yet past the leeway",
            es.sign(&with(good.clone(), "nbf", json!(now() + 120))),
            TokenRefusal::NotYetValid,
        ),
        (
            "no expiry",
            es.sign(&without(good.clone(), "exp")),
            TokenRefusal::MissingClaim("exp".into()),
        ),
        (
            "signed by another key under the same kid",
            forger.sign(&good),
            TokenRefusal::BadSignature,
        ),
        (
            "an unknown kid",
            es.sign_as("k-unknown", &good),
            TokenRefusal::UnknownKey,
        ),
        ("alg none", none, TokenRefusal::Malformed),
        (
            "HS256 keyed with the public key",
            hs256,
            TokenRefusal::Algorithm("HS256".into()),
        ),
        (
            "no subject",
            es.sign(&without(good.clone(), "sub")),
            TokenRefusal::MissingClaim("sub".into()),
        ),
        (
            "a subject too long to tell apart",
            es.sign(&with(good.clone(), "sub", json!("a".repeat(257)))),
            TokenRefusal::MissingClaim("sub".into()),
        ),
        (
            "claims that map to no scope",
            es.sign(&with(good.clone(), "groups", json!(["staff"]))),
            TokenRefusal::NoScope,
        ),
        (
            "a scope word only as a substring",
            es.sign(&with(
                without(good.clone(), "groups"),
                "scope",
                json!("mcp:refunds-all"),
            )),
            TokenRefusal::NoScope,
        ),
        (
            "not a JWT",
            "sgk_not-a-jwt".to_owned(),
            TokenRefusal::Malformed,
        ),
    ];
    for (what, token, refusal) in cases {
        assert_eq!(issuers.authenticate(&token).await, Err(refusal), "{what}");
    }
    // Within the leeway (60 s) a token just expired, or just not valid, still passes.
    let edge = with(
        with(good.clone(), "exp", json!(now() - 30)),
        "nbf",
        json!(now() + 30),
    );
    assert!(issuers.authenticate(&es.sign(&edge)).await.is_ok());
}

#[tokio::test]
async fn a_flood_of_unknown_kids_fetches_the_keys_at_most_once_per_interval() {
    let es = SigningKey::es256("k-es");
    let provider = Provider::start(&[&es]).await;
    let issuers = TrustedIssuers::new(provider.config(3600));
    let claims = provider.claims("alice");
    assert!(issuers.authenticate(&es.sign(&claims)).await.is_ok());
    let forged: Vec<String> = (0..50)
        .map(|i| es.sign_as(&format!("forged-{i}"), &claims))
        .collect();
    let refusals = futures::future::join_all(forged.iter().map(|t| issuers.authenticate(t))).await;
    assert!(refusals.iter().all(|r| *r == Err(TokenRefusal::UnknownKey)));
    assert_eq!(provider.key_fetches(), 1, "no fetch within the interval");
    // The known key still verifies meanwhile.
    assert!(issuers.authenticate(&es.sign(&claims)).await.is_ok());
}

#[tokio::test]
async fn a_key_rotated_at_the_provider_is_picked_up_on_its_first_token() {
    let (old, new) = (SigningKey::es256("2026-11"), SigningKey::ed25519("2026-12"));
    let provider = Provider::start(&[&old]).await;
    let issuers = TrustedIssuers::new(provider.config(0));
    let claims = provider.claims("alice");
    assert!(issuers.authenticate(&old.sign(&claims)).await.is_ok());
    provider.set_keys(&[&old, &new]);
    assert!(issuers.authenticate(&new.sign(&claims)).await.is_ok());
    assert_eq!(provider.key_fetches(), 2);
}

#[tokio::test]
async fn an_unreachable_provider_or_one_naming_another_issuer_admits_nothing() {
    let es = SigningKey::es256("k-es");
    let provider = Provider::start(&[&es]).await;
    provider.state.down.store(true, Ordering::SeqCst);
    let issuers = TrustedIssuers::new(provider.config(0));
    let token = es.sign(&provider.claims("alice"));
    match issuers.authenticate(&token).await {
        Err(TokenRefusal::IssuerUnavailable(why)) => assert!(why.contains("503"), "{why}"),
        other => panic!("{other:?}"),
    }
    provider.state.down.store(false, Ordering::SeqCst);
    assert!(
        issuers.authenticate(&token).await.is_ok(),
        "admitted once the provider is back"
    );

    // Metadata that names another issuer could hand over that issuer's keys.
    let lying = Provider::start(&[&es]).await;
    *lying.state.metadata_issuer.lock().unwrap() = Some("https://evil.test".into());
    let issuers = TrustedIssuers::new(lying.config(0));
    match issuers.authenticate(&es.sign(&lying.claims("alice"))).await {
        Err(TokenRefusal::IssuerUnavailable(why)) => assert!(why.contains("evil.test"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        lying.key_fetches(),
        0,
        "no key is fetched from a mismatched issuer"
    );
}

#[test]
fn a_trusted_issuers_file_that_would_weaken_verification_is_refused() {
    let ok = |extra: &str| {
        format!(
            "issuers:\n  - issuer: https://login.example.com/realms/acme\n{extra}    scopes: [{{ claim: groups, value: a, scope: support }}]\n"
        )
    };
    assert_eq!(parse(&ok(""), AUDIENCE).unwrap()[0].audience, AUDIENCE);
    for (what, text, says) in [
        (
            "an HMAC algorithm",
            ok("    algorithms: [HS256]\n"),
            "HS256",
        ),
        ("alg none", ok("    algorithms: [none]\n"), "none"),
        ("a misspelt field", ok("    audiance: x\n"), "audiance"),
        (
            "http to another host",
            ok("").replace("https://login", "http://login"),
            "https",
        ),
        (
            "no rule",
            "issuers:\n  - issuer: https://a.example\n    scopes: []\n".to_owned(),
            "no rule",
        ),
        ("no issuer", "issuers: []\n".to_owned(), "empty"),
    ] {
        let error = parse(&text, AUDIENCE).unwrap_err().to_string();
        assert!(error.contains(says), "{what}: {error}");
    }
    let twice = format!("{}{}", ok(""), ok("").replace("issuers:\n", ""));
    assert!(
        parse(&twice, AUDIENCE)
            .unwrap_err()
            .to_string()
            .contains("twice")
    );
}
