//! `serve --catalog FILE`, the catalog as code (GitOps): the file is applied at start, with
//! pruning (the file is the whole catalog), and again whenever its contents change. A file
//! that does not apply at start stops the start; a change that does not apply later is
//! reported once and leaves the live catalog as it was, so a bad commit never takes the
//! gateway down.
//!
//! What decides that the file changed is the SHA-256 of its bytes, not the file events:
//! events only say "look again". Reading the file makes events of its own (inotify's open
//! and close), so deciding by events alone applied the file again after every read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use skillgate_app::shared::ssr::UpstreamOps;
use skillgate_core::admin::AdminService;
use skillgate_core::catalog_code::{
    ApplyError, ApplyOptions, ApplyReport, CatalogFile, read_catalog_file,
};
use skillgate_core::limited_read::LimitedReadError;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long the file must stay quiet after an event before it is read: an editor's or
/// `git checkout`'s burst of writes (truncate, write, rename) settles first.
const SETTLE: Duration = Duration::from_millis(200);
/// The longest a burst may delay a read, so a file written to without pause is still read.
const SETTLE_AT_MOST: Duration = Duration::from_secs(2);

/// What the watch last read of the file, so that each change is applied, or reported,
/// once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// Bytes with this SHA-256: applied, or refused as invalid.
    Content([u8; 32]),
    /// The file could not be read (gone, too big, unreadable), with this error.
    Unreadable(String),
    /// Nothing that the next read is compared with: the last apply failed in the store.
    Unsettled,
}

/// The catalog file as the server reads it: its path and its size limit.
#[derive(Debug, Clone)]
pub struct CatalogSource {
    path: PathBuf,
    max_bytes: u64,
}

/// The start's apply: what the watch compares the file with first.
#[derive(Debug)]
pub struct Started {
    seen: Seen,
}

impl CatalogSource {
    pub fn new(path: &Path, max_bytes: u64) -> anyhow::Result<Self> {
        let path =
            std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))?;
        Ok(Self { path, max_bytes })
    }

    /// Reads the file, off the async threads (a FIFO or a slow disk must not stall them),
    /// never holding more than the limit.
    async fn read(&self) -> anyhow::Result<Vec<u8>> {
        let (path, max_bytes) = (self.path.clone(), self.max_bytes);
        Ok(tokio::task::spawn_blocking(move || read_catalog_file(&path, max_bytes)).await??)
    }

    /// Reads and applies the file at start; an error stops the start.
    pub async fn apply_at_start(
        &self,
        admin: &AdminService,
        mcp_url: &str,
    ) -> anyhow::Result<Started> {
        let bytes = self.read().await?;
        apply_bytes(admin, &self.path, &bytes, mcp_url)
            .await
            .with_context(|| format!("applying {}", self.path.display()))?;
        Ok(Started {
            seen: Seen::Content(Sha256::digest(&bytes).into()),
        })
    }
}

/// Applies the bytes of the file; returns what it changed.
async fn apply_bytes(
    admin: &AdminService,
    path: &Path,
    bytes: &[u8],
    mcp_url: &str,
) -> Result<ApplyReport, ApplyError> {
    let file = CatalogFile::parse(bytes)?;
    let report = admin
        .apply_catalog(
            &file,
            ApplyOptions {
                prune: true,
                dry_run: false,
            },
        )
        .await?;
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
            crate::cmd::key::render_created(&created.info, &created.key, mcp_url)
        );
    }
}

