//! The inspection policy through the one door: checked against the catalog, stored with
//! its `admin_change` event (`inspection.update` on `inspection:policy`), then live.

use std::collections::HashSet;
use std::fmt;

use serde_json::json;

use super::{AdminError, AdminService, Changed};
use crate::model::{Catalog, InspectionPolicy, Inspector, hook_issues, valid_field_pointer};
use crate::store::StoreError;
use crate::store::catalog::{inspection_policy_on, load_catalog, put_inspection_policy_on};

/// The audit target of the policy: there is one.
pub const INSPECTION_TARGET: &str = "inspection:policy";

/// One problem with a policy: the rule or hook it is in (by position) and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyIssue {
    /// `rules`, `hooks` or `secret_sources`.
    pub list: &'static str,
    pub rule: usize,
    /// `tool`, `role`, `scope`, `max_bytes` or `inspector`; of a hook also `name`, `url`,
    /// `stages`, `timeout_ms` or `secret_env`; of a secret source `tool` or `fields`.
    pub field: &'static str,
    pub message: String,
}

impl PolicyIssue {
    /// Where the problem is, e.g. `rules[2].tool`.
    pub fn path(&self) -> String {
        format!("{}[{}].{}", self.list, self.rule, self.field)
    }
}

impl fmt::Display for PolicyIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path(), self.message)
    }
}

/// Every problem of `policy` against `catalog`: a rule may name only a tool, role and
/// scope the catalog has; `max_bytes` belongs to `result_size` rules, which need it (at
/// least 1); no two rules name the same inspector with the same selectors (which one
/// would win is then a matter of order, and order means nothing here); each hook's
/// problems ([`hook_issues`]); and each secret source names a tool the catalog has, once,
/// with valid JSON Pointers.
pub fn policy_issues(catalog: &Catalog, policy: &InspectionPolicy) -> Vec<PolicyIssue> {
    let mut issues = Vec::new();
    let mut seen = HashSet::new();
    for (i, rule) in policy.rules.iter().enumerate() {
        let mut issue = |field, message: String| {
            issues.push(PolicyIssue {
                list: "rules",
                rule: i,
                field,
                message,
            })
        };
        if let Some(tool) = &rule.tool
            && catalog.tool(tool).is_none()
        {
            issue("tool", format!("the catalog has no tool `{tool}`"));
        }
        if let Some(role) = &rule.role
            && catalog.role(role.as_str()).is_none()
        {
            issue("role", format!("the catalog has no role `{role}`"));
        }
        if let Some(scope) = &rule.scope
            && catalog.scope(scope.as_str()).is_none()
        {
            issue("scope", format!("the catalog has no scope `{scope}`"));
        }
        match (rule.inspector, rule.max_bytes) {
            (Inspector::ResultSize, None) => issue(
                "max_bytes",
                "a `result_size` rule needs `max_bytes`: the largest result, in bytes, that passes"
                    .to_owned(),
            ),
            (Inspector::ResultSize, Some(0)) => {
                issue("max_bytes", "`max_bytes` must be at least 1".to_owned());
            }
            (Inspector::ResultSize, Some(_)) | (_, None) => {}
            (other, Some(_)) => issue(
                "max_bytes",
                format!(
                    "`max_bytes` applies to `result_size` rules only, not to `{}`",
                    other.as_str()
                ),
            ),
        }
        let key = (
            rule.inspector,
            rule.tool.clone(),
            rule.role.clone(),
            rule.scope.clone(),
        );
        if !seen.insert(key) {
            issue(
                "inspector",
                format!(
                    "another rule already sets `{}` for the same tool, role and scope",
                    rule.inspector.as_str()
                ),
            );
        }
    }
    issues.extend(
        hook_issues(catalog, &policy.hooks)
            .into_iter()
            .map(|(rule, field, message)| PolicyIssue {
                list: "hooks",
                rule,
                field,
                message,
            }),
    );
    let mut marked = HashSet::new();
    for (i, source) in policy.secret_sources.iter().enumerate() {
        let mut issue = |field, message: String| {
            issues.push(PolicyIssue {
                list: "secret_sources",
                rule: i,
                field,
                message,
            })
        };
        if catalog.tool(&source.tool).is_none() {
            issue("tool", format!("the catalog has no tool `{}`", source.tool));
        }
        if !marked.insert(source.tool.as_str()) {
            issue(
                "tool",
                format!("`{}` is marked as a secret source twice", source.tool),
            );
        }
        if let Some(bad) = source.fields.iter().find(|f| !valid_field_pointer(f)) {
            issue(
                "fields",
                format!(
                    "`{bad}` is not a JSON Pointer to a field: write `/password` or \
                     `/secrets/*/value` (`*`: every item or member; `~1` for a `/` in a name)"
                ),
            );
        }
    }
    issues
}

