//! What an upstream's `tools/list` offered, saved against the pins, inspected, audited.

use serde_json::Value;

use super::{AdminError, AdminService, Changed, target};
use crate::inspect::{DefinitionContext, DefinitionFinding, Inspectors};
use crate::model::{Catalog, ToolSpec};
use crate::slug::Slug;
use crate::store::catalog::{self, ToolSync};

impl AdminService {
    /// Saves what `upstream`'s `tools/list` offered against the pins (a new tool arrives
    /// quarantined, a changed one is quarantined at once, an offer equal to its pin again is
    /// released: see [`catalog::sync_tools_on`]), with one `admin_change` event by
    /// `upstream-sync:<upstream>` per quarantine, release, tool gone missing or tool listed
    /// again, in one transaction; then swaps the live snapshot, so a quarantine bites with
    /// the next call. Each quarantined offer is inspected ([`Inspectors::inspect_definition`])
    /// beside the other upstreams' tools and its siblings; its findings, if any, go into the
    /// quarantine event (`after.findings`) and the log.
    #[tracing::instrument(skip(self, listed), fields(upstream = %upstream, listed = listed.len()))]
    pub async fn sync_tools(
        &self,
        upstream: &Slug,
        listed: Vec<ToolSpec>,
    ) -> Result<ToolSync, AdminError> {
        let actor = format!("upstream-sync:{upstream}");
        let upstream = upstream.clone();
        let live = self.live();
        let others = other_tools(live.catalog(), &upstream);
        self.commit(
            &actor,
            Box::new(move |conn| {
                Box::pin(async move {
                    let sync = catalog::sync_tools_on(conn, &upstream, &listed).await?;
                    let changed = sync
                        .changes
                        .iter()
                        .map(|change| {
                            let mut after = change.after.clone();
                            if change.action == "tool.quarantine"
                                && let Some(offer) = listed.iter().find(|t| t.name == change.tool)
                            {
                                let siblings: Vec<&ToolSpec> =
                                    listed.iter().filter(|t| t.name != offer.name).collect();
                                let findings = inspect_offer(&upstream, offer, &others, &siblings);
                                log_findings(&upstream, &offer.name, &findings);
                                with_findings(&mut after, &findings);
                            }
                            Changed::new(
                                change.action,
                                target("tool", &change.tool),
                                change.before.clone(),
                                after,
                            )
                        })
                        .collect();
                    Ok((sync, changed))
                })
            }),
        )
        .await
    }

    /// The findings on the definition `tool`'s upstream offers while it is quarantined
    /// (none when it is not): what the diff page shows beside the admit button and what
    /// admitting it is checked for. Its context is the live catalog's other upstreams'
    /// tools and the offers (or, where there is none, the pins) of the same upstream's other
    /// tools.
    pub async fn offered_definition_findings(
        &self,
        tool: &str,
    ) -> Result<Vec<DefinitionFinding>, AdminError> {
        let Some(pin) = self.store.tool_pin(tool).await? else {
            return Err(AdminError::NotFound(format!("tool `{tool}`")));
        };
        let Some(offer) = pin
            .offered
            .as_ref()
            .filter(|_| pin.quarantined_since.is_some())
        else {
            return Ok(Vec::new());
        };
        let live = self.live();
        let catalog = live.catalog();
        let offers: Vec<ToolSpec> = self
            .store
            .quarantined_tools()
            .await?
            .into_iter()
            .filter(|p| p.upstream == pin.upstream && p.tool != tool)
            .filter_map(|p| p.offered)
            .collect();
        let siblings: Vec<&ToolSpec> = catalog
            .tools
            .iter()
            .filter(|t| t.upstream == pin.upstream && t.spec.name != tool)
            .map(|t| {
                offers
                    .iter()
                    .find(|o| o.name == t.spec.name)
                    .unwrap_or(&t.spec)
            })
            .collect();
        let others = other_tools(catalog, &pin.upstream);
        Ok(inspect_offer(&pin.upstream, offer, &others, &siblings))
    }
}

/// (upstream, tool) of every tool in `catalog` that `upstream` does not provide.
fn other_tools(catalog: &Catalog, upstream: &Slug) -> Vec<(String, String)> {
    catalog
        .tools
        .iter()
        .filter(|t| t.upstream != *upstream)
        .map(|t| (t.upstream.as_str().to_owned(), t.spec.name.clone()))
        .collect()
}

fn inspect_offer(
    upstream: &Slug,
    offer: &ToolSpec,
    others: &[(String, String)],
    siblings: &[&ToolSpec],
) -> Vec<DefinitionFinding> {
    let other_tools: Vec<(&str, &str)> = others
        .iter()
        .map(|(u, t)| (u.as_str(), t.as_str()))
        .collect();
    Inspectors::shared().inspect_definition(
        offer,
        &DefinitionContext {
            upstream: upstream.as_str(),
            other_tools: &other_tools,
            siblings,
        },
    )
}

fn log_findings(upstream: &Slug, tool: &str, findings: &[DefinitionFinding]) {
    if findings.is_empty() {
        return;
    }
    let kinds: Vec<&str> = findings.iter().map(|f| f.kind).collect();
    tracing::warn!(
        %upstream,
        tool,
        findings = findings.len(),
        kinds = %kinds.join(","),
        "an offered tool definition has inspection findings"
    );
}

/// Adds `findings`, when there are any, to an event's `after` value (an object) as
/// `findings`: an event without them reads as it did before definitions were inspected.
pub(super) fn with_findings(after: &mut Value, findings: &[DefinitionFinding]) {
    if findings.is_empty() {
        return;
    }
    if let Value::Object(map) = after {
        map.insert(
            "findings".to_owned(),
            serde_json::to_value(findings).unwrap_or(Value::Null),
        );
    }
}
