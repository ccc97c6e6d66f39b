//! Sharing one of the platform's upstreams into workspaces, read-only to them
//! (docs/architecture.md, "Sharing one upstream into several workspaces").
//!
//! The platform keeps the upstream and the registry of its shares; each workspace it is
//! shared into holds a copy of its rows marked `shared_from`, so the workspace's gateway
//! connects and decides with its own database only. A copy is written only here, by
//! [`AdminService::project_shares`] and [`AdminService::share_upstream`], each write with
//! its `admin_change` in the workspace's own chain; the workspace's door refuses every
//! other change of it ([`AdminService::refuse_shared_upstream`]).

use std::collections::BTreeSet;

use chrono::Utc;
use serde_json::{Value, json};

use super::{AdminError, AdminService, Changed, target};
use crate::names::Actor;
use crate::slug::Slug;
use crate::store::Tx;
use crate::store::catalog::load_catalog;
use crate::store::shares::{
    UpstreamRows, UpstreamShare, copy_rows_on, delete_share_on, project_on, put_share_on,
    remove_copy_on, shared_upstreams_on, shares_on, tool_shared_from_on,
};
use crate::store::workspaces::DEFAULT_WORKSPACE;
use crate::store::{StoreError, catalog};

/// What [`AdminService::project_shares`] did.
#[derive(Debug, Default)]
pub struct SharesProjected {
    /// The copies written again, as (upstream, workspace).
    pub written: Vec<(String, String)>,
    /// The copies that could not be written, and why; the next projection tries again.
    pub failed: Vec<(String, String, AdminError)>,
}

/// How a copy's change is recorded in the workspace's chain: its upstream, where it comes
/// from, and its tools with their pins (never its credentials).
async fn describe_copy(tx: &mut Tx, name: &str) -> Result<Value, StoreError> {
    let Some(from) = shared_upstreams_on(tx).await?.remove(name) else {
        return Ok(Value::Null);
    };
    let upstream = catalog::list_upstreams(tx)
        .await?
        .into_iter()
        .find(|u| u.name.as_str() == name);
    let tools: Vec<Value> = catalog::tool_pins_of_on(tx, name)
        .await?
        .into_iter()
        .map(|(tool, pin, quarantined)| json!({ "name": tool, "pin": pin, "quarantined": quarantined }))
        .collect();
    Ok(json!({ "shared_from": from, "upstream": upstream, "tools": tools }))
}

impl AdminService {
    fn platform_only(&self, what: &str) -> Result<(), AdminError> {
        if self.store().is_platform() {
            return Ok(());
        }
        Err(AdminError::bad_input(
            "workspace",
            format!(
                "{what} from the platform database; this one is workspace `{}`",
                self.store().workspace_slug()
            ),
        ))
    }

    /// The service of workspace `slug` (not `default`), as the platform reaches it.
    async fn workspace_service(&self, slug: &str) -> Result<AdminService, AdminError> {
        let slug = Slug::parse(slug).map_err(|e| {
            AdminError::bad_input("workspace", format!("not a workspace name: {e}"))
        })?;
        if slug.as_str() == DEFAULT_WORKSPACE {
            return Err(AdminError::bad_input(
                "workspace",
                "the platform's upstreams are `default`'s own: share them into another workspace",
            ));
        }
        AdminService::open(self.store().workspace(&slug).await?).await
    }

