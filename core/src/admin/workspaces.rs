//! Workspaces, created by a platform admin through the door: registered in the platform
//! database with an `admin_change` event in the platform's chain, and recorded again as the
//! first event of the new workspace's own chain, so each chain tells its own story.

use chrono::Utc;
use serde_json::{Value, json};

use super::{AdminError, AdminService, Changed, target};
use crate::slug::Slug;
use crate::store::workspaces::{DEFAULT_WORKSPACE, MAX_WORKSPACE_SLUG_LEN, insert_workspace_on};
use crate::store::{Store, WorkspaceRecord};

/// The longest title a workspace may have.
pub const MAX_WORKSPACE_TITLE_CHARS: usize = 200;

/// The audit target naming a workspace, e.g. `workspace:finance`.
pub fn workspace_target(slug: &Slug) -> String {
    target("workspace", slug.as_str())
}

/// Checks a new workspace's name: a slug, short enough for a PostgreSQL schema, not
/// `default` (which every deployment has).
pub fn parse_workspace_slug(text: &str) -> Result<Slug, AdminError> {
    let slug = Slug::parse(text.trim()).map_err(|e| {
        AdminError::bad_input(
            "slug",
            format!("A workspace name is lowercase letters, digits and single dashes: {e}"),
        )
    })?;
    if slug.as_str().len() > MAX_WORKSPACE_SLUG_LEN {
        return Err(AdminError::bad_input(
            "slug",
            format!("A workspace name is at most {MAX_WORKSPACE_SLUG_LEN} characters."),
        ));
    }
    if slug.as_str() == DEFAULT_WORKSPACE {
        return Err(AdminError::Conflict(
            "the workspace `default` exists in every deployment".to_owned(),
        ));
    }
    Ok(slug)
}

fn check_title(title: &str) -> Result<String, AdminError> {
    let title = title.trim();
    if title.is_empty() {
        return Err(AdminError::bad_input("title", "A workspace needs a title."));
    }
    if title.chars().count() > MAX_WORKSPACE_TITLE_CHARS {
        return Err(AdminError::bad_input(
            "title",
            format!("A workspace title is at most {MAX_WORKSPACE_TITLE_CHARS} characters."),
        ));
    }
    if title.chars().any(char::is_control) {
        return Err(AdminError::bad_input(
            "title",
            "A workspace title is one line of text, without control characters.",
        ));
    }
    Ok(title.to_owned())
}

impl AdminService {
    /// Creates workspace `slug` with its own, empty database, registered in the platform
    /// database (this service's, which must be the platform's). Audited as
    /// `workspace.create` on `workspace:<slug>` in both chains. A refused request (a bad or
    /// taken name) creates nothing.
    #[tracing::instrument(skip(self))]
    pub async fn create_workspace(
        &self,
        actor: &str,
        slug: &str,
        title: &str,
    ) -> Result<(WorkspaceRecord, Store), AdminError> {
        let slug = parse_workspace_slug(slug)?;
        let title = check_title(title)?;
        if !self.store().is_platform() {
            return Err(AdminError::bad_input(
                "slug",
                format!(
                    "workspaces are created in the platform database; this one is workspace `{}`",
                    self.store().workspace_slug()
                ),
            ));
        }
        if self.store().workspace_record(&slug).await?.is_some() {
            return Err(AdminError::Conflict(format!(
                "a workspace named `{slug}` exists already"
            )));
        }
        // The database first: a creation interrupted after it leaves an unregistered
        // database, which the next attempt opens again; never a registered workspace
        // without one.
        let workspace = self.store().create_workspace_database(&slug).await?;
        let record = WorkspaceRecord {
            slug: slug.clone(),
            title,
            created_at: Utc::now(),
            created_by: actor.to_owned(),
            archived_at: None,
        };
        let after = json!(record);
        let registered = record.clone();
        let change_target = workspace_target(&slug);
        self.record(
            actor,
            Box::new(move |tx| {
                Box::pin(async move {
                    insert_workspace_on(tx, &registered).await?;
                    let changed =
                        Changed::new("workspace.create", change_target, Value::Null, after);
                    Ok(((), vec![changed]))
                })
            }),
        )
        .await?;
        let genesis = Changed::new(
            "workspace.create",
            workspace_target(&slug),
            Value::Null,
            json!(record),
        );
        AdminService::open(workspace.clone())
            .await?
            .record(
                actor,
                Box::new(move |_| Box::pin(async move { Ok(((), vec![genesis])) })),
            )
            .await?;
        Ok((record, workspace))
    }

    /// The registered workspaces besides `default`, by name.
    pub async fn workspaces(&self) -> Result<Vec<WorkspaceRecord>, AdminError> {
        Ok(self.store().list_workspaces().await?)
    }
}
