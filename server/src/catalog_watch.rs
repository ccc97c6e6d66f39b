//! `serve --catalog FILE`, the catalog as code (GitOps): the file is applied at start, with
//! pruning (the file is the whole catalog), and again whenever it changes. A file that does
//! not apply at start stops the start; a change that does not apply later is logged and
//! leaves the live catalog as it was, so a bad commit never takes the gateway down.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use notify::{RecursiveMode, Watcher};
use skillgate_app::api::ssr::UpstreamOps;
use skillgate_core::admin::AdminService;
use skillgate_core::catalog_code::{ApplyOptions, ApplyReport, CatalogFile};
use tokio::sync::mpsc;

/// How long the watcher waits for an editor's burst of writes (truncate, write, rename)
/// to settle before it reads the file.
const SETTLE: Duration = Duration::from_millis(200);

/// Reads and applies the file once; returns what it changed.
pub async fn apply_file(
    admin: &AdminService,
    path: &Path,
    mcp_url: &str,
) -> anyhow::Result<ApplyReport> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = CatalogFile::parse(&bytes).with_context(|| format!("{}", path.display()))?;
    let report = admin
        .apply_catalog(
            &file,
            ApplyOptions {
                prune: true,
                dry_run: false,
            },
        )
        .await
        .with_context(|| format!("applying {}", path.display()))?;
    announce(path, &report, mcp_url);
    Ok(report)
}

/// Says what an apply did; a key it created is printed once, like `skillgate key create`.
fn announce(path: &Path, report: &ApplyReport, mcp_url: &str) {
    if report.applied {
        tracing::info!(
            file = %path.display(),
            actor = %report.actor,
            changes = report.plan.changes.len(),
            "applied the catalog file"
        );
        println!(
            "Applied {} ({}): {} change(s).",
            path.display(),
            report.actor,
            report.plan.changes.len()
        );
    } else {
        tracing::info!(file = %path.display(), "the catalog file has no changes");
    }
    for created in &report.created_keys {
        print!(
            "{}",
            crate::key_cmd::render_created(&created.info, &created.key, mcp_url)
        );
    }
}

/// Applies the file again whenever it changes, for as long as the server runs, and syncs
/// the upstreams after each change. The
/// directory is watched rather than the file, because editors and `git checkout` replace
/// a file by renaming a new one over it.
pub fn watch(
    admin: Arc<AdminService>,
    upstreams: Arc<dyn UpstreamOps>,
    path: PathBuf,
    mcp_url: String,
) -> anyhow::Result<()> {
    let path =
        std::path::absolute(&path).with_context(|| format!("resolving {}", path.display()))?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .context("the catalog file has no directory")?;
    let name = path.file_name().map(ToOwned::to_owned);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) if event.paths.iter().any(|p| p.file_name() == name.as_deref()) => {
                let _ = tx.send(());
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "watching the catalog file failed"),
        })
        .context("starting the catalog file watcher")?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .with_context(|| format!("watching {}", dir.display()))?;
    tokio::spawn(async move {
        // The watcher stops when it is dropped; this task owns it for the server's life.
        let _watcher = watcher;
        while rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while rx.try_recv().is_ok() {}
            if !path.exists() {
                tracing::warn!(file = %path.display(), "the catalog file is gone; the catalog stays as it is");
                continue;
            }
            match apply_file(&admin, &path, &mcp_url).await {
                // An upstream the file added or changed is connected and its tools listed
                // (and quarantined if no pin in the file admits them).
                Ok(report) if report.applied => {
                    upstreams.sync().await;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(
                        file = %path.display(),
                        error = format!("{error:#}"),
                        "the changed catalog file was not applied; the catalog stays as it was"
                    );
                    eprintln!("{}: not applied: {error:#}", path.display());
                }
            }
        }
    });
    Ok(())
}