/// Whether a file event can mean new contents. Opening, reading and closing a file
/// unwritten (the watch's own read among them) cannot.
fn may_change_contents(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Applies the file again whenever its contents change, for as long as the server runs,
/// and syncs the upstreams after each change. The directory is watched rather than the
/// file, because editors and `git checkout` replace a file by renaming a new one over it.
pub fn watch(
    admin: Arc<AdminService>,
    upstreams: Arc<dyn UpstreamOps>,
    source: CatalogSource,
    started: Started,
    mcp_url: String,
) -> anyhow::Result<()> {
    let dir = source
        .path
        .parent()
        .map(Path::to_path_buf)
        .context("the catalog file has no directory")?;
    let name = source.path.file_name().map(ToOwned::to_owned);
    // A stored permit, not a queue: any number of events before the next read is one read.
    let changed = Arc::new(Notify::new());
    let signal = changed.clone();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event)
                if may_change_contents(&event.kind)
                    && event.paths.iter().any(|p| p.file_name() == name.as_deref()) =>
            {
                signal.notify_one();
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
        let mut seen = started.seen;
        // The file may have changed between the start's read and the watch's start.
        check(&admin, &*upstreams, &source, &mut seen, &mcp_url).await;
        loop {
            changed.notified().await;
            let latest = Instant::now() + SETTLE_AT_MOST;
            while Instant::now() < latest
                && tokio::time::timeout(SETTLE, changed.notified())
                    .await
                    .is_ok()
            {}
            check(&admin, &*upstreams, &source, &mut seen, &mcp_url).await;
        }
    });
    Ok(())
}

/// Reads the file and applies it if its contents are not what was last seen.
async fn check(
    admin: &AdminService,
    upstreams: &dyn UpstreamOps,
    source: &CatalogSource,
    seen: &mut Seen,
    mcp_url: &str,
) {
    let path = &source.path;
    let bytes = match source.read().await {
        Ok(bytes) => bytes,
        Err(error) => {
            let now = Seen::Unreadable(format!("{error:#}"));
            if *seen == now {
                tracing::debug!(file = %path.display(), "the catalog file still cannot be read");
            } else {
                tracing::error!(
                    file = %path.display(),
                    error = format!("{error:#}"),
                    "the catalog file could not be read; the catalog stays as it was"
                );
                eprintln!("{}: not applied: {error:#}", path.display());
                // The same class as `catalog apply` records for a file over the limit.
                let code = match error.downcast_ref::<LimitedReadError>() {
                    Some(LimitedReadError::TooBig { .. }) => "TOO_LARGE",
                    _ => "UNREADABLE",
                };
                audit_refusal(admin, path, None, code, &format!("{error:#}")).await;
                *seen = now;
            }
            return;
        }
    };
    let now = Seen::Content(Sha256::digest(&bytes).into());
    if *seen == now {
        tracing::debug!(file = %path.display(), "the catalog file's contents did not change");
        return;
    }
    *seen = now;
    match apply_bytes(admin, path, &bytes, mcp_url).await {
        // An upstream the file added or changed is connected and its tools listed
        // (and quarantined if no pin in the file admits them).
        Ok(report) if report.applied => {
            upstreams.sync().await;
        }
        Ok(_) => {}
        Err(error) => {
            // An invalid file is reported once; a store failure is tried again at the
            // next event, as it may pass.
            if !matches!(error, ApplyError::Invalid(_)) {
                *seen = Seen::Unsettled;
            }
            tracing::error!(
                file = %path.display(),
                error = %error,
                "the changed catalog file was not applied; the catalog stays as it was"
            );
            eprintln!("{}: not applied: {error}", path.display());
            if matches!(error, ApplyError::Invalid(_)) {
                audit_refusal(admin, path, Some(&bytes), "INVALID", &error.to_string()).await;
            }
        }
    }
}

/// Audits a change of the file the watch refused (`admin_refused`, action `catalog.apply`),
/// once per change, as it is reported once. The actor names the refused contents as an
/// apply's actor would (`catalog-apply:<digest>`) when there are any.
async fn audit_refusal(
    admin: &AdminService,
    path: &Path,
    bytes: Option<&[u8]>,
    code: &str,
    reason: &str,
) {
    let actor = match bytes {
        Some(bytes) => format!(
            "catalog-apply:{}",
            &hex::encode(Sha256::digest(bytes))[..12]
        ),
        None => "catalog-apply".to_owned(),
    };
    let target = format!("catalog-file:{}", path.display());
    if let Err(error) = admin
        .record_refusal(&actor, "catalog.apply", &target, code, reason)
        .await
    {
        tracing::error!(%error, "the refused catalog file could not be audited");
    }
}
