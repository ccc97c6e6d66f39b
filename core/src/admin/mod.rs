//! The one door for admin changes: the catalog (roles, scopes, skills, tools, upstreams),
//! agent keys, console users and settings all change through [`AdminService`], whoever
//! asks: the console, `/api`, the CLI, the upstream sync or a catalog file.
//!
//! A change is validated, then stored together with one `admin_change` audit event per
//! entity it touched (who, before, after; the chain adds when) in one transaction through
//! the process's one audit writer: a refused change leaves no event, and no change is ever
//! stored without its event. Then the live [`CatalogHandle`] snapshot is recompiled and
//! swapped, so the next decision on `/mcp` uses it without a restart. Errors are typed and
//! name the field they are about ([`AdminError::field`]).
//!
//! What a session keeps: the skill versions it learned (recorded in the session and in its
//! `learn_granted` event) are what it was taught. Grants and limits always follow the live
//! catalog: tightening a limit or removing a role from a scope must bite at once for every
//! session, because an agent that learned a looser rule yesterday has no claim to it today.

mod api_tokens;
mod catalog;
mod error;
mod external;
mod identity;
mod inspection;
mod keys;
mod notifiers;
mod oauth;
mod settings;
mod shares;
mod sso;
mod sync;
mod users;
mod what_if;
mod workspaces;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::audit::{AuditError, AuditEvent, AuditLog, NewEvent};
use crate::policy::{CatalogHandle, CompiledCatalog};
use crate::store::Tx;
use crate::store::{Store, StoreError};

pub use catalog::CredentialUpdate;
pub use error::AdminError;
pub use external::{ExternalAdmission, external_credential_name};
pub use inspection::{INSPECTION_TARGET, PolicyIssue, policy_issues};
pub use notifiers::{EmailSpec, MAX_EXPIRING_MINUTES, WebhookSpec};
pub use oauth::{NewConsent, OAUTH_ACTOR};
pub use shares::SharesProjected;
pub use sso::SsoSignIn;
pub use what_if::proposal_digest;
pub use workspaces::{MAX_WORKSPACE_TITLE_CHARS, parse_workspace_slug, workspace_target};

/// How many change-log entries an entity's history shows.
pub const HISTORY_LIMIT: u32 = 50;

/// The audit target naming one entity, e.g. `role:billing-admin`.
pub fn target(kind: &str, name: &str) -> String {
    format!("{kind}:{name}")
}

fn snapshot(value: &impl Serialize, revision: i64) -> Value {
    json!({ "revision": revision, "value": value })
}

/// What one change did to one entity: the `admin_change` event it is recorded as.
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    pub action: String,
    /// As made by [`target`].
    pub target: String,
    pub before: Value,
    pub after: Value,
}

impl Changed {
    pub fn new(action: impl Into<String>, target: String, before: Value, after: Value) -> Self {
        Self {
            action: action.into(),
            target,
            before,
            after,
        }
    }
}

/// A change run inside the door's transaction: it returns the value to hand back and what
/// it changed, one [`Changed`] per entity.
pub(crate) type ChangeFn<T> = Box<
    dyn for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<(T, Vec<Changed>), StoreError>> + Send,
>;

/// The admin service. Cheap to share behind an `Arc`.
pub struct AdminService {
    store: Store,
    /// The process's one audit writer; `catalog_code::apply` commits through it too.
    pub(crate) audit: AuditLog,
    catalog: Arc<CatalogHandle>,
    /// Serializes reload-and-swap so two changes cannot swap their snapshots out of order.
    swap: Mutex<()>,
    /// The catalog generation the live snapshot was compiled at (or after).
    compiled_at: AtomicI64,
    /// The catalog file this process serves the catalog from (`serve --catalog`): then
    /// the file is the only way to author the catalog, and other authoring is refused.
    managed_by: Option<String>,
}

impl std::fmt::Debug for AdminService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminService").finish_non_exhaustive()
    }
}

impl AdminService {
    pub fn new(store: Store, audit: AuditLog, catalog: Arc<CatalogHandle>) -> Self {
        Self {
            store,
            audit,
            catalog,
            swap: Mutex::new(()),
            compiled_at: AtomicI64::new(i64::MIN),
            managed_by: None,
        }
    }

    /// Makes `file` the only source of the catalog (GitOps): authoring through anything but
    /// [`Self::apply_catalog`] is then refused with [`AdminError::ManagedAsCode`]. Users,
    /// settings, upstream credentials and the upstream sync stay open.
    pub fn managed_by(mut self, file: impl Into<String>) -> Self {
        self.managed_by = Some(file.into());
        self
    }

    /// The catalog file that is the only source of the catalog, when there is one.
    pub fn catalog_file(&self) -> Option<&str> {
        self.managed_by.as_deref()
    }

    /// Refuses a catalog authoring change while a file manages the catalog.
    pub(crate) fn authorable(&self) -> Result<(), AdminError> {
        match &self.managed_by {
            Some(file) => Err(AdminError::ManagedAsCode { file: file.clone() }),
            None => Ok(()),
        }
    }

    /// The service for a one-shot command on `store`: its own audit writer (the process's
    /// only one) and the stored catalog.
    pub async fn open(store: Store) -> Result<Self, AdminError> {
        let compiled = store.compiled_catalog().await?;
        let audit = AuditLog::new(store.clone());
        Ok(Self::new(
            store,
            audit,
            Arc::new(CatalogHandle::new(compiled)),
        ))
    }