    /// Shares the platform's upstream `upstream` into workspace `workspace`: the workspace
    /// gets a copy it may grant and call but not change, recorded as `upstream.share` on
    /// `upstream:<name>` in its chain, then the share is registered with `upstream.share`
    /// in the platform's. Refused, changing nothing, for an unknown upstream or workspace,
    /// the built-in curation upstream, or a workspace with an upstream or tools of the same
    /// names of its own. Sharing again brings the copy up to date.
    #[tracing::instrument(skip(self))]
    pub async fn share_upstream(
        &self,
        actor: &str,
        upstream: &str,
        workspace: &str,
    ) -> Result<UpstreamShare, AdminError> {
        self.platform_only("upstreams are shared")?;
        if upstream == crate::revisions::curator::CURATION_UPSTREAM {
            return Err(AdminError::bad_input(
                "upstream",
                "the built-in curation upstream is every workspace's own; it is not shared",
            ));
        }
        let service = self.workspace_service(workspace).await?;
        let rows = self
            .store()
            .upstream_rows(upstream)
            .await?
            .ok_or_else(|| AdminError::NotFound(format!("upstream `{upstream}`")))?;
        // The copy first: a share interrupted after it leaves a copy that sharing again
        // brings up to date; never a registered share whose workspace has no copy.
        service
            .receive_share(actor, &rows, "upstream.share")
            .await?;
        let share = UpstreamShare {
            upstream: upstream.to_owned(),
            workspace: service.store().workspace_slug().to_owned(),
            shared_by: actor.to_owned(),
            shared_at: Utc::now(),
        };
        self.record(
            actor,
            Box::new(move |tx| {
                Box::pin(async move {
                    let before = shared_into_on(tx, &share.upstream).await?;
                    put_share_on(tx, &share).await?;
                    let after = shared_into_on(tx, &share.upstream).await?;
                    let changed = (before != after).then(|| {
                        Changed::new(
                            "upstream.share",
                            target("upstream", &share.upstream),
                            json!({ "shared_into": before }),
                            json!({ "shared_into": after }),
                        )
                    });
                    // The share as registered: sharing again keeps who shared it first, and
                    // when.
                    let stored = shares_on(tx)
                        .await?
                        .into_iter()
                        .find(|s| s.upstream == share.upstream && s.workspace == share.workspace)
                        .ok_or_else(|| {
                            StoreError::NotFound(format!("the share of `{}`", share.upstream))
                        })?;
                    Ok((stored, changed.into_iter().collect()))
                })
            }),
        )
        .await
    }

    /// Takes the platform's upstream `upstream` back from workspace `workspace`: its copy
    /// is removed there (`upstream.unshare` in its chain) and the share forgotten
    /// (`upstream.unshare` in the platform's). Refused while a skill of the workspace uses
    /// one of its tools, naming the skills: a catalog never holds a grant of a tool it does
    /// not have.
    #[tracing::instrument(skip(self))]
    pub async fn unshare_upstream(
        &self,
        actor: &str,
        upstream: &str,
        workspace: &str,
    ) -> Result<(), AdminError> {
        self.platform_only("upstreams are unshared")?;
        let service = self.workspace_service(workspace).await?;
        let slug = service.store().workspace_slug().to_owned();
        let registered = self
            .store()
            .upstream_shares()
            .await?
            .into_iter()
            .any(|s| s.upstream == upstream && s.workspace == slug);
        let copy = service
            .store()
            .shared_upstreams()
            .await?
            .contains_key(upstream);
        if !registered && !copy {
            return Err(AdminError::NotFound(format!(
                "upstream `{upstream}` shared into workspace `{slug}`"
            )));
        }
        // A skill that uses one of the tools would grant, through its roles, a tool the
        // catalog no longer has.
        let live = service.live();
        let catalog = live.catalog();
        let provided: BTreeSet<&str> = catalog
            .tools
            .iter()
            .filter(|t| t.upstream.as_str() == upstream)
            .map(|t| t.spec.name.as_str())
            .collect();
        let using: Vec<String> = catalog
            .skills
            .iter()
            .filter(|s| s.skill.tools.iter().any(|t| provided.contains(t.as_str())))
            .map(|s| format!("`{}`", s.skill.slug))
            .collect();
        if !using.is_empty() {
            return Err(AdminError::Conflict(format!(
                "skill(s) {} of workspace `{slug}` use tools of upstream `{upstream}`: take the tools out of them there first",
                using.join(", ")
            )));
        }
        let name = upstream.to_owned();
        let change_target = target("upstream", upstream);
        service
            .commit(
                actor,
                Box::new(move |tx| {
                    Box::pin(async move {
                        let before = describe_copy(tx, &name).await?;
                        if !remove_copy_on(tx, &name).await? {
                            return Ok(((), Vec::new()));
                        }
                        // The model's own word on what is left: a skill that still names
                        // one of the tools refuses the removal.
                        load_catalog(&mut *tx).await?.validate()?;
                        let changed =
                            Changed::new("upstream.unshare", change_target, before, Value::Null);
                        Ok(((), vec![changed]))
                    })
                }),
            )
            .await?;
        let name = upstream.to_owned();
        self.record(
            actor,
            Box::new(move |tx| {
                Box::pin(async move {
                    let before = shared_into_on(tx, &name).await?;
                    if !delete_share_on(tx, &name, &slug).await? {
                        return Ok(((), Vec::new()));
                    }
                    let after = shared_into_on(tx, &name).await?;
                    let changed = Changed::new(
                        "upstream.unshare",
                        target("upstream", &name),
                        json!({ "shared_into": before }),
                        json!({ "shared_into": after }),
                    );
                    Ok(((), vec![changed]))
                })
            }),
        )
        .await?;
        Ok(())
    }

