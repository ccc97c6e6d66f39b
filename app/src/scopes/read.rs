//! Read-only server function of the scopes page: scopes and agent keys.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::api::Paged;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeRow {
    pub slug: String,
    pub description: String,
    pub roles: Vec<String>,
    /// Each guardrail as the sentence an agent reads.
    pub guardrails: Vec<String>,
}

/// An agent key as the console lists it: never the key itself, only its display prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRow {
    pub name: String,
    pub scope: String,
    pub prefix: String,
    pub created_at: String,
    pub created_by: Option<String>,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
    /// `active`, `expired` or `revoked`.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopesOverview {
    pub scopes: Paged<ScopeRow>,
    pub keys: Paged<KeyRow>,
    /// The agents that came with a trusted identity provider's tokens: one row per subject,
    /// named `SUBJECT@ISSUER`, its issuer as `created_by`.
    pub external: Paged<KeyRow>,
}

#[server(prefix = "/console/api")]
pub async fn scopes_and_keys(
    scope_page: usize,
    key_page: usize,
    external_page: usize,
) -> Result<ScopesOverview, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let compiled = ctx.catalog.load();
    let keys = ctx
        .keys
        .list()
        .await
        .map_err(crate::shared::ssr::internal)?;
    let external = ctx
        .keys
        .list_external()
        .await
        .map_err(crate::shared::ssr::internal)?;
    Ok(ScopesOverview {
        scopes: ssr::page_of(&compiled.catalog().scopes, scope_page, |s| ScopeRow {
            slug: s.slug.as_str().to_owned(),
            description: s.description.clone(),
            roles: s.roles.iter().map(|r| r.as_str().to_owned()).collect(),
            guardrails: s.guardrail_sentences(),
        }),
        keys: ssr::page_of(&keys, key_page, ssr::key_row),
        external: ssr::page_of(&external, external_page, ssr::key_row),
    })
}

#[cfg(feature = "ssr")]
mod ssr {
    use skillgate_core::keys::AgentKeyInfo;

    use super::KeyRow;
    pub use crate::catalog::api::ssr::*;

    const STAMP: &str = "%Y-%m-%d %H:%M UTC";

    pub fn key_row(key: &AgentKeyInfo) -> KeyRow {
        let status = if key.revoked_at.is_some() {
            "revoked"
        } else if key.is_active(now_like(&key.created_at)) {
            "active"
        } else {
            "expired"
        };
        KeyRow {
            name: key.name.clone(),
            scope: key.scope.as_str().to_owned(),
            prefix: key.prefix.clone(),
            created_at: key.created_at.format(STAMP).to_string(),
            created_by: key.created_by.clone(),
            expires_at: key.expires_at.map(|t| t.format(STAMP).to_string()),
            revoked_at: key.revoked_at.map(|t| t.format(STAMP).to_string()),
            last_used_at: key.last_used_at.map(|t| t.format(STAMP).to_string()),
            status: status.to_owned(),
        }
    }

    /// The current time in the type of `_like`: the key list's UTC timestamps, without a
    /// direct `chrono` dependency in this crate.
    fn now_like<T: From<std::time::SystemTime>>(_like: &T) -> T {
        T::from(std::time::SystemTime::now())
    }
}
