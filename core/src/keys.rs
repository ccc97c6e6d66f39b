//! Agent keys: the bearer credentials of the MCP endpoint, each mapped to one scope.
//!
//! A key is `sgk_` and 43 base62 characters encoding 32 bytes from the operating system's
//! random source; a key of a workspace other than `default` ends in `.` and the workspace's
//! name (`sgk_….finance`), which tells `/mcp` whose database to look it up in. It is shown
//! once, at creation; the store keeps only its SHA-256 (of the whole key, workspace
//! included). Because the key has 256 bits of entropy, looking its hash up in the database
//! is a safe comparison: no timing difference can help guess a key whose hash is unknown.

use std::fmt;

use chrono::{DateTime, Duration, Utc};
use rand::RngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};

use crate::slug::Slug;
use crate::store::Tx;
use crate::store::keys::AgentKeyRow;
use crate::store::workspaces::DEFAULT_WORKSPACE;
use crate::store::{Store, StoreError};

pub const KEY_PREFIX: &str = "sgk_";
/// Base62 digits needed for 32 bytes: 62^43 > 2^256.
const KEY_BODY_LEN: usize = 43;
pub const KEY_LEN: usize = KEY_PREFIX.len() + KEY_BODY_LEN;
/// Characters of a key kept in clear for display: the `sgk_` tag and 8 random characters.
pub const DISPLAY_PREFIX_LEN: usize = 12;
/// `last_used_at` is rewritten at most this often, so authenticating is a read, not a write,
/// for all but one request a minute per key.
pub const LAST_USED_INTERVAL: Duration = Duration::seconds(60);
pub const MAX_NAME_LEN: usize = 64;
/// Between a key and the workspace it belongs to; base62 has no `.`, slugs have none.
pub const WORKSPACE_SEPARATOR: char = '.';

/// The workspace a presented bearer key names; `None` for a key of the `default` workspace,
/// and for anything that is not an agent key. Only routing: the workspace's own store then
/// checks the whole key.
pub fn workspace_of_key(presented: &str) -> Option<&str> {
    if !presented.starts_with(KEY_PREFIX) {
        return None;
    }
    presented.get(KEY_LEN..)?.strip_prefix(WORKSPACE_SEPARATOR)
}

pub use crate::store::keys::AgentKeyInfo;

/// A checked, generated key not yet stored ([`AgentKeys::prepare`]). Holds the secret, so
/// it is neither `Serialize` nor `Clone`, and its `Debug` shows only the name.
pub struct PreparedKey {
    name: String,
    scope: Slug,
    key: NewAgentKey,
    key_hash: String,
    created_at: DateTime<Utc>,
    created_by: Option<String>,
    expires_at: Option<DateTime<Utc>>,
}

impl PreparedKey {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Binds the key to `workspace`, the one it is stored in: for any workspace but
    /// `default` the key ends in `.` and the workspace's name.
    pub fn for_workspace(mut self, workspace: &str) -> Self {
        if workspace != DEFAULT_WORKSPACE {
            let key = format!("{}{WORKSPACE_SEPARATOR}{workspace}", self.key.expose());
            self.key_hash = hash_key(&key);
            self.key = NewAgentKey(key);
        }
        self
    }

    /// Stores the key on `conn`; a taken name is a [`StoreError::Conflict`].
    pub async fn insert_on(self, conn: &mut Tx) -> Result<(AgentKeyInfo, NewAgentKey), StoreError> {
        let row = AgentKeyRow {
            name: &self.name,
            scope: &self.scope,
            key_hash: &self.key_hash,
            prefix: &self.key.expose()[..DISPLAY_PREFIX_LEN],
            created_at: self.created_at,
            created_by: self.created_by.as_deref(),
            expires_at: self.expires_at,
        };
        let info = crate::store::keys::insert_agent_key_on(conn, &row).await?;
        tracing::info!(key = %info.name, scope = %info.scope, prefix = %info.prefix, "agent key created");
        Ok((info, self.key))
    }
}

impl fmt::Debug for PreparedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedKey")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// A freshly created key in clear, to be shown to its creator once. Never `Serialize`,
/// never printed by `Debug`, deliberately not `Clone`.
pub struct NewAgentKey(String);

