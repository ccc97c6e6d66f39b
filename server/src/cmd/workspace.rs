//! `skillgate workspace create|list|share-upstream|unshare-upstream|shares`: the
//! workspaces of a deployment (issue #55), and the platform's upstreams shared into them.
//! Each workspace is a database of its own beside the platform's; the other one-shot
//! commands work in one with `--workspace NAME` (docs/reference.md, "Workspaces").

use anyhow::Context as _;
use clap::Subcommand;
use skillgate_core::admin::AdminService;
use skillgate_core::store::Store;
use skillgate_core::store::workspaces::DEFAULT_WORKSPACE;

use crate::cmd::local_actor;

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace: its own catalog, keys, sessions and audit, empty at first.
    Create {
        /// Its name: lowercase letters, digits and single dashes, at most 40 characters.
        name: String,
        /// What people call it (default: the name).
        #[arg(long)]
        title: Option<String>,
    },
    /// List the workspaces, `default` first.
    List,
    /// Share one of the platform's (`default`'s) upstreams into a workspace, which may
    /// then grant and call its tools but not change it; changes made on the platform reach
    /// the copy.
    ShareUpstream {
        /// The upstream, as named in `default`.
        upstream: String,
        /// The workspace to share it into.
        #[arg(long)]
        into: String,
    },
    /// Take a shared upstream back from a workspace (refused while a skill there uses one
    /// of its tools).
    UnshareUpstream {
        upstream: String,
        /// The workspace to take it from.
        #[arg(long)]
        from: String,
    },
    /// List the platform's upstreams shared into workspaces.
    Shares,
}

pub async fn run(database_url: &str, command: WorkspaceCommand) -> anyhow::Result<()> {
    let platform = Store::open(database_url).await?;
    match command {
        WorkspaceCommand::Create { name, title } => {
            let admin = AdminService::open(platform.clone()).await?;
            let title = title.unwrap_or_else(|| name.clone());
            let (record, workspace) = admin
                .create_workspace(&local_actor(), &name, &title)
                .await
                .with_context(|| format!("creating workspace `{name}`"))?;
            workspace.close().await;
            println!(
                "created workspace {} ({}); work in it with --workspace {}",
                record.slug, record.title, record.slug
            );
        }
        WorkspaceCommand::List => {
            println!("{DEFAULT_WORKSPACE}\t(the platform database)");
            for record in platform.list_workspaces().await? {
                let state = match record.archived_at {
                    Some(at) => format!("archived {}", at.to_rfc3339()),
                    None => format!(
                        "created {} by {}",
                        record.created_at.to_rfc3339(),
                        record.created_by
                    ),
                };
                println!("{}\t{}\t{state}", record.slug, record.title);
            }
        }
        WorkspaceCommand::ShareUpstream { upstream, into } => {
            let admin = AdminService::open(platform.clone()).await?;
            let share = admin
                .share_upstream(&local_actor(), &upstream, &into)
                .await
                .with_context(|| format!("sharing upstream `{upstream}` into `{into}`"))?;
            println!(
                "shared upstream {} into workspace {}: read-only there, kept up to date from {DEFAULT_WORKSPACE}",
                share.upstream, share.workspace
            );
        }
        WorkspaceCommand::UnshareUpstream { upstream, from } => {
            let admin = AdminService::open(platform.clone()).await?;
            admin
                .unshare_upstream(&local_actor(), &upstream, &from)
                .await
                .with_context(|| format!("unsharing upstream `{upstream}` from `{from}`"))?;
            println!("upstream {upstream} is no longer shared into workspace {from}");
        }
        WorkspaceCommand::Shares => {
            for share in platform.upstream_shares().await? {
                println!(
                    "{}\t{}\tshared {} by {}",
                    share.upstream,
                    share.workspace,
                    share.shared_at.to_rfc3339(),
                    share.shared_by
                );
            }
        }
    }
    platform.close().await;
    Ok(())
}
