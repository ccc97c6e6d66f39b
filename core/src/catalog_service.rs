//! Catalog authoring: every admin save goes through here.
//!
//! A save is validated and stored with optimistic concurrency (the store refuses a stale
//! revision), recorded as an `admin_change` audit event (who, before, after; the chain
//! adds when), and then the live [`CatalogHandle`] snapshot is recompiled and swapped, so
//! the next decision on `/mcp` uses it without a restart.
//!
//! What a session keeps: the skill versions it learned (recorded in the session and in its
//! `learn_granted` event) are what it was taught. Grants and limits always follow the live
//! catalog: tightening a limit or removing a role from a scope must bite at once for every
//! session, because an agent that learned a looser rule yesterday has no claim to it today.
//!
//! The audit event is appended after the store commits: a refused save leaves no event,
//! and a failed append is reported to the admin (the change itself stays saved).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use rand::RngCore;
use rand::rngs::OsRng;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::audit::{AuditError, AuditEvent, AuditLog, NewEvent};
use crate::keys::{AgentKeyInfo, AgentKeys, KeyError, NewAgentKey};
use crate::model::{CatalogError, Role, Scope, Skill, SkillVersion, Upstream, UpstreamKind};
use crate::policy::{CatalogHandle, CompiledCatalog};
use crate::slug::Slug;
use crate::store::catalog::Revised;
use crate::store::{Store, StoreError};
use crate::upstream::{CredentialSummary, Secret, UpstreamCredentials};

/// What saving an upstream does to its stored credentials: each part given replaces the
/// stored one, a part left out is kept (the console never shows a stored secret, so it
/// cannot send it back), and `clear` first removes everything stored.
#[derive(Default)]
pub struct CredentialUpdate {
    pub env: Option<BTreeMap<String, Secret>>,
    pub bearer: Option<Secret>,
    pub clear: bool,
}

fn is_env_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// How long a key stashed for a page without JavaScript waits to be shown.
const REVEAL_TTL: chrono::Duration = chrono::Duration::seconds(60);

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// How many change-log entries an entity's history shows.
pub const HISTORY_LIMIT: u32 = 50;

/// Why an authoring action was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthoringError {
    /// The entry is invalid; nothing was saved.
    #[error(transparent)]
    Invalid(#[from] CatalogError),
    /// Someone else saved first, or the entry already exists; nothing was saved.
    #[error("{0}")]
    Conflict(String),
    #[error("{0} not found")]
    NotFound(String),
    /// Malformed input that is not a catalog entry (e.g. an upstream URL).
    #[error("{0}")]
    BadInput(String),
    /// An agent-key request the key service refused (bad name, unknown scope, …).
    #[error("{0}")]
    Key(String),
    #[error("the catalog store failed: {0}")]
    Store(StoreError),
    #[error("the change was saved but could not be audited: {0}")]
    Audit(#[from] AuditError),
}

impl AuthoringError {
    /// Whether the admin can fix this by changing the input (as opposed to a server fault).
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            Self::Invalid(_)
                | Self::Conflict(_)
                | Self::NotFound(_)
                | Self::Key(_)
                | Self::BadInput(_)
        )
    }
}

impl From<StoreError> for AuthoringError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Invalid(e) => Self::Invalid(e),
            StoreError::Conflict(m) => Self::Conflict(m),
            StoreError::NotFound(m) => Self::NotFound(m),
            other => Self::Store(other),
        }
    }
}

impl From<KeyError> for AuthoringError {
    fn from(error: KeyError) -> Self {
        match error {
            KeyError::Store(e) => e.into(),
            other => Self::Key(other.to_string()),
        }
    }
}

/// The audit target naming one catalog entity, e.g. `role:billing-admin`.
pub fn target(kind: &str, name: &str) -> String {
    format!("{kind}:{name}")
}

fn snapshot(value: &impl Serialize, revision: i64) -> Value {
    json!({ "revision": revision, "value": value })
}

/// The authoring service the console calls. Cheap to share behind an `Arc`.
pub struct CatalogService {
    store: Store,
    audit: AuditLog,
    keys: AgentKeys,
    catalog: Arc<CatalogHandle>,
    /// Serializes reload-and-swap so two saves cannot swap their snapshots out of order.
    swap: Mutex<()>,
}

