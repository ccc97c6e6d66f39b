//! Keeping the workspaces' copies of shared upstreams up to the platform's
//! (docs/architecture.md, "Sharing one upstream into several workspaces").
//!
//! Whatever changed the platform's upstream (the console, `/api`, a catalog file, the
//! upstream sync, another replica, a one-shot command), its catalog generation moved; the
//! next tick sees that and brings every copy that differs up to date, each write with its
//! event in the workspace's chain. A first pass at start brings back whatever a stopped
//! server missed. So the bound is `--catalog-poll-ms`, whoever made the change.

use std::sync::Arc;
use std::time::Duration;

use skillgate_core::admin::AdminService;

/// Projects the shares of `platform` whenever its catalog generation moves, checked every
/// `every`. A workspace that cannot be written is tried again on each tick (and reported
/// once per generation) until it can.
pub fn spawn_share_projection(platform: Arc<AdminService>, every: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut projected_at = None;
        let mut reported_at = None;
        loop {
            tick.tick().await;
            let generation = match platform.store().catalog_generation().await {
                Ok(generation) => generation,
                Err(error) => {
                    tracing::warn!(%error, "could not read the catalog generation");
                    continue;
                }
            };
            if projected_at == Some(generation) {
                continue;
            }
            let report = reported_at != Some(generation);
            reported_at = Some(generation);
            match platform.project_shares().await {
                Ok(done) => {
                    for (upstream, workspace) in &done.written {
                        tracing::info!(
                            upstream,
                            workspace,
                            "shared upstream's copy brought up to date"
                        );
                    }
                    if done.failed.is_empty() {
                        projected_at = Some(generation);
                    }
                    for (upstream, workspace, error) in done.failed.iter().filter(|_| report) {
                        tracing::warn!(upstream, workspace, %error, "could not bring a shared upstream's copy up to date; trying again");
                    }
                }
                Err(error) if report => {
                    tracing::warn!(%error, "could not read the shared upstreams; trying again");
                }
                Err(_) => {}
            }
        }
    });
}
