//! Catalog entries: roles, scopes, skills and their versions, upstreams and tools.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{AdminError, AdminService, snapshot, target};
use crate::model::{
    CatalogError, Role, Scope, Skill, SkillVersion, Upstream, UpstreamKind, check_upstream_url,
};
use crate::slug::Slug;
use crate::store::StoreError;
use crate::store::Tx;
use crate::store::catalog::{self, Revised};
use crate::upstream::{
    CredentialSummary, Secret, UpstreamCredentials, check_extra_header, parse_ca_bundle,
};

/// What saving an upstream does to its stored credentials: each part given replaces the
/// stored one, a part left out is kept (the console never shows a stored secret, so it
/// cannot send it back), and `clear` first removes everything stored.
#[derive(Default)]
pub struct CredentialUpdate {
    pub env: Option<BTreeMap<String, Secret>>,
    pub bearer: Option<Secret>,
    /// An HTTP upstream's extra headers by name, as entered (checked and lower-cased here).
    pub headers: Option<BTreeMap<String, Secret>>,
    pub clear: bool,
}

fn is_env_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl AdminService {
    /// Roles with their revisions, in slug order.
    pub async fn roles(&self) -> Result<Vec<Revised<Role>>, AdminError> {
        Ok(self.store.list_roles().await?)
    }

    pub async fn role(&self, slug: &Slug) -> Result<Option<Revised<Role>>, AdminError> {
        Ok(self.store.get_role(slug).await?)
    }

    #[tracing::instrument(skip(self, role), fields(role = %role.slug))]
    pub async fn create_role(&self, actor: &str, role: &Role) -> Result<i64, AdminError> {
        self.authorable()?;
        let role = role.clone();
        let target = target("role", role.slug.as_str());
        self.save(actor, "role.create", target, move |conn| {
            Box::pin(async move {
                let revision = catalog::create_role_on(conn, &role).await?;
                Ok((revision, Value::Null, snapshot(&role, revision)))
            })
        })
        .await
    }

    /// Saves `role` if nobody saved it since `expected_revision`; returns the new revision.
    #[tracing::instrument(skip(self, role), fields(role = %role.slug))]
    pub async fn update_role(
        &self,
        actor: &str,
        role: &Role,
        expected_revision: i64,
    ) -> Result<i64, AdminError> {
        self.authorable()?;
        let role = role.clone();
        let target = target("role", role.slug.as_str());
        self.save(actor, "role.update", target, move |conn| {
            Box::pin(async move {
                let before = catalog::list_roles(conn)
                    .await?
                    .into_iter()
                    .find(|r| r.value.slug == role.slug)
                    .ok_or_else(|| StoreError::NotFound(format!("role `{}`", role.slug)))?;
                let revision = catalog::update_role_on(conn, &role, expected_revision).await?;
                let before = snapshot(&before.value, before.revision);
                Ok((revision, before, snapshot(&role, revision)))
            })
        })
        .await
    }

    pub async fn scopes(&self) -> Result<Vec<Revised<Scope>>, AdminError> {
        Ok(self.store.list_scopes().await?)
    }

    #[tracing::instrument(skip(self, scope), fields(scope = %scope.slug))]
    pub async fn create_scope(&self, actor: &str, scope: &Scope) -> Result<i64, AdminError> {
        self.authorable()?;
        let scope = scope.clone();
        let target = target("scope", scope.slug.as_str());
        self.save(actor, "scope.create", target, move |conn| {
            Box::pin(async move {
                let revision = catalog::create_scope_on(conn, &scope).await?;
                Ok((revision, Value::Null, snapshot(&scope, revision)))
            })
        })
        .await
    }

    #[tracing::instrument(skip(self, scope), fields(scope = %scope.slug))]
    pub async fn update_scope(
        &self,
        actor: &str,
        scope: &Scope,
        expected_revision: i64,
    ) -> Result<i64, AdminError> {
        self.authorable()?;
        let scope = scope.clone();
        let target = target("scope", scope.slug.as_str());
        self.save(actor, "scope.update", target, move |conn| {
            Box::pin(async move {
                let before = catalog::list_scopes(conn)
                    .await?
                    .into_iter()
                    .find(|s| s.value.slug == scope.slug)
                    .ok_or_else(|| StoreError::NotFound(format!("scope `{}`", scope.slug)))?;
                let revision = catalog::update_scope_on(conn, &scope, expected_revision).await?;
                let before = snapshot(&before.value, before.revision);
                Ok((revision, before, snapshot(&scope, revision)))
            })
        })
        .await
    }

    /// Current skill versions with their revisions.
    pub async fn skills(&self) -> Result<Vec<Revised<SkillVersion>>, AdminError> {
        Ok(self.store.list_skills().await?)
    }

    pub async fn skill_versions(&self, slug: &Slug) -> Result<Vec<SkillVersion>, AdminError> {
        Ok(self.store.skill_versions(slug).await?)
    }

    #[tracing::instrument(skip(self, skill), fields(skill = %skill.slug))]
    pub async fn create_skill(
        &self,
        actor: &str,
        skill: &Skill,
    ) -> Result<Revised<SkillVersion>, AdminError> {
        self.authorable()?;
        let skill = skill.clone();
        let target = target("skill", skill.slug.as_str());
        self.save(actor, "skill.create", target, move |conn| {
            Box::pin(async move {
                let saved = catalog::create_skill_on(conn, &skill).await?;
                let after = snapshot(&saved.value, saved.revision);
                Ok((saved, Value::Null, after))
            })
        })
        .await
    }

    /// Saves a new version of a skill and makes it current.
    #[tracing::instrument(skip(self, skill), fields(skill = %skill.slug))]
    pub async fn update_skill(
        &self,
        actor: &str,
        skill: &Skill,
        expected_revision: i64,
    ) -> Result<Revised<SkillVersion>, AdminError> {
        self.authorable()?;
        let skill = skill.clone();
        let target = target("skill", skill.slug.as_str());
        self.save(actor, "skill.update", target, move |conn| {
            Box::pin(async move {
                let before = current_skill(conn, &skill.slug).await?;
                let saved = catalog::update_skill_on(conn, &skill, expected_revision).await?;
                let before = snapshot(&before.value, before.revision);
                let after = snapshot(&saved.value, saved.revision);
                Ok((saved, before, after))
            })
        })
        .await
    }

    /// Makes an earlier version current again; returns the new revision.
    #[tracing::instrument(skip(self))]
    pub async fn restore_skill_version(
        &self,
        actor: &str,
        slug: &Slug,
        version: u32,
        expected_revision: i64,
    ) -> Result<i64, AdminError> {
        self.authorable()?;
        let slug = slug.clone();
        let target = target("skill", slug.as_str());
        self.save(actor, "skill.restore", target, move |conn| {
            Box::pin(async move {
                let before = current_skill(conn, &slug).await?;
                let revision =
                    catalog::set_current_skill_version_on(conn, &slug, version, expected_revision)
                        .await?;
                Ok((
                    revision,
                    json!({ "revision": before.revision, "current_version": before.value.version }),
                    json!({ "revision": revision, "current_version": version }),
                ))
            })
        })
        .await
    }

    /// Adds or changes an upstream (its tools arrive with the next sync), and its stored
    /// credentials as `credentials` says. The audit records which environment keys and
    /// extra headers exist and whether a token is set, never a value. A CA bundle or header
    /// that is not valid is a field error and changes nothing.
    #[tracing::instrument(skip(self, upstream, credentials), fields(upstream = %upstream.name))]
    pub async fn register_upstream(
        &self,
        actor: &str,
        upstream: &Upstream,
        credentials: CredentialUpdate,
    ) -> Result<(), AdminError> {
        if let UpstreamKind::Stdio { command, .. } = &upstream.kind
            && command.trim().is_empty()
        {
            return Err(CatalogError::Empty("upstream command").into());
        }
        if let UpstreamKind::Http {
            url,
            allow_plaintext,
            ..
        } = &upstream.kind
        {
            check_upstream_url(url, *allow_plaintext)
                .map_err(|reason| AdminError::bad_input("url", reason))?;
        }
        if let UpstreamKind::Http {
            ca_bundle: Some(pem),
            ..
        } = &upstream.kind
        {
            parse_ca_bundle(pem).map_err(|reason| {
                AdminError::bad_input("ca_bundle", format!("CA bundle: {reason}"))
            })?;
        }
        let credentials = CredentialUpdate {
            headers: credentials
                .headers
                .map(|headers| {
                    if !matches!(upstream.kind, UpstreamKind::Http { .. }) && !headers.is_empty() {
                        return Err(AdminError::bad_input(
                            "headers",
                            "extra headers are for an HTTP upstream; a stdio one takes its environment",
                        ));
                    }
                    headers
                        .into_iter()
                        .map(|(name, value)| {
                            check_extra_header(&name, value.expose())
                                .map(|name| (name, value))
                                .map_err(|reason| AdminError::bad_input("headers", reason))
                        })
                        .collect::<Result<BTreeMap<_, _>, _>>()
                })
                .transpose()?,
            ..credentials
        };
        if matches!(upstream.kind, UpstreamKind::Builtin)
            || upstream.name.as_str() == crate::revisions::curator::CURATION_UPSTREAM
        {
            return Err(AdminError::bad_input(
                "name",
                format!(
                    "`{}` is the built-in curation upstream; choose another name",
                    upstream.name
                ),
            ));
        }
        if let Some(key) = credentials
            .env
            .as_ref()
            .and_then(|env| env.keys().find(|k| !is_env_key(k)))
        {
            return Err(AdminError::bad_input(
                "env",
                format!(
                    "`{key}` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
                ),
            ));
        }
        self.refuse_shared_upstream(upstream.name.as_str()).await?;
        let upstream = upstream.clone();
        let stored = self
            .store
            .list_upstreams()
            .await?
            .into_iter()
            .find(|u| u.name == upstream.name);
        // A catalog file defines upstreams but never their credentials: with one in charge,
        // only the credentials of an upstream it defines may change here.
        if stored.as_ref() != Some(&upstream) {
            self.authorable()?;
        }
        let action = if stored.is_some() {
            "upstream.update"
        } else {
            "upstream.create"
        };
        let target = target("upstream", upstream.name.as_str());
        self.save(actor, action, target, move |conn| {
            Box::pin(async move {
                let before = catalog::list_upstreams(conn)
                    .await?
                    .into_iter()
                    .find(|u| u.name == upstream.name);
                let stored = catalog::upstream_credentials_on(conn)
                    .await?
                    .remove(upstream.name.as_str())
                    .unwrap_or_default();
                let mut next = if credentials.clear {
                    UpstreamCredentials::default()
                } else {
                    stored.clone()
                };
                if let Some(env) = credentials.env {
                    next.env = env;
                }
                if let Some(bearer) = credentials.bearer {
                    next.bearer = Some(bearer);
                }
                if let Some(headers) = credentials.headers {
                    next.headers = headers;
                }
                catalog::upsert_upstream(conn, &upstream).await?;
                catalog::set_upstream_credentials_on(conn, &upstream.name, Some(&next)).await?;
                let describe = |u: &Upstream, c: &UpstreamCredentials| {
                    json!({ "upstream": u, "credentials": c.describe() })
                };
                let before = before.map_or(Value::Null, |b| describe(&b, &stored));
                Ok(((), before, describe(&upstream, &next)))
            })
        })
        .await
    }

    /// What may be shown about each upstream's stored credentials.
    pub async fn credential_summaries(
        &self,
    ) -> Result<BTreeMap<String, CredentialSummary>, AdminError> {
        Ok(self
            .store
            .upstream_credentials()
            .await?
            .into_iter()
            .map(|(name, c)| (name, c.describe()))
            .collect())
    }

    /// Marks which arguments of a tool the audit stores as a digest only.
    #[tracing::instrument(skip(self))]
    pub async fn set_sensitive_args(
        &self,
        actor: &str,
        tool: &str,
        args: &[String],
    ) -> Result<(), AdminError> {
        self.authorable()?;
        self.refuse_shared_tool(tool).await?;
        let before = self
            .live()
            .tool(tool)
            .map(|t| t.spec.sensitive_args.clone())
            .ok_or_else(|| AdminError::NotFound(format!("tool `{tool}`")))?;
        let (tool, args) = (tool.to_owned(), args.to_vec());
        let target = target("tool", &tool);
        self.save(actor, "tool.sensitive_args", target, move |conn| {
            Box::pin(async move {
                catalog::set_sensitive_args_on(conn, &tool, &args).await?;
                Ok((
                    (),
                    json!({ "sensitive_args": before }),
                    json!({ "sensitive_args": args }),
                ))
            })
        })
        .await
    }

    /// Re-pins `tool` to the definition its upstream offers now, if that is still the one
    /// hashing to `expected_offer` (what the admin reviewed; else a conflict). Audited as
    /// `tool.admit` with the old and new pins and the offer's inspection findings
    /// ([`Self::offered_definition_findings`]); calls pass again with the next decision.
    /// While the catalog's inspection policy refuses admission with findings, an offer that
    /// has any is refused (audited as `admin_refused`) and nothing changes. Keeping a tool
    /// blocked is simply not admitting it. Returns the new pin.
    #[tracing::instrument(skip(self))]
    pub async fn admit_tool(
        &self,
        actor: &str,
        tool: &str,
        expected_offer: &str,
    ) -> Result<String, AdminError> {
        self.authorable()?;
        self.refuse_shared_tool(tool).await?;
        // The policy and the other upstreams' tools as stored now, not as this replica
        // last compiled them.
        self.reload_if_moved().await?;
        let findings = self.offered_definition_findings(tool).await?;
        let target = target("tool", tool);
        let refuse = self
            .live()
            .catalog()
            .inspection
            .definitions
            .refuse_admission_with_findings;
        if refuse && !findings.is_empty() {
            let listed: Vec<String> = findings
                .iter()
                .map(|f| format!("{} in {}: {}", f.kind, f.field, f.detail))
                .collect();
            let refused = AdminError::Conflict(format!(
                "`{tool}` is not admitted: its offered definition has {} inspection finding(s) and the inspection policy refuses admission while any is open ({})",
                findings.len(),
                listed.join("; ")
            ));
            self.record_refusal(
                actor,
                "tool.admit",
                &target,
                "DEFINITION_FINDINGS",
                &refused.to_string(),
            )
            .await?;
            return Err(refused);
        }
        let (tool, expected) = (tool.to_owned(), expected_offer.to_owned());
        self.save(actor, "tool.admit", target, move |conn| {
            Box::pin(async move {
                let change = catalog::admit_tool_on(conn, &tool, &expected).await?;
                let mut after = change.after;
                super::sync::with_findings(&mut after, &findings);
                Ok((expected, change.before, after))
            })
        })
        .await
    }
}

/// The current version of a skill with its revision, read inside a change's transaction.
pub(crate) async fn current_skill(
    conn: &mut Tx,
    slug: &Slug,
) -> Result<Revised<SkillVersion>, StoreError> {
    catalog::list_skills(conn)
        .await?
        .into_iter()
        .find(|s| s.value.skill.slug == *slug)
        .ok_or_else(|| StoreError::NotFound(format!("skill `{slug}`")))
}
