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
//! The change and its audit event commit in one transaction through the audit writer: a
//! refused save leaves no event, and no change is ever stored without its event.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use rand::RngCore;
use rand::rngs::OsRng;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::SqliteConnection;
use tokio::sync::Mutex;

use crate::audit::{AuditError, AuditEvent, AuditLog, NewEvent};
use crate::keys::{AgentKeyInfo, AgentKeys, KeyError, NewAgentKey};
use crate::model::{
    CatalogError, Role, Scope, Skill, SkillVersion, ToolSpec, Upstream, UpstreamKind,
};
use crate::policy::{CatalogHandle, CompiledCatalog};
use crate::slug::Slug;
use crate::store::catalog::{self, Revised, ToolSync};
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
    /// The process's one audit writer; `catalog_code::apply` commits through it too.
    pub(crate) audit: AuditLog,
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

    /// Commits a catalog change and its `admin_change` event in one transaction through the
    /// audit writer (no change without its event, no event for a change that failed), then
    /// swaps the live snapshot. `change` runs inside the transaction and returns the value
    /// to hand back with the event's `before` and `after`.
    async fn save<T, C>(
        &self,
        actor: &str,
        action: &'static str,
        target: String,
        change: C,
    ) -> Result<T, AuthoringError>
    where
        T: Send + 'static,
        C: for<'c> FnOnce(
                &'c mut SqliteConnection,
            ) -> BoxFuture<'c, Result<(T, Value, Value), StoreError>>
            + Send
            + 'static,
    {
        let actor = actor.to_owned();
        let committed = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    let (value, before, after) = change(conn).await?;
                    let event = NewEvent::admin_change(&actor, action, &target, before, after);
                    Ok(Some((value, vec![event])))
                })
            })
            .await
            .map_err(from_audit)?;
        let value = committed.ok_or_else(|| {
            AuthoringError::Conflict("the change was not applied; reload and try again".into())
        })?;
        self.reload().await?;
        Ok(value)
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
        let role = role.clone();
        let target = target("role", role.slug.as_str());
        self.save(actor, "role.create", target, move |conn| {
            Box::pin(async move {
                let revision = catalog::create_role_on(conn, &role).await?;
                Ok((revision, Value::Null, snapshot(&role, revision)))
            })
        })
        .await
    }

    /// Saves `role` if nobody saved it since `expected_revision`; returns the new revision.
    #[tracing::instrument(skip(self, role), fields(role = %role.slug))]
    pub async fn update_role(
        &self,
        actor: &str,
        role: &Role,
        expected_revision: i64,
    ) -> Result<i64, AuthoringError> {
        let role = role.clone();
        let target = target("role", role.slug.as_str());
        self.save(actor, "role.update", target, move |conn| {
            Box::pin(async move {
                let before = catalog::list_roles(conn)
                    .await?
                    .into_iter()
                    .find(|r| r.value.slug == role.slug)
                    .ok_or_else(|| StoreError::NotFound(format!("role `{}`", role.slug)))?;
                let revision = catalog::update_role_on(conn, &role, expected_revision).await?;
                let before = snapshot(&before.value, before.revision);
                Ok((revision, before, snapshot(&role, revision)))
            })
        })
        .await
    }

    pub async fn scopes(&self) -> Result<Vec<Revised<Scope>>, AuthoringError> {
        Ok(self.store.list_scopes().await?)
    }

    #[tracing::instrument(skip(self, scope), fields(scope = %scope.slug))]
    pub async fn create_scope(&self, actor: &str, scope: &Scope) -> Result<i64, AuthoringError> {
        let scope = scope.clone();
        let target = target("scope", scope.slug.as_str());
        self.save(actor, "scope.create", target, move |conn| {
            Box::pin(async move {
                let revision = catalog::create_scope_on(conn, &scope).await?;
                Ok((revision, Value::Null, snapshot(&scope, revision)))
            })
        })
        .await
    }

    #[tracing::instrument(skip(self, scope), fields(scope = %scope.slug))]
    pub async fn update_scope(
        &self,
        actor: &str,
        scope: &Scope,
        expected_revision: i64,
    ) -> Result<i64, AuthoringError> {
        let scope = scope.clone();
        let target = target("scope", scope.slug.as_str());
        self.save(actor, "scope.update", target, move |conn| {
            Box::pin(async move {
                let before = catalog::list_scopes(conn)
                    .await?
                    .into_iter()
                    .find(|s| s.value.slug == scope.slug)
                    .ok_or_else(|| StoreError::NotFound(format!("scope `{}`", scope.slug)))?;
                let revision = catalog::update_scope_on(conn, &scope, expected_revision).await?;
                let before = snapshot(&before.value, before.revision);
                Ok((revision, before, snapshot(&scope, revision)))
            })
        })
        .await
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
        let skill = skill.clone();
        let target = target("skill", skill.slug.as_str());
        self.save(actor, "skill.create", target, move |conn| {
            Box::pin(async move {
                let saved = catalog::create_skill_on(conn, &skill).await?;
                let after = snapshot(&saved.value, saved.revision);
                Ok((saved, Value::Null, after))
            })
        })
        .await
    }

    /// Saves a new version of a skill and makes it current.
    #[tracing::instrument(skip(self, skill), fields(skill = %skill.slug))]
    pub async fn update_skill(
        &self,
        actor: &str,
        skill: &Skill,
        expected_revision: i64,
    ) -> Result<Revised<SkillVersion>, AuthoringError> {
        let skill = skill.clone();
        let target = target("skill", skill.slug.as_str());
        self.save(actor, "skill.update", target, move |conn| {
            Box::pin(async move {
                let before = current_skill(conn, &skill.slug).await?;
                let saved = catalog::update_skill_on(conn, &skill, expected_revision).await?;
                let before = snapshot(&before.value, before.revision);
                let after = snapshot(&saved.value, saved.revision);
                Ok((saved, before, after))
            })
        })
        .await
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
        let slug = slug.clone();
        let target = target("skill", slug.as_str());
        self.save(actor, "skill.restore", target, move |conn| {
            Box::pin(async move {
                let before = current_skill(conn, &slug).await?;
                let revision =
                    catalog::set_current_skill_version_on(conn, &slug, version, expected_revision)
                        .await?;
                Ok((
                    revision,
                    json!({ "revision": before.revision, "current_version": before.value.version }),
                    json!({ "revision": revision, "current_version": version }),
                ))
            })
        })
        .await
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
        let upstream = upstream.clone();
        let action = if self
            .store
            .list_upstreams()
            .await?
            .iter()
            .any(|u| u.name == upstream.name)
        {
            "upstream.update"
        } else {
            "upstream.create"
        };
        let target = target("upstream", upstream.name.as_str());
        self.save(actor, action, target, move |conn| {
            Box::pin(async move {
                let before = catalog::list_upstreams(conn)
                    .await?
                    .into_iter()
                    .find(|u| u.name == upstream.name);
                let stored = catalog::upstream_credentials_on(conn)
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
                catalog::upsert_upstream(conn, &upstream).await?;
                catalog::set_upstream_credentials_on(conn, &upstream.name, Some(&next)).await?;
                let describe = |u: &Upstream, c: &UpstreamCredentials| {
                    json!({ "upstream": u, "credentials": c.describe() })
                };
                let before = before.map_or(Value::Null, |b| describe(&b, &stored));
                Ok(((), before, describe(&upstream, &next)))
            })
        })
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
        let (tool, args) = (tool.to_owned(), args.to_vec());
        let target = target("tool", &tool);
        self.save(actor, "tool.sensitive_args", target, move |conn| {
            Box::pin(async move {
                catalog::set_sensitive_args_on(conn, &tool, &args).await?;
                Ok((
                    (),
                    json!({ "sensitive_args": before }),
                    json!({ "sensitive_args": args }),
                ))
            })
        })
        .await
    }

    /// Re-pins `tool` to the definition its upstream offers now, if that is still the one
    /// hashing to `expected_offer` (what the admin reviewed; else a conflict). Audited as
    /// `tool.admit` with the old and new pins; calls pass again with the next decision.
    /// Keeping a tool blocked is simply not admitting it. Returns the new pin.
    #[tracing::instrument(skip(self))]
    pub async fn admit_tool(
        &self,
        actor: &str,
        tool: &str,
        expected_offer: &str,
    ) -> Result<String, AuthoringError> {
        let (tool, expected) = (tool.to_owned(), expected_offer.to_owned());
        let target = target("tool", &tool);
        self.save(actor, "tool.admit", target, move |conn| {
            Box::pin(async move {
                let change = catalog::admit_tool_on(conn, &tool, &expected).await?;
                Ok((expected, change.before, change.after))
            })
        })
        .await
    }

    /// Saves what `upstream`'s `tools/list` offered against the pins (a new tool arrives
    /// quarantined, a changed one is quarantined at once, an offer equal to its pin again is
    /// released: see [`catalog::sync_tools_on`]), with one `admin_change` event by
    /// `upstream-sync:<upstream>` per quarantine or release, in one transaction; then swaps
    /// the live snapshot, so a quarantine bites with the next call.
    #[tracing::instrument(skip(self, listed), fields(upstream = %upstream, listed = listed.len()))]
    pub async fn sync_tools(
        &self,
        upstream: &Slug,
        listed: Vec<ToolSpec>,
    ) -> Result<ToolSync, AuthoringError> {
        let actor = format!("upstream-sync:{upstream}");
        let upstream = upstream.clone();
        let committed = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    let sync = catalog::sync_tools_on(conn, &upstream, &listed).await?;
                    let events = sync
                        .changes
                        .iter()
                        .map(|change| {
                            NewEvent::admin_change(
                                &actor,
                                change.action,
                                &target("tool", &change.tool),
                                change.before.clone(),
                                change.after.clone(),
                            )
                        })
                        .collect();
                    Ok(Some((sync, events)))
                })
            })
            .await
            .map_err(from_audit)?
            .ok_or_else(|| AuthoringError::Conflict("the tool sync was not applied".into()))?;
        self.reload().await?;
        Ok(committed)
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
        let prepared = AgentKeys::prepare(name, scope, &known, expires_at, Some(actor))?;
        let target = target("agent_key", prepared.name());
        let taken = name.to_owned();
        self.save(actor, "agent_key.create", target, move |conn| {
            Box::pin(async move {
                let (info, key) = prepared.insert_on(conn).await?;
                let after = json!({"scope": info.scope, "prefix": info.prefix, "expires_at": info.expires_at});
                Ok(((info, key), Value::Null, after))
            })
        })
        .await
        .map_err(|error| match error {
            AuthoringError::Conflict(_) => KeyError::NameTaken(taken).into(),
            other => other,
        })
    }

    #[tracing::instrument(skip(self))]
    pub async fn revoke_key(
        &self,
        actor: &str,
        name: &str,
    ) -> Result<AgentKeyInfo, AuthoringError> {
        let name = name.to_owned();
        let target = target("agent_key", &name);
        self.save(actor, "agent_key.revoke", target, move |conn| {
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

fn from_audit(error: AuditError) -> AuthoringError {
    match error {
        AuditError::Store(store) => AuthoringError::from(store),
        other => AuthoringError::Audit(other),
    }
}

/// The current version of a skill with its revision, read inside a save's transaction.
async fn current_skill(
    conn: &mut SqliteConnection,
    slug: &Slug,
) -> Result<Revised<SkillVersion>, StoreError> {
    catalog::list_skills(conn)
        .await?
        .into_iter()
        .find(|s| s.value.skill.slug == *slug)
        .ok_or_else(|| StoreError::NotFound(format!("skill `{slug}`")))
}
