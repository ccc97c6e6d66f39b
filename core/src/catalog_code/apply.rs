//! Applying a catalog file: check it whole, plan, then write every change in one
//! transaction with one `admin_change` event per entity, through the admin door's
//! audit writer, and swap the live snapshot.
//!
//! [`AdminService::apply_catalog`] is the whole job, for `skillgate catalog apply` and for
//! a server that applies a file at start and when it changes.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::document::CatalogDocument;
use super::plan::{Action, Change, Plan, Write, plan};
use super::shared::shared_issues;
use super::validate::{Desired, Issue, parse, resolve};
use crate::admin::{AdminError, AdminService};
use crate::audit::{AuditError, NewEvent};
use crate::keys::{AgentKeyInfo, AgentKeys, NewAgentKey};
use crate::model::Catalog;
use crate::store::StoreError;
use crate::store::Tx;
use crate::store::catalog::{load_catalog, put_inspection_policy_on, upsert_upstream};
use crate::store::catalog_code::{
    catalog_state_on, delete_role_on, delete_scope_on, delete_skill_on, delete_tool_on,
    delete_upstream_on, put_role_on, put_scope_on, put_skill_on, put_tool_on, set_key_expiry_on,
};
use crate::store::keys::revoke_agent_key_on;

/// A parsed catalog file and the digest of its bytes.
#[derive(Debug, Clone)]
pub struct CatalogFile {
    document: CatalogDocument,
    digest: String,
}

impl CatalogFile {
    /// Parses the bytes of a file; a YAML or type error is an [`ApplyError::Invalid`]
    /// naming the path inside the file.
    pub fn parse(bytes: &[u8]) -> Result<Self, ApplyError> {
        Ok(Self {
            document: parse(bytes).map_err(ApplyError::Invalid)?,
            digest: crate::audit::chain::sha256_hex(bytes),
        })
    }

    pub fn document(&self) -> &CatalogDocument {
        &self.document
    }

    /// Lowercase hex SHA-256 of the file's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Who the audit says made the changes: `catalog-apply:<first 12 hex digits>`.
    pub fn actor(&self) -> String {
        crate::names::Actor::catalog_apply(&self.digest).to_string()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Remove what the file does not list (agent keys: revoke them).
    pub prune: bool,
    /// Check and plan only; write nothing.
    pub dry_run: bool,
}

/// An agent key the apply created: the secret is here once, to be shown once.
#[derive(Debug)]
pub struct CreatedKey {
    pub info: AgentKeyInfo,
    pub key: NewAgentKey,
}

#[derive(Debug)]
pub struct ApplyReport {
    pub actor: String,
    pub plan: Plan,
    /// Whether the plan was written (false for a dry run and for "no changes").
    pub applied: bool,
    pub created_keys: Vec<CreatedKey>,
    /// For a dry run: the catalog the file would make, for a what-if replay against it.
    pub proposed: Option<Catalog>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The file is invalid; nothing was written.
    #[error("{}", issues_text(.0))]
    Invalid(Vec<Issue>),
    #[error("the catalog store failed: {0}")]
    Store(StoreError),
    #[error("the catalog could not be applied: {0}")]
    Audit(AuditError),
    #[error("the catalog was applied but the live snapshot could not be reloaded: {0}")]
    Reload(AdminError),
}

impl From<StoreError> for ApplyError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

fn issues_text(issues: &[Issue]) -> String {
    let mut text = format!(
        "the catalog file has {} problem{}; nothing was changed:",
        issues.len(),
        if issues.len() == 1 { "" } else { "s" }
    );
    for issue in issues {
        text.push_str("\n  ");
        text.push_str(&issue.to_string());
    }
    text
}

type Outcome = Result<(Plan, Vec<CreatedKey>), Vec<Issue>>;

impl AdminService {
    /// Makes the catalog match `file`: checks the whole file against the catalog it would
    /// produce (every problem named by its path), plans, and, unless `dry_run`, writes the
    /// plan and one `admin_change` event per entity (actor [`CatalogFile::actor`]) in one
    /// transaction, then swaps the live snapshot. The check and the plan are made again
    /// inside the transaction, so a change saved meanwhile is planned against, not lost.
    /// Nothing to change writes nothing.
    #[tracing::instrument(skip(self, file), fields(digest = %file.digest()))]
    pub async fn apply_catalog(
        &self,
        file: &CatalogFile,
        options: ApplyOptions,
    ) -> Result<ApplyReport, ApplyError> {
        let actor = file.actor();
        let report = |plan, applied, created_keys| ApplyReport {
            actor: actor.clone(),
            plan,
            applied,
            created_keys,
            proposed: None,
        };
        if options.dry_run {
            let now = Utc::now();
            let state = super::export::state(self.store()).await?;
            let desired = resolve(&state, file.document(), options.prune, now)
                .map_err(ApplyError::Invalid)?;
            let planned = plan(&state, &desired, options.prune, now);
            let checked = planned.clone();
            let issues = self
                .store()
                .with_conn(move |tx| Box::pin(async move { shared_issues(tx, &checked).await }))
                .await?;
            if !issues.is_empty() {
                return Err(ApplyError::Invalid(issues));
            }
            let mut dry = report(planned, false, Vec::new());
            dry.proposed = Some(desired.catalog);
            return Ok(dry);
        }
        let document = file.document().clone();
        let prune = options.prune;
        let by = actor.clone();
        let workspace = self.store().workspace_slug().to_owned();
        let outcome: Option<Outcome> = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    let now = Utc::now();
                    let state = catalog_state_on(&mut *conn).await?;
                    let desired = match resolve(&state, &document, prune, now) {
                        Ok(desired) => desired,
                        // Nothing written yet: committing no events commits nothing.
                        Err(issues) => return Ok(Some((Err(issues), Vec::new()))),
                    };
                    let plan = plan(&state, &desired, prune, now);
                    if plan.is_empty() {
                        return Ok(None);
                    }
                    let issues = shared_issues(conn, &plan).await?;
                    if !issues.is_empty() {
                        return Ok(Some((Err(issues), Vec::new())));
                    }
                    let (events, created) =
                        execute_on(conn, &plan, &desired, &by, &workspace, now).await?;
                    Ok(Some((Ok((plan, created)), events)))
                })
            })
            .await
            .map_err(|e| match e {
                AuditError::Store(store) => ApplyError::Store(store),
                other => ApplyError::Audit(other),
            })?;
        match outcome {
            None => Ok(report(Plan::default(), false, Vec::new())),
            Some(Err(issues)) => Err(ApplyError::Invalid(issues)),
            Some(Ok((plan, created))) => {
                self.reload().await.map_err(ApplyError::Reload)?;
                Ok(report(plan, true, created))
            }
        }
    }

    /// The live database's catalog as a document (see [`super::export::document`]).
    pub async fn export_catalog(&self) -> Result<CatalogDocument, StoreError> {
        super::export::export(self.store()).await
    }
}