    /// The live snapshot (what `/mcp` decides with right now).
    pub fn live(&self) -> Arc<CompiledCatalog> {
        self.catalog.load()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The process's one audit writer, for services that append through it.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Recompiles the catalog from the store and swaps it in for the next decision.
    pub async fn reload(&self) -> Result<(), AdminError> {
        let _guard = self.swap.lock().await;
        // Read before compiling: a change committed in between moves the generation past
        // this one, and the next check compiles again.
        let generation = self.store.catalog_generation().await?;
        let compiled = self.store.compiled_catalog().await?;
        self.catalog.replace(compiled);
        self.compiled_at.store(generation, Ordering::Release);
        Ok(())
    }

    /// Reloads when the stored catalog moved since the live snapshot was compiled: a
    /// change saved by another replica (or another process on the same SQLite file).
    /// Returns whether it reloaded.
    pub async fn reload_if_moved(&self) -> Result<bool, AdminError> {
        let stored = self.store.catalog_generation().await?;
        if stored == self.compiled_at.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.reload().await?;
        Ok(true)
    }

    /// The door itself. Runs `change` inside one transaction on the audit writer and
    /// commits it with one `admin_change` event by `actor` per [`Changed`] it returns (no
    /// change without its events, no event for a change that failed), then swaps the live
    /// snapshot.
    pub(crate) async fn commit<T: Send + 'static>(
        &self,
        actor: &str,
        change: ChangeFn<T>,
    ) -> Result<T, AdminError> {
        let value = self.record(actor, change).await?;
        self.reload().await?;
        Ok(value)
    }

    /// [`Self::commit`] for a change the compiled catalog does not hold (users, keys,
    /// settings, revision records): the same transaction and events, no recompile and swap.
    pub(crate) async fn record<T: Send + 'static>(
        &self,
        actor: &str,
        change: ChangeFn<T>,
    ) -> Result<T, AdminError> {
        let actor = actor.to_owned();
        let committed = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    let (value, changed) = change(conn).await?;
                    let events = changed
                        .iter()
                        .map(|c| {
                            NewEvent::admin_change(
                                &actor,
                                &c.action,
                                &c.target,
                                c.before.clone(),
                                c.after.clone(),
                            )
                        })
                        .collect();
                    Ok(Some((value, events)))
                })
            })
            .await
            .map_err(from_audit)?;
        committed.ok_or_else(|| {
            AdminError::Conflict("the change was not applied; reload and try again".into())
        })
    }

    /// A change of one catalog entity ([`Self::commit`]): `change` returns the value to
    /// hand back with the entity's `before` and `after`.
    async fn save<T, C>(
        &self,
        actor: &str,
        action: &'static str,
        target: String,
        change: C,
    ) -> Result<T, AdminError>
    where
        T: Send + 'static,
        C: for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<(T, Value, Value), StoreError>>
            + Send
            + 'static,
    {
        self.commit(actor, one_entity(action, target, change)).await
    }

    /// A change of one entity the compiled catalog does not hold ([`Self::record`]).
    async fn save_record<T, C>(
        &self,
        actor: &str,
        action: &'static str,
        target: String,
        change: C,
    ) -> Result<T, AdminError>
    where
        T: Send + 'static,
        C: for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<(T, Value, Value), StoreError>>
            + Send
            + 'static,
    {
        self.record(actor, one_entity(action, target, change)).await
    }

    /// An entity's change log (`target` as made by [`target`]), newest first.
    pub async fn history(&self, target: &str) -> Result<Vec<AuditEvent>, AdminError> {
        Ok(self.audit.admin_changes(target, HISTORY_LIMIT).await?)
    }

    /// Audits an admin-side request that was refused and changed nothing (an
    /// `admin_refused` event by `actor` through the process's audit writer), so refusals are
    /// on the record like changes. `code` is a short class (`TOO_LARGE`, `INVALID`, …),
    /// `reason` what the requester was told; both are shortened to a bounded size. Call it
    /// before answering the refusal: if it fails, answer a server error instead.
    pub async fn record_refusal(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        code: &str,
        reason: &str,
    ) -> Result<(), AdminError> {
        let event = refusal_event(actor, action, target, code, reason);
        self.audit.append(event).await.map_err(from_audit)?;
        Ok(())
    }
}

/// The `admin_refused` event of a refused admin-side request, every field shortened to a
/// bounded size: the one way such an event is built, by this service and by the other
/// reviewer-side services (holds).
pub(crate) fn refusal_event(
    actor: &str,
    action: &str,
    target: &str,
    code: &str,
    reason: &str,
) -> NewEvent {
    NewEvent::admin_refused(
        &bounded(actor, 200),
        &bounded(action, 200),
        &bounded(target, 1000),
        &bounded(code, 100),
        &bounded(reason, 2000),
    )
}

/// `text`, cut to `max` characters (marked with `…`) so an outsider's input cannot grow
/// an audit event without bound.
fn bounded(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut head: String = text.chars().take(max).collect();
    head.push('…');
    head
}

/// A change of one entity as a [`ChangeFn`] reporting that entity's [`Changed`].
fn one_entity<T, C>(action: &'static str, target: String, change: C) -> ChangeFn<T>
where
    T: Send + 'static,
    C: for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<(T, Value, Value), StoreError>>
        + Send
        + 'static,
{
    Box::new(move |conn| {
        Box::pin(async move {
            let (value, before, after) = change(conn).await?;
            Ok((value, vec![Changed::new(action, target, before, after)]))
        })
    })
}

fn from_audit(error: AuditError) -> AdminError {
    match error {
        AuditError::Store(store) => AdminError::from(store),
        other => AdminError::Audit(other),
    }
}