impl AdminService {
    /// The stored inspection policy.
    pub async fn inspection_policy(&self) -> Result<InspectionPolicy, AdminError> {
        Ok(self
            .store
            .with_conn(|tx| {
                Box::pin(async move { inspection_policy_on(tx).await.map_err(StoreError::from) })
            })
            .await?)
    }

    /// Replaces the inspection policy, checked against the catalog in the same transaction
    /// (the first problem is the error, its field named: `rules[2].tool`). Audited as
    /// `inspection.update` on `inspection:policy` with the old and new policy; setting the
    /// policy already in place writes nothing.
    #[tracing::instrument(skip(self, policy))]
    pub async fn set_inspection_policy(
        &self,
        actor: &str,
        policy: InspectionPolicy,
    ) -> Result<(), AdminError> {
        self.authorable()?;
        // The refusal is the change's value: nothing written, no event.
        let outcome = self
            .record(
                actor,
                Box::new(move |conn| {
                    Box::pin(async move {
                        let catalog = load_catalog(&mut *conn).await?;
                        if let Some(issue) = policy_issues(&catalog, &policy).into_iter().next() {
                            return Ok((Err(issue), Vec::new()));
                        }
                        let before = inspection_policy_on(&mut *conn).await?;
                        if before == policy {
                            return Ok((Ok(false), Vec::new()));
                        }
                        put_inspection_policy_on(&mut *conn, &policy).await?;
                        let changed = Changed::new(
                            "inspection.update",
                            INSPECTION_TARGET.to_owned(),
                            json!({ "value": before }),
                            json!({ "value": policy }),
                        );
                        Ok((Ok(true), vec![changed]))
                    })
                }),
            )
            .await?;
        match outcome {
            Err(issue) => Err(AdminError::bad_input(issue.field, issue.to_string())),
            Ok(true) => self.reload().await,
            Ok(false) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SecretSource;

    fn source(tool: &str, fields: &[&str]) -> SecretSource {
        SecretSource {
            tool: tool.to_owned(),
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    #[test]
    fn a_secret_source_must_name_a_known_tool_once_with_json_pointers() {
        assert!(valid_field_pointer("/password"));
        assert!(valid_field_pointer("/secrets/*/value"));
        assert!(valid_field_pointer("/a~1b/c~0d"));
        for bad in ["", "/", "password", "/a~2b", "/a~"] {
            assert!(!valid_field_pointer(bad), "{bad:?}");
        }
        let policy = InspectionPolicy {
            secret_sources: vec![
                source("read_secret", &["/value"]),
                source("read_secret", &["value"]),
            ],
            ..InspectionPolicy::default()
        };
        let found: Vec<String> = policy_issues(&Catalog::default(), &policy)
            .iter()
            .map(PolicyIssue::path)
            .collect();
        assert_eq!(
            found,
            [
                "secret_sources[0].tool",
                "secret_sources[1].tool",
                "secret_sources[1].tool",
                "secret_sources[1].fields",
            ]
        );
    }
}
