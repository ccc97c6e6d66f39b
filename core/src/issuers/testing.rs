//! An identity provider on loopback for tests (feature `test-support`): OpenID discovery
//! and a JWKS endpoint whose keys a test rotates, counts fetches of, and takes down, and
//! signing keys made by rcgen to sign its tokens with. The core tests of [`super`] and the
//! server's tests of `/mcp` use it; the end-to-end tests use a certified provider instead.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::{IssuerConfig, parse};

/// The audience of the tokens [`Provider::claims`] makes.
pub const AUDIENCE: &str = "https://skillgate.test/mcp";

/// Base64url without padding, as JOSE writes it.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key of the provider and its public JWK.
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    der: Vec<u8>,
    pub jwk: Value,
}

impl SigningKey {
    pub fn es256(kid: &str) -> Self {
        let pair =
            rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a test key");
        let raw = pair.public_key_raw();
        Self {
            kid: kid.to_owned(),
            alg: Algorithm::ES256,
            der: pair.serialize_der(),
            jwk: json!({"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
                        "kid": kid, "alg": "ES256", "use": "sig"}),
        }
    }

    pub fn ed25519(kid: &str) -> Self {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("a test key");
        Self {
            kid: kid.to_owned(),
            alg: Algorithm::EdDSA,
            der: pair.serialize_der(),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "x": b64(pair.public_key_raw()),
                        "kid": kid, "use": "sig"}),
        }
    }

    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// Signed with this key, naming `kid` in the header.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let key = match self.alg {
            Algorithm::EdDSA => EncodingKey::from_ed_der(&self.der),
            _ => EncodingKey::from_ec_der(&self.der),
        };
        let mut header = Header::new(self.alg);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &key).expect("signing with a test key")
    }
}

#[derive(Default)]
pub struct ProviderState {
    issuer: Mutex<String>,
    /// The issuer the metadata names; the real one unless a test makes it lie.
    pub metadata_issuer: Mutex<Option<String>>,
    keys: Mutex<Vec<Value>>,
    key_fetches: AtomicUsize,
    pub down: AtomicBool,
}

/// An identity provider on loopback.
pub struct Provider {
    pub issuer: String,
    pub state: Arc<ProviderState>,
}

async fn discovery(State(state): State<Arc<ProviderState>>) -> Response {
    let issuer = state
        .issuer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let named = state
        .metadata_issuer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    axum::Json(json!({
        "issuer": named.unwrap_or_else(|| issuer.clone()),
        "jwks_uri": format!("{issuer}/jwks"),
    }))
    .into_response()
}

async fn jwks(State(state): State<Arc<ProviderState>>) -> Response {
    state.key_fetches.fetch_add(1, Ordering::SeqCst);
    if state.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    axum::Json(json!({"keys": *state.keys.lock().unwrap_or_else(PoisonError::into_inner)}))
        .into_response()
}

impl Provider {
    pub async fn start(keys: &[&SigningKey]) -> Self {
        let state = Arc::new(ProviderState::default());
        *state.keys.lock().unwrap_or_else(PoisonError::into_inner) =
            keys.iter().map(|k| k.jwk.clone()).collect();
        let app = axum::Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let issuer = format!(
            "http://{}",
            listener.local_addr().expect("a bound listener")
        );
        *state.issuer.lock().unwrap_or_else(PoisonError::into_inner) = issuer.clone();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { issuer, state }
    }

    pub fn set_keys(&self, keys: &[&SigningKey]) {
        *self
            .state
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    pub fn key_fetches(&self) -> usize {
        self.state.key_fetches.load(Ordering::SeqCst)
    }

    /// A trusted-issuers file trusting this provider with the rules of every test: group
    /// `support-agents` → `support`, scope word `mcp:refunds` → `refunds` of workspace
    /// `finance`. The audience is the parser's default.
    pub fn file(&self, key_refresh_seconds: u64) -> String {
        format!(
            "issuers:
  - issuer: {}
    algorithms: [ES256, EdDSA]
    key_refresh_seconds: {key_refresh_seconds}
    scopes:
      - {{ claim: groups, value: support-agents, scope: support }}
      - {{ claim: scope, value: 'mcp:refunds', scope: refunds, workspace: finance }}
",
            self.issuer
        )
    }

    /// [`Self::file`], parsed with [`AUDIENCE`] as the audience.
    pub fn config(&self, key_refresh_seconds: u64) -> Vec<IssuerConfig> {
        parse(&self.file(key_refresh_seconds), AUDIENCE).expect("the test file parses")
    }

    /// Claims of a valid token for `subject`, for [`AUDIENCE`], valid for five minutes.
    pub fn claims(&self, subject: &str) -> Value {
        self.claims_for(subject, AUDIENCE)
    }

    /// Claims of a valid token for `subject` and `audience`, in group `support-agents`.
    pub fn claims_for(&self, subject: &str, audience: &str) -> Value {
        let now = now();
        json!({"iss": self.issuer, "aud": audience, "sub": subject, "iat": now,
               "nbf": now, "exp": now + 300, "groups": ["staff", "support-agents"]})
    }
}

/// Seconds since the epoch, as JWT times are.
pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `claims` with `field` set to `value`.
pub fn with(mut claims: Value, field: &str, value: Value) -> Value {
    claims[field] = value;
    claims
}

/// `claims` without `field`.
pub fn without(mut claims: Value, field: &str) -> Value {
    claims
        .as_object_mut()
        .expect("claims are an object")
        .remove(field);
    claims
}

/// `token` with its header and claims changed by `header` and `claims`, and its signature
/// kept: a forgery made from a genuine token.
pub fn reshape(
    token: &str,
    header: impl FnOnce(Value) -> Value,
    claims: impl FnOnce(Value) -> Value,
) -> String {
    let part = |text: &str| -> Value {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .expect("a JWT part is base64url");
        serde_json::from_slice(&bytes).expect("a JWT part is JSON")
    };
    let mut parts = token.split('.');
    let (h, c, signature) = (
        parts.next().expect("a header"),
        parts.next().expect("claims"),
        parts.next().expect("a signature"),
    );
    let encode = |value: Value| b64(value.to_string().as_bytes());
    format!(
        "{}.{}.{signature}",
        encode(header(part(h))),
        encode(claims(part(c)))
    )
}