    /// Brings every copy of a shared upstream up to the platform's rows: a copy that
    /// differs in any column (config, credentials, a tool, a pin, a quarantine, the
    /// identity pin) is written again, as `upstream.shared_change` by Skillgate in its
    /// workspace's chain. A workspace that fails does not stop the others.
    #[tracing::instrument(skip(self))]
    pub async fn project_shares(&self) -> Result<SharesProjected, AdminError> {
        self.platform_only("shared upstreams are projected")?;
        let mut done = SharesProjected::default();
        let shares = self.store().upstream_shares().await?;
        for share in shares {
            let outcome = self.project_share(&share).await;
            match outcome {
                Ok(true) => done.written.push((share.upstream, share.workspace)),
                Ok(false) => {}
                Err(error) => done.failed.push((share.upstream, share.workspace, error)),
            }
        }
        Ok(done)
    }

    /// Writes one share's copy again if it differs from the platform's rows.
    async fn project_share(&self, share: &UpstreamShare) -> Result<bool, AdminError> {
        let Some(rows) = self.store().upstream_rows(&share.upstream).await? else {
            return Err(AdminError::NotFound(format!(
                "upstream `{}`",
                share.upstream
            )));
        };
        let service = self.workspace_service(&share.workspace).await?;
        let backend = service.store().backend();
        let name = share.upstream.clone();
        let copy = service
            .store()
            .with_conn(move |tx| Box::pin(async move { copy_rows_on(tx, backend, &name).await }))
            .await?;
        if copy.as_ref() == Some(&rows) {
            return Ok(false);
        }
        service
            .receive_share(&Actor::System.to_string(), &rows, "upstream.shared_change")
            .await?;
        Ok(true)
    }

    /// Writes `rows` as this workspace's copy of their upstream, with its `action` event;
    /// nothing when the copy is those rows already. Refused, with nothing written, when
    /// the workspace's catalog would not be valid with it: a tool the platform removed
    /// that a skill here still uses keeps the copy as it was until the skill lets go.
    async fn receive_share(
        &self,
        actor: &str,
        rows: &UpstreamRows,
        action: &'static str,
    ) -> Result<(), AdminError> {
        let rows = rows.clone();
        let backend = self.store().backend();
        let change_target = target("upstream", rows.upstream());
        self.commit(
            actor,
            Box::new(move |tx| {
                Box::pin(async move {
                    let name = rows.upstream().to_owned();
                    if copy_rows_on(tx, backend, &name).await?.as_ref() == Some(&rows) {
                        return Ok(((), Vec::new()));
                    }
                    let before = describe_copy(tx, &name).await?;
                    project_on(tx, &rows, DEFAULT_WORKSPACE).await?;
                    load_catalog(&mut *tx).await?.validate()?;
                    let after = describe_copy(tx, &name).await?;
                    Ok(((), vec![Changed::new(action, change_target, before, after)]))
                })
            }),
        )
        .await
    }

    /// Refuses a change of upstream `upstream` when this workspace holds it as a copy.
    pub(crate) async fn refuse_shared_upstream(&self, upstream: &str) -> Result<(), AdminError> {
        match self.store().shared_upstreams().await?.remove(upstream) {
            Some(from) => Err(AdminError::SharedUpstream {
                upstream: upstream.to_owned(),
                from,
            }),
            None => Ok(()),
        }
    }

    /// Refuses a change of tool `tool` when its upstream is a copy in this workspace.
    pub(crate) async fn refuse_shared_tool(&self, tool: &str) -> Result<(), AdminError> {
        let tool = tool.to_owned();
        let shared = self
            .store()
            .with_conn(move |tx| Box::pin(async move { tool_shared_from_on(tx, &tool).await }))
            .await?;
        match shared {
            Some((upstream, from)) => Err(AdminError::SharedUpstream { upstream, from }),
            None => Ok(()),
        }
    }
}

/// The workspaces upstream `name` is shared into, from the platform's registry.
async fn shared_into_on(tx: &mut Tx, name: &str) -> Result<Vec<String>, StoreError> {
    Ok(shares_on(tx)
        .await?
        .into_iter()
        .filter(|s| s.upstream == name)
        .map(|s| s.workspace)
        .collect())
}
