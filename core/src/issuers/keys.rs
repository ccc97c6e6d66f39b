//! An issuer's signing keys: found through its metadata (OpenID Connect discovery, else
//! RFC 8414), fetched from its `jwks_uri`, and cached.
//!
//! Keys are fetched again when a token names a `kid` the cache lacks (the provider rotated)
//! and when the cache is older than [`KEY_MAX_AGE`] (a key the provider withdrew stops
//! verifying within that bound). Either is at most one fetch per `key_refresh`, whatever
//! the traffic: a flood of tokens with made-up `kid`s cannot make the gateway hammer the
//! provider. A provider that cannot be reached leaves nothing to verify with, and tokens
//! are refused (fail closed).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use url::Url;

use super::config::{IssuerConfig, is_fetchable};
use crate::limited_read::read_body_limited;

/// How long fetched keys are trusted before they are fetched again.
pub const KEY_MAX_AGE: Duration = Duration::from_secs(3600);
/// The largest metadata or key set document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// One verification key.
#[derive(Clone)]
pub(crate) struct Key {
    pub key: DecodingKey,
    /// The algorithm the key set pins the key to, if it does.
    pub algorithm: Option<Algorithm>,
}

/// Keys by `kid`, and those without one.
struct KeySet {
    by_kid: HashMap<String, Key>,
    unnamed: Vec<Key>,
    fetched_at: Instant,
}

impl KeySet {
    fn find(&self, kid: Option<&str>) -> Option<Key> {
        match kid {
            Some(kid) => self.by_kid.get(kid).cloned(),
            // A token without `kid` is verified only when the choice is not ours to guess.
            None => match (self.by_kid.len(), self.unnamed.as_slice()) {
                (0, [only]) => Some(only.clone()),
                (1, []) => self.by_kid.values().next().cloned(),
                _ => None,
            },
        }
    }
}

/// Why there is no key to verify with.
#[derive(Debug)]
pub(crate) enum KeyError {
    /// The keys were fetched and none is the token's.
    Unknown,
    /// The provider's metadata or keys could not be had: nothing verifies.
    Unavailable(String),
}

/// The keys of one issuer.
pub(crate) struct IssuerKeys {
    issuer: String,
    key_refresh: Duration,
    http: reqwest::Client,
    keys: ArcSwapOption<KeySet>,
    /// When a fetch last started; the lock also makes concurrent callers share one fetch.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
}

/// What Skillgate reads of a provider's metadata.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Metadata {
    pub issuer: String,
    pub jwks_uri: String,
    /// Where people sign in, and where codes are exchanged: the console's single sign-on.
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
}

impl IssuerKeys {
    pub fn new(config: &IssuerConfig, http: reqwest::Client) -> Self {
        Self {
            issuer: config.issuer.clone(),
            key_refresh: config.key_refresh,
            http,
            keys: ArcSwapOption::empty(),
            last_fetch: tokio::sync::Mutex::new(None),
        }
    }

    /// The key for `kid`, fetching the key set when it is missing, stale, or lacks `kid`
    /// and the last fetch is at least `key_refresh` ago.
    pub async fn key(&self, kid: Option<&str>) -> Result<Key, KeyError> {
        let fresh = |set: &KeySet| set.fetched_at.elapsed() < KEY_MAX_AGE;
        if let Some(set) = self.keys.load_full().filter(|set| fresh(set))
            && let Some(key) = set.find(kid)
        {
            return Ok(key);
        }
        let mut last_fetch = self.last_fetch.lock().await;
        // Another caller may have fetched while this one waited.
        let current = self.keys.load_full().filter(|set| fresh(set));
        if let Some(key) = current.as_ref().and_then(|set| set.find(kid)) {
            return Ok(key);
        }
        let may_fetch = last_fetch.is_none_or(|at| at.elapsed() >= self.key_refresh);
        if !may_fetch {
            return Err(match current {
                Some(_) => KeyError::Unknown,
                None => KeyError::Unavailable(format!(
                    "the keys of {} could not be fetched; the next try is at most {}s away",
                    self.issuer,
                    self.key_refresh.as_secs()
                )),
            });
        }
        *last_fetch = Some(Instant::now());
        match self.fetch().await {
            Ok(set) => {
                let found = set.find(kid);
                self.keys.store(Some(Arc::new(set)));
                found.ok_or(KeyError::Unknown)
            }
            Err(why) => {
                tracing::warn!(issuer = %self.issuer, %why, "cannot fetch the issuer's keys");
                // Keys within their age stay, so a forged `kid` sent while the provider is
                // down cannot refuse everyone else's tokens; stale keys go, since a provider
                // that withdrew a key may be down too.
                if current.is_none() {
                    self.keys.store(None);
                }
                Err(KeyError::Unavailable(why))
            }
        }
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let metadata = self.metadata().await?;
        let jwks_uri = Url::parse(&metadata.jwks_uri)
            .ok()
            .filter(is_fetchable)
            .ok_or_else(|| {
                format!(
                    "the metadata of {} names jwks_uri `{}`, which is not https",
                    self.issuer, metadata.jwks_uri
                )
            })?;
        let set: JwkSet = self.get_json(jwks_uri).await?;
        let mut keys = KeySet {
            by_kid: HashMap::new(),
            unnamed: Vec::new(),
            fetched_at: Instant::now(),
        };
        for jwk in &set.keys {
            let Some(key) = verification_key(jwk) else {
                continue;
            };
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_kid.insert(kid.clone(), key);
                }
                None => keys.unnamed.push(key),
            }
        }
        Ok(keys)
    }

    /// The issuer's metadata: OpenID Connect discovery first (most providers), then RFC 8414's
    /// well-known URI. Its `issuer` must be ours exactly (RFC 8414 section 3.3), or a
    /// metadata document could hand us another issuer's keys.
    pub async fn metadata(&self) -> Result<Metadata, String> {
        let base = self.issuer.trim_end_matches('/');
        let oidc = Url::parse(&format!("{base}/.well-known/openid-configuration"))
            .map_err(|e| e.to_string())?;
        let metadata = match self.get_json::<Metadata>(oidc).await {
            Ok(metadata) => metadata,
            Err(first) => {
                let issuer = Url::parse(&self.issuer).map_err(|e| e.to_string())?;
                let mut rfc8414 = issuer.clone();
                let path = issuer.path().trim_end_matches('/');
                rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
                self.get_json::<Metadata>(rfc8414)
                    .await
                    .map_err(|second| format!("{first}; {second}"))?
            }
        };
        if metadata.issuer != self.issuer {
            return Err(format!(
                "the metadata found for issuer {} names issuer `{}`",
                self.issuer, metadata.issuer
            ));
        }
        Ok(metadata)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: Url) -> Result<T, String> {
        let fail = |why: String| format!("GET {url}: {why}");
        let response = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("answered {}", response.status())));
        }
        let body = read_body_limited(response, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| fail(e.to_string()))?;
        serde_json::from_slice(&body).map_err(|e| fail(format!("not the JSON expected: {e}")))
    }
}

/// The verification key a JWK gives, or `None` for a key that is not for signatures
/// (`use: enc`), is symmetric (`oct`: never trusted from a key set), or cannot be read.
fn verification_key(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    if matches!(
        jwk.algorithm,
        jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
    ) {
        return None;
    }
    let algorithm = match jwk.common.key_algorithm {
        Some(alg) => Some(alg.to_string().parse::<Algorithm>().ok()?),
        None => None,
    };
    Some(Key {
        key: DecodingKey::from_jwk(jwk).ok()?,
        algorithm,
    })
}
