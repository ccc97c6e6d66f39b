//! API tokens: bearer credentials of console users for the HTTP API (`/api/v1/holds`), for
//! a person's scripts or a chat bot's service user.
//!
//! A token is `sgp_` and 43 base62 characters (256 random bits), shown once; the store
//! keeps its SHA-256, so looking the hash up is a safe comparison. A token acts as its user
//! with the user's role *at each request*: disabling the user, lowering their role or
//! revoking the token takes effect on the next request, on every replica, because nothing
//! is cached. Tokens are issued and revoked through the admin door
//! ([`crate::admin::AdminService::create_api_token`]), so each has its audit event.

use std::fmt;

use chrono::{DateTime, Duration, Utc};

use crate::keys::hash_key;
use crate::store::api_tokens::ApiTokenInfo;
use crate::store::{Store, StoreError};
use crate::users::ConsoleUser;

pub const TOKEN_PREFIX: &str = "sgp_";
/// Characters of a token kept in clear for display: the tag and 8 random characters.
pub const DISPLAY_PREFIX_LEN: usize = 12;
pub const MAX_NAME_LEN: usize = 64;
/// `last_used_at` is rewritten at most this often per token.
const LAST_USED_INTERVAL: Duration = Duration::seconds(60);

#[derive(Debug, thiserror::Error)]
pub enum ApiTokenError {
    /// Unknown, revoked, expired, malformed, or its user is disabled: one variant, so a
    /// caller cannot tell which.
    #[error("invalid API token")]
    Invalid,
    #[error("a token name is 1 to {MAX_NAME_LEN} characters of letters, digits, `.`, `_` or `-`")]
    InvalidName,
    #[error("`{0}` already has an API token of that name")]
    NameTaken(String),
    #[error("the expiry {0} is not in the future")]
    ExpiryInPast(DateTime<Utc>),
    #[error("there is no console user `{0}`")]
    UnknownUser(String),
    #[error("console user `{0}` is disabled: a token would not work")]
    DisabledUser(String),
    #[error("only an admin issues or revokes another person's API tokens")]
    NotYours,
    #[error("there is no API token {0}")]
    NotFound(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApiTokenError {
    /// The field of the token form the refusal is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::InvalidName | Self::NameTaken(_) => Some("name"),
            Self::ExpiryInPast(_) => Some("expires_in_days"),
            Self::UnknownUser(_) | Self::DisabledUser(_) => Some("user"),
            _ => None,
        }
    }
}

pub(crate) fn validate_name(name: &str) -> Result<(), ApiTokenError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ApiTokenError::InvalidName)
    }
}

/// A freshly issued token in clear, to be shown to its issuer once. Never `Serialize`,
/// never printed by `Debug`, deliberately not `Clone`.
pub struct NewApiToken(String);

impl NewApiToken {
    pub(crate) fn generate() -> Self {
        Self(crate::keys::random_secret(TOKEN_PREFIX))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub(crate) fn hash(&self) -> String {
        hash_key(&self.0)
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.0[..DISPLAY_PREFIX_LEN]
    }
}

impl fmt::Debug for NewApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NewApiToken({}…<redacted>)", self.prefix())
    }
}

/// Who a request with a valid token acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHolder {
    /// The token's user as stored now (their current role).
    pub user: ConsoleUser,
    pub token: ApiTokenInfo,
}

/// Checking presented tokens and listing them.
#[derive(Debug, Clone)]
pub struct ApiTokens {
    store: Store,
}

impl ApiTokens {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// The holder of `presented` at `now`: an active token of an enabled user, else
    /// [`ApiTokenError::Invalid`].
    #[tracing::instrument(skip_all)]
    pub async fn authenticate(
        &self,
        presented: &str,
        now: DateTime<Utc>,
    ) -> Result<TokenHolder, ApiTokenError> {
        if !presented.starts_with(TOKEN_PREFIX) || presented.len() > 200 {
            return Err(ApiTokenError::Invalid);
        }
        let Some((token, user)) = self.store.api_token_holder(&hash_key(presented)).await? else {
            return Err(ApiTokenError::Invalid);
        };
        let user = ConsoleUser::try_from(user).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        if !token.is_active(now) || user.disabled {
            return Err(ApiTokenError::Invalid);
        }
        if token
            .last_used_at
            .is_none_or(|at| at < now - LAST_USED_INTERVAL)
        {
            self.store
                .touch_api_token(token.id, now, now - LAST_USED_INTERVAL)
                .await?;
        }
        Ok(TokenHolder { user, token })
    }

    /// Every token (for an admin), or those of the user `user_id`.
    pub async fn list(&self, user_id: Option<i64>) -> Result<Vec<ApiTokenInfo>, ApiTokenError> {
        Ok(self.store.list_api_tokens(user_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_is_tagged_long_and_never_printed_whole() {
        let token = NewApiToken::generate();
        assert!(token.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(token.expose().len(), TOKEN_PREFIX.len() + 43);
        let printed = format!("{token:?}");
        assert!(
            !printed.contains(&token.expose()[DISPLAY_PREFIX_LEN..]),
            "{printed}"
        );
    }

    #[test]
    fn a_token_name_is_a_short_plain_word() {
        assert!(validate_name("chat-ops.bot_1").is_ok());
        for bad in ["", "has space", "ünï", &"x".repeat(65)] {
            assert!(
                matches!(validate_name(bad), Err(ApiTokenError::InvalidName)),
                "{bad}"
            );
        }
    }
}