fn time(at: Option<DateTime<Utc>>) -> Value {
    at.map_or(Value::Null, |at| {
        Value::String(at.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    })
}

/// Writes the plan on the transaction's connection: creations and changes in plan order,
/// then removals in reverse (keys before scopes, tools before upstreams), each with its
/// event; then checks the catalog as written.
async fn execute_on(
    conn: &mut Tx,
    plan: &Plan,
    desired: &Desired,
    actor: &str,
    workspace: &str,
    now: DateTime<Utc>,
) -> Result<(Vec<NewEvent>, Vec<CreatedKey>), StoreError> {
    let known_scopes: Vec<_> = desired
        .catalog
        .scopes
        .iter()
        .map(|s| s.slug.clone())
        .collect();
    let (removals, puts): (Vec<&Change>, Vec<&Change>) = plan
        .changes
        .iter()
        .partition(|c| c.action == Action::Remove);
    let mut events = Vec::with_capacity(plan.changes.len());
    let mut created = Vec::new();
    for change in puts.into_iter().chain(removals.into_iter().rev()) {
        let mut after = change.after.clone();
        match &change.write {
            Write::PutUpstream(upstream) => upsert_upstream(&mut *conn, upstream).await?,
            Write::PutTool(tool) => put_tool_on(&mut *conn, &tool.upstream, &tool.spec).await?,
            Write::PutSkill(skill) => {
                let version = put_skill_on(&mut *conn, skill).await?;
                after = json!({ "value": { "version": version, "skill": skill } });
            }
            Write::PutRole(role) => put_role_on(&mut *conn, role).await?,
            Write::PutScope(scope) => put_scope_on(&mut *conn, scope).await?,
            Write::PutInspection(policy) => put_inspection_policy_on(&mut *conn, policy).await?,
            Write::CreateKey {
                name,
                scope,
                expires_at,
            } => {
                let prepared =
                    AgentKeys::prepare(name, scope, &known_scopes, *expires_at, Some(actor))
                        .map_err(|e| StoreError::Conflict(e.to_string()))?
                        .for_workspace(workspace);
                let (info, key) = prepared.insert_on(&mut *conn).await?;
                after = json!({
                    "scope": info.scope, "prefix": info.prefix, "expires_at": time(info.expires_at)
                });
                created.push(CreatedKey { info, key });
            }
            Write::SetKeyExpiry { name, expires_at } => {
                set_key_expiry_on(&mut *conn, name, *expires_at).await?;
            }
            Write::RevokeKey(name) => {
                let info = revoke_agent_key_on(&mut *conn, name, now)
                    .await?
                    .ok_or_else(|| StoreError::NotFound(format!("agent key `{name}`")))?;
                after = json!({ "revoked_at": time(info.revoked_at) });
            }
            Write::DeleteUpstream(name) => delete_upstream_on(&mut *conn, name).await?,
            Write::DeleteTool(name) => delete_tool_on(&mut *conn, name).await?,
            Write::DeleteSkill(slug) => delete_skill_on(&mut *conn, slug).await?,
            Write::DeleteRole(slug) => delete_role_on(&mut *conn, slug).await?,
            Write::DeleteScope(slug) => delete_scope_on(&mut *conn, slug).await?,
        }
        events.push(NewEvent::admin_change(
            actor,
            &change.audit_action(),
            &change.target(),
            change.before.clone(),
            after,
        ));
    }
    // The checks before were made on the state read in this same transaction; this is the
    // model's own word on the result, and a failure rolls everything back.
    load_catalog(&mut *conn).await?.validate()?;
    Ok((events, created))
}
