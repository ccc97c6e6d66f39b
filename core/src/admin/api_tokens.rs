//! API tokens: issued and revoked through the door, so each has its `admin_change` event.
//! A person issues and revokes their own; an admin also those of anyone (a chat bot's
//! service user, a colleague who left).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{AdminError, AdminService, target};
use crate::api_tokens::{ApiTokenError, NewApiToken, validate_name};
use crate::store::StoreError;
use crate::store::api_tokens::{
    ApiTokenInfo, ApiTokenRow, insert_api_token_on, revoke_api_token_on,
};
use crate::users::{ConsoleRole, ConsoleUser};

fn token_target(user: &str, name: &str) -> String {
    target("api_token", &format!("{user}/{name}"))
}

/// Whether `actor` may issue or revoke a token of `owner`.
fn may_manage(actor: &ConsoleUser, owner: &str) -> Result<(), ApiTokenError> {
    if actor.name == owner || actor.role.allows(ConsoleRole::Admin) {
        Ok(())
    } else {
        Err(ApiTokenError::NotYours)
    }
}

impl AdminService {
    /// Issues an API token that acts as console user `owner`; the token is returned once.
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn create_api_token(
        &self,
        actor: &ConsoleUser,
        owner: &str,
        name: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(ApiTokenInfo, NewApiToken), AdminError> {
        may_manage(actor, owner)?;
        validate_name(name)?;
        let now = Utc::now();
        if let Some(expires) = expires_at.filter(|&expires| expires <= now) {
            return Err(ApiTokenError::ExpiryInPast(expires).into());
        }
        let user = self
            .store
            .find_user(owner)
            .await?
            .ok_or_else(|| ApiTokenError::UnknownUser(owner.to_owned()))?;
        if user.disabled {
            return Err(ApiTokenError::DisabledUser(owner.to_owned()).into());
        }
        let token = NewApiToken::generate();
        let (hash, prefix) = (token.hash(), token.prefix().to_owned());
        let (owner, name, created_by) = (owner.to_owned(), name.to_owned(), actor.name.clone());
        let taken = owner.clone();
        self.save_record(
            &actor.name,
            "api_token.create",
            token_target(&owner, &name),
            move |conn| {
                Box::pin(async move {
                    let row = ApiTokenRow {
                        user_id: user.id,
                        name: &name,
                        token_hash: &hash,
                        prefix: &prefix,
                        created_at: now,
                        created_by: &created_by,
                        expires_at,
                    };
                    let info = insert_api_token_on(conn, &row).await?;
                    let after = json!({
                        "user": info.user,
                        "prefix": info.prefix,
                        "expires_at": info.expires_at,
                    });
                    Ok(((info, token), Value::Null, after))
                })
            },
        )
        .await
        .map_err(|error| match error {
            AdminError::Conflict(_) => ApiTokenError::NameTaken(taken).into(),
            other => other,
        })
    }

    /// Revokes token `id`: the next request that presents it is refused. Revoking a revoked
    /// token changes nothing and keeps the first revocation time.
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn revoke_api_token(
        &self,
        actor: &ConsoleUser,
        id: i64,
    ) -> Result<ApiTokenInfo, AdminError> {
        let token = self
            .store
            .api_token(id)
            .await?
            .ok_or(ApiTokenError::NotFound(id))?;
        may_manage(actor, &token.user)?;
        self.save_record(
            &actor.name,
            "api_token.revoke",
            token_target(&token.user, &token.name),
            move |conn| {
                Box::pin(async move {
                    let info = revoke_api_token_on(conn, id, Utc::now())
                        .await?
                        .ok_or_else(|| StoreError::NotFound(format!("API token {id}")))?;
                    Ok((
                        info.clone(),
                        json!({"user": info.user, "prefix": info.prefix}),
                        json!({"revoked_at": info.revoked_at}),
                    ))
                })
            },
        )
        .await
    }
}