impl std::fmt::Debug for CatalogService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogService").finish_non_exhaustive()
    }
}

impl CatalogService {
    pub fn new(store: Store, audit: AuditLog, catalog: Arc<CatalogHandle>) -> Self {
        Self {
            keys: AgentKeys::new(store.clone()),
            store,
            audit,
            catalog,
            swap: Mutex::new(()),
        }
    }

    /// The live snapshot (what `/mcp` decides with right now).
    pub fn live(&self) -> Arc<CompiledCatalog> {
        self.catalog.load()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Recompiles the catalog from the store and swaps it in for the next decision.
    pub async fn reload(&self) -> Result<(), AuthoringError> {
        let _guard = self.swap.lock().await;
        let compiled = self.store.compiled_catalog().await?;
        self.catalog.replace(compiled);
        Ok(())
    }

    async fn record(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        before: Value,
        after: Value,
    ) -> Result<(), AuthoringError> {
        self.audit
            .append(NewEvent::admin_change(actor, action, target, before, after))
            .await?;
        Ok(())
    }

    /// Stores, audits, and swaps: the tail every catalog save shares.
    async fn commit(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        before: Value,
        after: Value,
    ) -> Result<(), AuthoringError> {
        // Swap first: the change is committed, so the gateway must see it even when the
        // audit append fails afterwards.
        let swapped = self.reload().await;
        self.record(actor, action, target, before, after).await?;
        swapped
    }

    /// Roles with their revisions, in slug order.
    pub async fn roles(&self) -> Result<Vec<Revised<Role>>, AuthoringError> {
        Ok(self.store.list_roles().await?)
    }

    pub async fn role(&self, slug: &Slug) -> Result<Option<Revised<Role>>, AuthoringError> {
        Ok(self.store.get_role(slug).await?)
    }

    #[tracing::instrument(skip(self, role), fields(role = %role.slug))]
    pub async fn create_role(&self, actor: &str, role: &Role) -> Result<i64, AuthoringError> {
        let revision = self.store.create_role(role).await?;
        self.commit(
            actor,
            "role.create",
            &target("role", role.slug.as_str()),
            Value::Null,
            snapshot(role, revision),
        )
        .await?;
        Ok(revision)
    }

    /// Saves `role` if nobody saved it since `expected_revision`; returns the new revision.
    #[tracing::instrument(skip(self, role), fields(role = %role.slug))]
    pub async fn update_role(
        &self,
        actor: &str,
        role: &Role,
        expected_revision: i64,
    ) -> Result<i64, AuthoringError> {
        let before = self
            .store
            .get_role(&role.slug)
            .await?
            .ok_or_else(|| AuthoringError::NotFound(format!("role `{}`", role.slug)))?;
        let revision = self.store.update_role(role, expected_revision).await?;
        self.commit(
            actor,
            "role.update",
            &target("role", role.slug.as_str()),
            snapshot(&before.value, before.revision),
            snapshot(role, revision),
        )
        .await?;
        Ok(revision)
    }

    pub async fn scopes(&self) -> Result<Vec<Revised<Scope>>, AuthoringError> {
        Ok(self.store.list_scopes().await?)
    }

    #[tracing::instrument(skip(self, scope), fields(scope = %scope.slug))]
    pub async fn create_scope(&self, actor: &str, scope: &Scope) -> Result<i64, AuthoringError> {
        let revision = self.store.create_scope(scope).await?;
        self.commit(
            actor,
            "scope.create",
            &target("scope", scope.slug.as_str()),
            Value::Null,
            snapshot(scope, revision),
        )
        .await?;
        Ok(revision)
    }

    #[tracing::instrument(skip(self, scope), fields(scope = %scope.slug))]
    pub async fn update_scope(
        &self,
        actor: &str,
        scope: &Scope,
        expected_revision: i64,
    ) -> Result<i64, AuthoringError> {
        let before = self
            .scopes()
            .await?
            .into_iter()
            .find(|s| s.value.slug == scope.slug)
            .ok_or_else(|| AuthoringError::NotFound(format!("scope `{}`", scope.slug)))?;
        let revision = self.store.update_scope(scope, expected_revision).await?;
        self.commit(
            actor,
            "scope.update",
            &target("scope", scope.slug.as_str()),
            snapshot(&before.value, before.revision),
            snapshot(scope, revision),
        )
        .await?;
        Ok(revision)
    }

    /// Current skill versions with their revisions.
    pub async fn skills(&self) -> Result<Vec<Revised<SkillVersion>>, AuthoringError> {
        Ok(self.store.list_skills().await?)
    }

    pub async fn skill_versions(&self, slug: &Slug) -> Result<Vec<SkillVersion>, AuthoringError> {
        Ok(self.store.skill_versions(slug).await?)
    }

    #[tracing::instrument(skip(self, skill), fields(skill = %skill.slug))]
    pub async fn create_skill(
        &self,
        actor: &str,
        skill: &Skill,
    ) -> Result<Revised<SkillVersion>, AuthoringError> {
        let saved = self.store.create_skill(skill).await?;
        self.commit(
            actor,
            "skill.create",
            &target("skill", skill.slug.as_str()),
            Value::Null,
            snapshot(&saved.value, saved.revision),
        )
        .await?;
        Ok(saved)
    }

    /// Saves a new version of a skill and makes it current.
    #[tracing::instrument(skip(self, skill), fields(skill = %skill.slug))]
    pub async fn update_skill(
        &self,
        actor: &str,
        skill: &Skill,
        expected_revision: i64,
    ) -> Result<Revised<SkillVersion>, AuthoringError> {
        let before = self
            .skills()
            .await?
            .into_iter()
            .find(|s| s.value.skill.slug == skill.slug)
            .ok_or_else(|| AuthoringError::NotFound(format!("skill `{}`", skill.slug)))?;
        let saved = self.store.update_skill(skill, expected_revision).await?;
        self.commit(
            actor,
            "skill.update",
            &target("skill", skill.slug.as_str()),
            snapshot(&before.value, before.revision),
            snapshot(&saved.value, saved.revision),
        )
        .await?;
        Ok(saved)
    }

    /// Makes an earlier version current again; returns the new revision.
    #[tracing::instrument(skip(self))]
    pub async fn restore_skill_version(
        &self,
        actor: &str,
        slug: &Slug,
        version: u32,
        expected_revision: i64,
    ) -> Result<i64, AuthoringError> {
        let before = self
            .skills()
            .await?
            .into_iter()
            .find(|s| s.value.skill.slug == *slug)
            .ok_or_else(|| AuthoringError::NotFound(format!("skill `{slug}`")))?;
        let revision = self
            .store
            .set_current_skill_version(slug, version, expected_revision)
            .await?;
        self.commit(
            actor,
            "skill.restore",
            &target("skill", slug.as_str()),
            json!({ "revision": before.revision, "current_version": before.value.version }),
            json!({ "revision": revision, "current_version": version }),
        )
        .await?;
        Ok(revision)
    }

    /// Adds or changes an upstream (its tools arrive with the next sync), and its stored
    /// credentials as `credentials` says. The audit records which environment keys exist and
    /// whether a token is set, never a value.
    #[tracing::instrument(skip(self, upstream, credentials), fields(upstream = %upstream.name))]
    pub async fn register_upstream(
        &self,
        actor: &str,
        upstream: &Upstream,
        credentials: CredentialUpdate,
    ) -> Result<(), AuthoringError> {
        if let UpstreamKind::Stdio { command, .. } = &upstream.kind
            && command.trim().is_empty()
        {
            return Err(CatalogError::Empty("upstream command").into());
        }
        // The upstream client has no TLS backend (see upstream::connection): refuse an
        // https:// URL here rather than store an upstream that can never connect.
        if let UpstreamKind::Http { url } = &upstream.kind
            && !url.starts_with("http://")
        {
            return Err(AuthoringError::BadInput(format!(
                "`{url}` is not an http:// URL (this build has no TLS backend for upstreams)"
            )));
        }
        if matches!(upstream.kind, UpstreamKind::Builtin)
            || upstream.name.as_str() == crate::revisions::curator::CURATION_UPSTREAM
        {
            return Err(AuthoringError::BadInput(format!(
                "`{}` is the built-in curation upstream; choose another name",
                upstream.name
            )));
        }
        if let Some(key) = credentials
            .env
            .as_ref()
            .and_then(|env| env.keys().find(|k| !is_env_key(k)))
        {
            return Err(AuthoringError::BadInput(format!(
                "`{key}` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
            )));
        }
        let before = self
            .store
            .list_upstreams()
            .await?
            .into_iter()
            .find(|u| u.name == upstream.name);
        let stored = self
            .store
            .upstream_credentials()
            .await?
            .remove(upstream.name.as_str())
            .unwrap_or_default();
        let mut next = if credentials.clear {
            UpstreamCredentials::default()
        } else {
            stored.clone()
        };
        if let Some(env) = credentials.env {
            next.env = env;
        }
        if let Some(bearer) = credentials.bearer {
            next.bearer = Some(bearer);
        }
        self.store.upsert_upstream(upstream).await?;
        self.store
            .set_upstream_credentials(&upstream.name, Some(&next))
            .await?;
        let describe = |u: &Upstream, c: &UpstreamCredentials| json!({ "upstream": u, "credentials": c.describe() });
        self.record(
            actor,
            if before.is_some() {
                "upstream.update"
            } else {
                "upstream.create"
            },
            &target("upstream", upstream.name.as_str()),
            before.map_or(Value::Null, |b| describe(&b, &stored)),
            describe(upstream, &next),
        )
        .await
    }

    /// What may be shown about each upstream's stored credentials.
    pub async fn credential_summaries(
        &self,
    ) -> Result<BTreeMap<String, CredentialSummary>, AuthoringError> {
        Ok(self
            .store
            .upstream_credentials()
            .await?
            .into_iter()
            .map(|(name, c)| (name, c.describe()))
            .collect())
    }

    /// Marks which arguments of a tool the audit stores as a digest only.
    #[tracing::instrument(skip(self))]
    pub async fn set_sensitive_args(
        &self,
        actor: &str,
        tool: &str,
        args: &[String],
    ) -> Result<(), AuthoringError> {
        let before = self
            .live()
            .tool(tool)
            .map(|t| t.spec.sensitive_args.clone())
            .ok_or_else(|| AuthoringError::NotFound(format!("tool `{tool}`")))?;
        self.store.set_sensitive_args(tool, args).await?;
        self.commit(
            actor,
            "tool.sensitive_args",
            &target("tool", tool),
            json!({ "sensitive_args": before }),
            json!({ "sensitive_args": args }),
        )
        .await
    }

    /// Creates an agent key for a scope of the catalog; the key is returned once.
    #[tracing::instrument(skip(self))]
    pub async fn create_key(
        &self,
        actor: &str,
        name: &str,
        scope: &Slug,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(AgentKeyInfo, NewAgentKey), AuthoringError> {
        let known: Vec<Slug> = self
            .live()
            .catalog()
            .scopes
            .iter()
            .map(|s| s.slug.clone())
            .collect();
        let (info, key) = self
            .keys
            .create(name, scope, &known, expires_at, Some(actor))
            .await?;
        self.record(
            actor,
            "agent_key.create",
            &target("agent_key", &info.name),
            Value::Null,
            json!({"scope": info.scope, "prefix": info.prefix, "expires_at": info.expires_at}),
        )
        .await?;
        Ok((info, key))
    }

    #[tracing::instrument(skip(self))]
    pub async fn revoke_key(
        &self,
        actor: &str,
        name: &str,
    ) -> Result<AgentKeyInfo, AuthoringError> {
        let info = self.keys.revoke(name).await?;
        self.record(
            actor,
            "agent_key.revoke",
            &target("agent_key", &info.name),
            json!({"scope": info.scope, "prefix": info.prefix}),
            json!({"revoked_at": info.revoked_at}),
        )
        .await?;
        Ok(info)
    }

    /// Keeps a new key's display `payload` for one later render by `user_id` (a form post
    /// without JavaScript is answered by a redirect, which cannot carry the key). Returns
    /// the random token the redirect names.
    pub async fn stash_key_reveal(
        &self,
        user_id: i64,
        payload: &str,
    ) -> Result<String, AuthoringError> {
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
    ) -> Result<Option<String>, AuthoringError> {
        Ok(self
            .store
            .take_key_reveal(&token_hash(token), user_id, Utc::now())
            .await?)
    }

    /// An entity's change log (`target` as made by [`target`]), newest first.
    pub async fn history(&self, target: &str) -> Result<Vec<AuditEvent>, AuthoringError> {
        Ok(self.audit.admin_changes(target, HISTORY_LIMIT).await?)
    }
}