impl NewAgentKey {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for NewAgentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NewAgentKey({}…<redacted>)",
            &self.0[..DISPLAY_PREFIX_LEN]
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Unknown, revoked, expired or malformed: one variant, so a caller cannot tell an
    /// agent (or an attacker) which it was.
    #[error("invalid agent key")]
    Invalid,
    #[error("a key name is 1 to {MAX_NAME_LEN} characters of letters, digits, `.`, `_` or `-`")]
    InvalidName,
    #[error("an agent key named `{0}` already exists")]
    NameTaken(String),
    #[error("unknown scope `{0}`: a key needs a scope that exists in the catalog")]
    UnknownScope(Slug),
    #[error("the expiry {0} is not in the future")]
    ExpiryInPast(DateTime<Utc>),
    #[error("no agent key named `{0}`")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl KeyError {
    /// The field of a key form the refusal is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::InvalidName | Self::NameTaken(_) | Self::NotFound(_) => Some("name"),
            Self::UnknownScope(_) => Some("scope"),
            Self::ExpiryInPast(_) => Some("expires_in_days"),
            Self::Invalid | Self::Store(_) => None,
        }
    }
}

fn validate_name(name: &str) -> Result<(), KeyError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(KeyError::InvalidName)
    }
}

/// Fixed-width base62 of a 256-bit big-endian number: no `-` or `_`, so a double click
/// selects the whole key in a terminal.
fn base62(mut number: [u8; 32]) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; KEY_BODY_LEN];
    for slot in out.iter_mut().rev() {
        let mut remainder = 0u32;
        for byte in number.iter_mut() {
            let acc = (remainder << 8) | u32::from(*byte);
            *byte = u8::try_from(acc / 62).expect("a quotient below 256");
            remainder = acc % 62;
        }
        *slot = DIGITS[remainder as usize];
    }
    out.iter().map(|&b| char::from(b)).collect()
}

fn generate_key() -> String {
    random_secret(KEY_PREFIX)
}

/// `prefix` and 256 random bits in base62: the shape of every bearer secret Skillgate
/// makes (agent keys, OAuth tokens and codes).
pub(crate) fn random_secret(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!("{prefix}{}", base62(bytes))
}

/// The SHA-256 (hex) a secret is stored and looked up as.
pub(crate) fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Creating, checking, listing and revoking agent keys.
#[derive(Clone, Debug)]
pub struct AgentKeys {
    store: Store,
}

impl AgentKeys {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Creates a key for `scope` and returns it in clear, once.
    ///
    /// The scope must exist in the catalog: the caller passes the catalog's scope slugs as
    /// `known_scopes` (this module does not read the catalog), and a scope not among them is
    /// refused. Bad input changes nothing.
    #[tracing::instrument(skip(self, known_scopes))]
    pub async fn create(
        &self,
        name: &str,
        scope: &Slug,
        known_scopes: &[Slug],
        expires_at: Option<DateTime<Utc>>,
        created_by: Option<&str>,
    ) -> Result<(AgentKeyInfo, NewAgentKey), KeyError> {
        let prepared = Self::prepare(name, scope, known_scopes, expires_at, created_by)?
            .for_workspace(self.store.workspace_slug());
        let inserted = self
            .store
            .with_conn(|tx| Box::pin(prepared.insert_on(tx)))
            .await;
        inserted.map_err(|e| match e {
            StoreError::Conflict(_) => KeyError::NameTaken(name.to_owned()),
            other => other.into(),
        })
    }

    /// Checks a new key's name, scope and expiry and generates its secret, without storing
    /// anything: [`PreparedKey::insert_on`] stores it, e.g. in the same transaction as the
    /// audit event that records its creation.
    pub fn prepare(
        name: &str,
        scope: &Slug,
        known_scopes: &[Slug],
        expires_at: Option<DateTime<Utc>>,
        created_by: Option<&str>,
    ) -> Result<PreparedKey, KeyError> {
        validate_name(name)?;
        if !known_scopes.contains(scope) {
            return Err(KeyError::UnknownScope(scope.clone()));
        }
        let now = Utc::now();
        if let Some(expires) = expires_at.filter(|&expires| expires <= now) {
            return Err(KeyError::ExpiryInPast(expires));
        }
        let key = NewAgentKey(generate_key());
        Ok(PreparedKey {
            name: name.to_owned(),
            scope: scope.clone(),
            key_hash: hash_key(key.expose()),
            key,
            created_at: now,
            created_by: created_by.map(str::to_owned),
            expires_at,
        })
    }

