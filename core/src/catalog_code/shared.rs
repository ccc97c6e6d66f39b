//! What a catalog file may not do to a shared upstream (docs/architecture.md, "Sharing
//! one upstream into several workspaces"): in a workspace, create, change or remove an
//! upstream the platform shares into it, or one of its tools; on the platform, remove an
//! upstream that is still shared into a workspace.

use super::plan::{EntityKind, Plan, Write};
use super::validate::Issue;
use crate::store::shares::{shared_upstreams_on, shares_on, tool_shared_from_on};
use crate::store::{StoreError, Tx};

/// The changes of `plan` that touch a shared upstream, each as an issue of the file.
pub(super) async fn shared_issues(tx: &mut Tx, plan: &Plan) -> Result<Vec<Issue>, StoreError> {
    let copies = shared_upstreams_on(tx).await?;
    let shares = shares_on(tx).await?;
    let mut issues = Vec::new();
    for change in &plan.changes {
        let read_only = |upstream: &str, from: &str| {
            Issue::new(
                if change.kind == EntityKind::Tool {
                    "tools"
                } else {
                    "upstreams"
                },
                format!(
                    "{} `{}` would {}: upstream `{upstream}` is shared into this workspace by workspace `{from}` and is read-only here; change it there",
                    change.kind.label(),
                    change.name,
                    change.audit_action().rsplit('.').next().unwrap_or("change"),
                ),
            )
        };
        match &change.write {
            Write::PutUpstream(upstream) => {
                if let Some(from) = copies.get(upstream.name.as_str()) {
                    issues.push(read_only(upstream.name.as_str(), from));
                }
            }
            Write::PutTool(tool) => {
                if let Some(from) = copies.get(tool.upstream.as_str()) {
                    issues.push(read_only(tool.upstream.as_str(), from));
                }
            }
            Write::DeleteTool(name) => {
                if let Some((upstream, from)) = tool_shared_from_on(tx, name).await? {
                    issues.push(read_only(&upstream, &from));
                }
            }
            Write::DeleteUpstream(name) => {
                if let Some(from) = copies.get(name.as_str()) {
                    issues.push(read_only(name.as_str(), from));
                }
                let into: Vec<String> = shares
                    .iter()
                    .filter(|s| s.upstream == name.as_str())
                    .map(|s| format!("`{}`", s.workspace))
                    .collect();
                if !into.is_empty() {
                    issues.push(Issue::new(
                        "upstreams",
                        format!(
                            "upstream `{name}` would be removed, but it is shared into workspace(s) {}: unshare it first",
                            into.join(", ")
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(issues)
}
