//! What an upstream's `tools/list` offered, saved against the pins, audited.

use super::{AdminError, AdminService, Changed, target};
use crate::model::ToolSpec;
use crate::slug::Slug;
use crate::store::catalog::{self, ToolSync};

impl AdminService {
    /// Saves what `upstream`'s `tools/list` offered against the pins (a new tool arrives
    /// quarantined, a changed one is quarantined at once, an offer equal to its pin again is
    /// released: see [`catalog::sync_tools_on`]), with one `admin_change` event by
    /// `upstream-sync:<upstream>` per quarantine, release, tool gone missing or tool listed again, in one transaction; then swaps
    /// the live snapshot, so a quarantine bites with the next call.
    #[tracing::instrument(skip(self, listed), fields(upstream = %upstream, listed = listed.len()))]
    pub async fn sync_tools(
        &self,
        upstream: &Slug,
        listed: Vec<ToolSpec>,
    ) -> Result<ToolSync, AdminError> {
        let actor = format!("upstream-sync:{upstream}");
        let upstream = upstream.clone();
        self.commit(
            &actor,
            Box::new(move |conn| {
                Box::pin(async move {
                    let sync = catalog::sync_tools_on(conn, &upstream, &listed).await?;
                    let changed = sync
                        .changes
                        .iter()
                        .map(|change| {
                            Changed::new(
                                change.action,
                                target("tool", &change.tool),
                                change.before.clone(),
                                change.after.clone(),
                            )
                        })
                        .collect();
                    Ok((sync, changed))
                })
            }),
        )
        .await
    }
}