    /// Checks a presented bearer key at `now` and returns the key it belongs to.
    ///
    /// Every refusal is [`KeyError::Invalid`]; only a database failure is another error.
    #[tracing::instrument(skip_all)]
    pub async fn authenticate(
        &self,
        presented: &str,
        now: DateTime<Utc>,
    ) -> Result<AgentKeyInfo, KeyError> {
        // Malformed input, or a key of another workspace, never reaches the database.
        let key = if self.store.is_platform() {
            Some(presented)
        } else {
            presented
                .strip_suffix(self.store.workspace_slug())
                .and_then(|key| key.strip_suffix(WORKSPACE_SEPARATOR))
        };
        if key.is_none_or(|key| key.len() != KEY_LEN || !key.starts_with(KEY_PREFIX)) {
            return Err(KeyError::Invalid);
        }
        let Some(mut info) = self
            .store
            .find_agent_key_by_hash(&hash_key(presented))
            .await?
        else {
            return Err(KeyError::Invalid);
        };
        if !info.is_active(now) {
            return Err(KeyError::Invalid);
        }
        let stale_before = now - LAST_USED_INTERVAL;
        if info.last_used_at.is_none_or(|used| used < stale_before) {
            // Bookkeeping, not access control: a failed write must not refuse a valid key.
            match self.store.touch_agent_key(info.id, now, stale_before).await {
                Ok(true) => info.last_used_at = Some(now),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(key = %info.name, %error, "could not record agent key use");
                }
            }
        }
        Ok(info)
    }

    /// Revokes the key `name` now. Revoking a revoked key keeps its first revocation time.
    #[tracing::instrument(skip(self))]
    pub async fn revoke(&self, name: &str) -> Result<AgentKeyInfo, KeyError> {
        let info = self
            .store
            .revoke_agent_key(name, Utc::now())
            .await?
            .ok_or_else(|| KeyError::NotFound(name.to_owned()))?;
        tracing::info!(key = %info.name, "agent key revoked");
        Ok(info)
    }

    pub async fn list(&self) -> Result<Vec<AgentKeyInfo>, KeyError> {
        Ok(self.store.list_agent_keys().await?)
    }

    /// The agents that came with a trusted issuer's tokens (issue #52): one credential row
    /// per subject, named `SUBJECT@ISSUER`; `created_by` is the issuer. Revoked like a key.
    pub async fn list_external(&self) -> Result<Vec<AgentKeyInfo>, KeyError> {
        Ok(self.store.list_external_subjects().await?)
    }
}

#[cfg(test)]
mod tests {
    use chrono::SubsecRound;

    use super::*;
    use crate::store::test_store;

