//! Agent keys: created and revoked through the door, so each has its `admin_change` event.

use chrono::{DateTime, Utc};
use rand::RngCore;
use rand::rngs::OsRng;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{AdminError, AdminService, target};
use crate::keys::{AgentKeyInfo, AgentKeys, KeyError, NewAgentKey};
use crate::slug::Slug;
use crate::store::StoreError;

/// How long a key stashed for a page without JavaScript waits to be shown.
const REVEAL_TTL: chrono::Duration = chrono::Duration::seconds(60);

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl AdminService {
    /// Creates an agent key for a scope of the catalog; the key is returned once.
    #[tracing::instrument(skip(self))]
    pub async fn create_key(
        &self,
        actor: &str,
        name: &str,
        scope: &Slug,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(AgentKeyInfo, NewAgentKey), AdminError> {
        self.authorable()?;
        let known: Vec<Slug> = self
            .live()
            .catalog()
            .scopes
            .iter()
            .map(|s| s.slug.clone())
            .collect();
        let prepared = AgentKeys::prepare(name, scope, &known, expires_at, Some(actor))?
            .for_workspace(self.store().workspace_slug());
        let target = target("agent_key", prepared.name());
        let taken = name.to_owned();
        self.save_record(actor, "agent_key.create", target, move |conn| {
            Box::pin(async move {
                let (info, key) = prepared.insert_on(conn).await?;
                let after = json!({"scope": info.scope, "prefix": info.prefix, "expires_at": info.expires_at});
                Ok(((info, key), Value::Null, after))
            })
        })
        .await
        .map_err(|error| match error {
            AdminError::Conflict(_) => KeyError::NameTaken(taken).into(),
            other => other,
        })
    }

    #[tracing::instrument(skip(self))]
    pub async fn revoke_key(&self, actor: &str, name: &str) -> Result<AgentKeyInfo, AdminError> {
        self.authorable()?;
        let name = name.to_owned();
        let target = target("agent_key", &name);
        self.save_record(actor, "agent_key.revoke", target, move |conn| {
            Box::pin(async move {
                let info = crate::store::keys::revoke_agent_key_on(conn, &name, Utc::now())
                    .await?
                    .ok_or_else(|| StoreError::NotFound(format!("agent key `{name}`")))?;
                Ok((
                    info.clone(),
                    json!({"scope": info.scope, "prefix": info.prefix}),
                    json!({"revoked_at": info.revoked_at}),
                ))
            })
        })
        .await
    }

    /// Keeps a new key's display `payload` for one later render by `user_id` (a form post
    /// without JavaScript is answered by a redirect, which cannot carry the key). Returns
    /// the random token the redirect names.
    pub async fn stash_key_reveal(
        &self,
        user_id: i64,
        payload: &str,
    ) -> Result<String, AdminError> {
        let mut bytes = [0u8; 32];
        OsRng.fill_bytes(&mut bytes);
        let token = hex::encode(bytes);
        self.store
            .insert_key_reveal(
                &token_hash(&token),
                user_id,
                payload,
                Utc::now() + REVEAL_TTL,
            )
            .await?;
        Ok(token)
    }

    /// The payload stashed under `token` by `user_id`, at most once and within a minute.
    pub async fn take_key_reveal(
        &self,
        user_id: i64,
        token: &str,
    ) -> Result<Option<String>, AdminError> {
        Ok(self
            .store
            .take_key_reveal(&token_hash(token), user_id, Utc::now())
            .await?)
    }
}