    /// The store keeps microseconds: compare times at that precision.
    fn now() -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }

    fn slug(text: &str) -> Slug {
        Slug::parse(text).unwrap()
    }

    async fn keys() -> AgentKeys {
        AgentKeys::new(test_store().await)
    }

    fn scopes() -> Vec<Slug> {
        vec![slug("support"), slug("billing")]
    }

    async fn create(keys: &AgentKeys, name: &str) -> (AgentKeyInfo, NewAgentKey) {
        keys.create(name, &slug("support"), &scopes(), None, Some("alice"))
            .await
            .unwrap()
    }

    #[test]
    fn a_key_names_its_workspace_after_a_dot_and_a_default_key_names_none() {
        let key = generate_key();
        assert_eq!(workspace_of_key(&key), None);
        assert_eq!(workspace_of_key(&format!("{key}.finance")), Some("finance"));
        assert_eq!(workspace_of_key(&format!("{key}finance")), None);
        assert_eq!(workspace_of_key("sgk_short.finance"), None);
        assert_eq!(
            workspace_of_key(&format!("atk_{}.finance", &key[4..])),
            None
        );
    }

    #[tokio::test]
    async fn a_key_made_for_a_workspace_ends_in_its_name_and_is_hashed_whole() {
        let prepared = AgentKeys::prepare("bot", &slug("support"), &scopes(), None, None)
            .unwrap()
            .for_workspace("finance");
        let key = prepared.key.expose().to_owned();
        assert!(key.ends_with(".finance") && key.len() == KEY_LEN + ".finance".len());
        assert_eq!(prepared.key_hash, hash_key(&key));
        let unchanged = AgentKeys::prepare("bot", &slug("support"), &scopes(), None, None)
            .unwrap()
            .for_workspace(DEFAULT_WORKSPACE);
        assert_eq!(unchanged.key.expose().len(), KEY_LEN);
    }

    #[test]
    fn base62_is_fixed_width_for_the_smallest_and_largest_numbers() {
        assert_eq!(base62([0; 32]), "0".repeat(KEY_BODY_LEN));
        // 2^256 - 1, checked against Python's arbitrary-precision integers.
        assert_eq!(
            base62([0xff; 32]),
            "yhjskwdA6OZ1AL1YmHWZWm8LLG7HjnuCA2j5rOw8Xp1"
        );
        assert_eq!(
            base62({
                let mut one = [0; 32];
                one[31] = 61;
                one
            }),
            format!("{}z", "0".repeat(KEY_BODY_LEN - 1))
        );
    }

    #[tokio::test]
    async fn a_created_key_authenticates_and_maps_to_its_scope() {
        let keys = keys().await;
        let (info, key) = create(&keys, "support-bot").await;
        assert_eq!(key.expose().len(), KEY_LEN);
        assert!(key.expose().starts_with("sgk_"));
        assert!(key.expose()[4..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(info.prefix, key.expose()[..12]);
        assert_eq!(info.created_by.as_deref(), Some("alice"));

        let found = keys.authenticate(key.expose(), Utc::now()).await.unwrap();
        assert_eq!(found.name, "support-bot");
        assert_eq!(found.scope, slug("support"));
        assert_eq!(found.id, info.id);
    }

    #[tokio::test]
    async fn two_keys_are_never_the_same() {
        let keys = keys().await;
        let (_, a) = create(&keys, "a").await;
        let (_, b) = create(&keys, "b").await;
        assert_ne!(a.expose(), b.expose());
    }

    #[tokio::test]
    async fn the_clear_key_is_stored_nowhere_and_never_printed() {
        let keys = keys().await;
        let (info, key) = create(&keys, "support-bot").await;
        let secret_part = &key.expose()[DISPLAY_PREFIX_LEN..];

        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT name || '|' || scope || '|' || key_hash || '|' || prefix || '|' ||
                    created_at || '|' || COALESCE(created_by, '') FROM agent_keys",
        )
        .fetch_all(keys.store.pool())
        .await
        .unwrap();
        assert_eq!(rows.len(), 1);
        assert!(!rows[0].contains(secret_part), "{}", rows[0]);
        assert!(rows[0].contains(&hash_key(key.expose())));

        assert!(!format!("{key:?}").contains(secret_part));
        assert!(!format!("{info:?}").contains(secret_part));
        assert!(!serde_json::to_string(&info).unwrap().contains(secret_part));
    }

    #[tokio::test]
    async fn revoked_expired_unknown_and_malformed_keys_all_get_the_same_error() {
        let keys = keys().await;
        let now = Utc::now();
        let (_, revoked) = create(&keys, "revoked").await;
        keys.revoke("revoked").await.unwrap();
        let (_, expiring) = keys
            .create(
                "expiring",
                &slug("support"),
                &scopes(),
                Some(now + Duration::days(1)),
                None,
            )
            .await
            .unwrap();
        assert!(keys.authenticate(expiring.expose(), now).await.is_ok());

        let unknown = format!("sgk_{}", "x".repeat(KEY_BODY_LEN));
        let refusals = [
            keys.authenticate(revoked.expose(), now).await,
            keys.authenticate(expiring.expose(), now + Duration::days(1))
                .await,
            keys.authenticate(&unknown, now).await,
            keys.authenticate("Bearer nonsense", now).await,
            keys.authenticate("", now).await,
        ];
        for refusal in refusals {
            let error = refusal.unwrap_err();
            assert!(matches!(error, KeyError::Invalid), "{error:?}");
            assert_eq!(error.to_string(), "invalid agent key");
        }
    }

    #[tokio::test]
    async fn a_revoked_key_stays_listed_with_its_first_revocation_time() {
        let keys = keys().await;
        create(&keys, "bot").await;
        let first = keys.revoke("bot").await.unwrap().revoked_at.unwrap();
        let again = keys.revoke("bot").await.unwrap().revoked_at.unwrap();
        assert_eq!(first, again);
        assert_eq!(keys.list().await.unwrap()[0].revoked_at, Some(first));
        assert!(matches!(
            keys.revoke("nobody").await,
            Err(KeyError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn a_duplicate_name_is_refused_and_changes_nothing() {
        let keys = keys().await;
        let (original, original_key) = create(&keys, "bot").await;
        let error = keys
            .create("bot", &slug("billing"), &scopes(), None, None)
            .await
            .unwrap_err();
        assert!(
            matches!(error, KeyError::NameTaken(ref n) if n == "bot"),
            "{error:?}"
        );
        assert_eq!(keys.list().await.unwrap(), vec![original]);
        let still = keys
            .authenticate(original_key.expose(), Utc::now())
            .await
            .unwrap();
        assert_eq!(still.scope, slug("support"));
    }

    #[tokio::test]
    async fn bad_names_unknown_scopes_and_past_expiries_are_refused_and_store_nothing() {
        let keys = keys().await;
        let long = "a".repeat(MAX_NAME_LEN + 1);
        for bad in ["", "has space", "slash/name", "é", long.as_str()] {
            let error = keys
                .create(bad, &slug("support"), &scopes(), None, None)
                .await;
            assert!(
                matches!(error, Err(KeyError::InvalidName)),
                "{bad}: {error:?}"
            );
        }
        let ok_chars = "Bot_1.v-2";
        assert!(
            keys.create(ok_chars, &slug("support"), &scopes(), None, None)
                .await
                .is_ok()
        );

        let error = keys
            .create("x", &slug("curation"), &scopes(), None, None)
            .await;
        assert!(matches!(error, Err(KeyError::UnknownScope(_))), "{error:?}");
        let past = Some(Utc::now() - Duration::minutes(1));
        let error = keys
            .create("y", &slug("support"), &scopes(), past, None)
            .await;
        assert!(matches!(error, Err(KeyError::ExpiryInPast(_))), "{error:?}");

        let names: Vec<String> = keys
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(names, vec![ok_chars]);
    }

    #[tokio::test]
    async fn last_used_is_recorded_at_most_once_per_interval() {
        let keys = keys().await;
        let (_, key) = create(&keys, "bot").await;
        let t0 = now();
        let stored = |keys: &AgentKeys| {
            let keys = keys.clone();
            async move { keys.list().await.unwrap()[0].last_used_at }
        };
        assert_eq!(stored(&keys).await, None);

        let first = keys.authenticate(key.expose(), t0).await.unwrap();
        assert_eq!(first.last_used_at, Some(t0));
        assert_eq!(stored(&keys).await, Some(t0));

        let within = t0 + LAST_USED_INTERVAL - Duration::seconds(1);
        let second = keys.authenticate(key.expose(), within).await.unwrap();
        assert_eq!(second.last_used_at, Some(t0));
        assert_eq!(stored(&keys).await, Some(t0));

        let later = t0 + LAST_USED_INTERVAL + Duration::seconds(1);
        keys.authenticate(key.expose(), later).await.unwrap();
        assert_eq!(stored(&keys).await, Some(later));
    }

    #[tokio::test]
    async fn a_late_touch_never_moves_last_used_backwards() {
        let keys = keys().await;
        let (info, _) = create(&keys, "bot").await;
        let t0 = now();
        assert!(keys.store.touch_agent_key(info.id, t0, t0).await.unwrap());
        let earlier = t0 - Duration::seconds(5);
        assert!(
            !keys
                .store
                .touch_agent_key(info.id, earlier, earlier)
                .await
                .unwrap()
        );
        assert_eq!(keys.list().await.unwrap()[0].last_used_at, Some(t0));
    }
}
