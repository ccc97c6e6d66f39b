//! Server functions that change the catalog (roles, limits, scopes, skills, tools, agent
//! keys), the editor views they need, and their wire types.
//!
//! Reading an editor needs any console role; saving needs `admin` (a `reviewer` or
//! `viewer` is refused on the server whatever the page shows). Every save goes through
//! `skillgate_core::admin`, which validates, refuses stale revisions, audits and
//! swaps the live snapshot. The functions take plain form fields so the same `<form>`
//! posts without JavaScript (the server redirects back) and through `ActionForm` with it.

use std::collections::BTreeMap;

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::api::ConsoleError;

/// Checkbox groups post as `name[item]=on`, which arrives as a map; absent when none ticked.
pub type Checked = Option<BTreeMap<String, String>>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub name: String,
    pub note: String,
}

/// One argument a limit may name, with what kinds of limit make sense for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgChoice {
    pub name: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChoice {
    pub name: String,
    pub args: Vec<ArgChoice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitView {
    pub index: usize,
    /// What an agent reads.
    pub sentence: String,
    /// The compact notation, e.g. `process_refund.amount <= 500`.
    pub rule: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleEditor {
    pub slug: String,
    pub revision: i64,
    pub title: String,
    pub description: String,
    pub instructions: String,
    /// The instructions rendered from markdown, sanitized on the server.
    pub instructions_html: String,
    pub skills: Vec<String>,
    /// Every skill of the catalog, to pick from.
    pub all_skills: Vec<Choice>,
    pub limits: Vec<LimitView>,
    /// The tools the role grants, with their top-level arguments: the limit pickers.
    pub tools: Vec<ToolChoice>,
    pub can_edit: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeEditor {
    pub slug: String,
    pub revision: i64,
    pub description: String,
    pub roles: Vec<String>,
    pub all_roles: Vec<Choice>,
    /// Limits that bind every call of the scope's sessions, under every role.
    pub guardrails: Vec<LimitView>,
    /// The tools the scope's roles grant: what a guardrail may name.
    pub tools: Vec<ToolChoice>,
    pub can_edit: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceEdit {
    pub name: String,
    pub title: String,
    pub content: String,
    /// Ticked in the form: leave this resource out of the new version.
    pub remove: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionRow {
    pub version: u32,
    pub description: String,
    pub tools: Vec<String>,
    pub resources: Vec<String>,
    pub instructions_chars: usize,
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillEditor {
    pub slug: String,
    pub revision: i64,
    pub version: u32,
    pub description: String,
    pub instructions: String,
    pub instructions_html: String,
    pub tools: Vec<String>,
    pub all_tools: Vec<Choice>,
    pub resources: Vec<ResourceEdit>,
    pub versions: Vec<VersionRow>,
    pub can_edit: bool,
}

/// One version of a skill, read-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillVersionView {
    pub slug: String,
    pub version: u32,
    pub description: String,
    pub instructions_html: String,
    pub tools: Vec<String>,
    pub resources: Vec<ResourceEdit>,
}

/// Everything the key form needs: the scopes a key can map to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyForm {
    pub scopes: Vec<String>,
    pub can_edit: bool,
    /// A key created by a form post without JavaScript, shown once after the redirect.
    pub fresh: Option<CreatedKey>,
}

/// A newly created agent key: the only time the key itself is ever shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedKey {
    pub name: String,
    pub scope: String,
    pub key: String,
    /// A ready-to-paste MCP client configuration that uses the key.
    pub config: String,
}

/// An upstream as the console lists it. Never a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamRow {
    pub name: String,
    pub kind: String,
    /// The command line or the URL.
    pub target: String,
    pub tools: Vec<String>,
    /// The names of the stored environment variables (never their values).
    pub env_keys: Vec<String>,
    /// Whether a bearer token is stored (never the token).
    pub bearer: bool,
    /// The names of the stored extra headers (never their values).
    pub header_names: Vec<String>,
    /// Whether the upstream trusts a CA bundle of its own beside the system's roots.
    pub ca_bundle: bool,
}

/// The upstreams page: the upstreams, the last sync's reports, and a health answer when
/// the page was asked to check one (`?check=NAME`, a plain link).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamsView {
    pub rows: Vec<UpstreamRow>,
    pub last_sync: Vec<SyncSummary>,
    pub health: Option<String>,
}

/// What one upstream's tool sync did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncSummary {
    pub upstream: String,
    pub tools: usize,
    /// Catalog tools the upstream no longer lists: kept and flagged, not dropped.
    pub missing: Vec<String>,
    pub error: Option<String>,
}

/// One entry of an entity's change log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeRow {
    pub seq: u64,
    pub at: String,
    pub actor: String,
    pub action: String,
    /// Top-level fields that differ between before and after, e.g. `limits`, `title`.
    pub changed: Vec<String>,
    pub before: String,
    pub after: String,
}

#[server(prefix = "/console/api", endpoint = "role_editor")]
pub async fn get_role_editor(slug: String) -> Result<Option<RoleEditor>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let Ok(parsed) = skillgate_core::slug::Slug::parse(&slug) else {
        return Ok(None);
    };
    let Some(stored) = ctx
        .authoring
        .role(&parsed)
        .await
        .map_err(crate::api::ssr::internal)?
    else {
        return Ok(None);
    };
    Ok(Some(ssr::role_editor(
        &ctx.authoring.live(),
        stored.value,
        stored.revision,
        user.role.allows(ConsoleRole::Admin),
    )))
}

/// The catalog's skills, for the new-role form.
#[server(prefix = "/console/api", endpoint = "skill_choices")]
pub async fn skill_choices() -> Result<Vec<Choice>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    Ok(ssr::skill_choices(
        &crate::api::ssr::context().authoring.live(),
    ))
}

#[server(prefix = "/console/api", endpoint = "create_role")]
pub async fn create_role(
    slug: String,
    title: String,
    description: String,
    instructions: String,
    skills: Checked,
) -> Result<(), ConsoleError> {
    use skillgate_core::model::Role;
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let role = Role {
        slug: ssr::slug_field("slug", &slug)?,
        title: title.trim().to_owned(),
        description: description.trim().to_owned(),
        instructions,
        skills: ssr::checked_slugs("skills", skills)?,
        limits: Vec::new(),
    };
    crate::api::ssr::context()
        .authoring
        .create_role(&user.name, &role)
        .await
        .map_err(ssr::authoring_error)?;
    leptos_axum::redirect(&format!("/roles/{}/edit", role.slug));
    Ok(())
}

#[server(prefix = "/console/api", endpoint = "save_role")]
pub async fn save_role(
    slug: String,
    revision: i64,
    title: String,
    description: String,
    instructions: String,
    skills: Checked,
) -> Result<i64, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let ctx = crate::api::ssr::context();
    let mut role = ssr::stored_role(&ctx, &slug).await?;
    role.title = title.trim().to_owned();
    role.description = description.trim().to_owned();
    role.instructions = instructions;
    role.skills = ssr::checked_slugs("skills", skills)?;
    ctx.authoring
        .update_role(&user.name, &role, revision)
        .await
        .map_err(ssr::authoring_error)
}

/// Markdown to sanitized HTML, for the live preview of an editor.
#[server(prefix = "/console/api", endpoint = "preview_markdown")]
pub async fn preview_markdown(text: String) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    Ok(ssr::markdown_html(&text))
}

#[server(prefix = "/console/api", endpoint = "scope_editor")]
pub async fn get_scope_editor(slug: String) -> Result<Option<ScopeEditor>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let scopes = ctx
        .authoring
        .scopes()
        .await
        .map_err(crate::api::ssr::internal)?;
    let Some(stored) = scopes.into_iter().find(|s| s.value.slug.as_str() == slug) else {
        return Ok(None);
    };
    let live = ctx.authoring.live();
    Ok(Some(ScopeEditor {
        slug: stored.value.slug.as_str().to_owned(),
        revision: stored.revision,
        description: stored.value.description.clone(),
        roles: stored
            .value
            .roles
            .iter()
            .map(|r| r.as_str().to_owned())
            .collect(),
        all_roles: ssr::role_choices(&live),
        guardrails: ssr::limit_views(&stored.value.guardrails),
        tools: ssr::scope_tools(&live, &stored.value),
        can_edit: user.role.allows(ConsoleRole::Admin),
    }))
}

#[server(prefix = "/console/api", endpoint = "role_choices")]
pub async fn role_choices() -> Result<Vec<Choice>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    Ok(ssr::role_choices(
        &crate::api::ssr::context().authoring.live(),
    ))
}

#[server(prefix = "/console/api", endpoint = "create_scope")]
pub async fn create_scope(
    slug: String,
    description: String,
    roles: Checked,
) -> Result<(), ConsoleError> {
    use skillgate_core::model::Scope;
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let scope = Scope {
        slug: ssr::slug_field("slug", &slug)?,
        description: description.trim().to_owned(),
        roles: ssr::checked_slugs("roles", roles)?,
        guardrails: Vec::new(),
    };
    crate::api::ssr::context()
        .authoring
        .create_scope(&user.name, &scope)
        .await
        .map_err(ssr::authoring_error)?;
    leptos_axum::redirect(&format!("/scopes/{}", scope.slug));
    Ok(())
}

#[server(prefix = "/console/api", endpoint = "save_scope")]
pub async fn save_scope(
    slug: String,
    revision: i64,
    description: String,
    roles: Checked,
) -> Result<i64, ConsoleError> {
    use skillgate_core::model::Scope;
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let ctx = crate::api::ssr::context();
    // The form edits description and roles; the guardrails have their own editor and
    // are kept as stored.
    let slug = ssr::slug_field("slug", &slug)?;
    let guardrails = ssr::stored_scope(&ctx, &slug).await?.guardrails;
    let scope = Scope {
        slug,
        description: description.trim().to_owned(),
        roles: ssr::checked_slugs("roles", roles)?,
        guardrails,
    };
    ctx.authoring
        .update_scope(&user.name, &scope, revision)
        .await
        .map_err(ssr::authoring_error)
}

#[server(prefix = "/console/api", endpoint = "key_form")]
pub async fn get_key_form(reveal: Option<String>) -> Result<KeyForm, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let can_edit = user.role.allows(ConsoleRole::Admin);
    let fresh = match reveal.filter(|_| can_edit) {
        Some(token) => ctx
            .authoring
            .take_key_reveal(user.id, &token)
            .await
            .map_err(crate::api::ssr::internal)?
            .and_then(|payload| leptos::serde_json::from_str(&payload).ok()),
        None => None,
    };
    Ok(KeyForm {
        scopes: ctx
            .authoring
            .live()
            .catalog()
            .scopes
            .iter()
            .map(|s| s.slug.as_str().to_owned())
            .collect(),
        can_edit,
        fresh,
    })
}

/// Creates an agent key. With JavaScript the key comes back in the result. A plain form
/// post is answered with a redirect, which cannot carry the key: it is kept server-side
/// for one render and the redirect names it with a random one-time token.
#[server(prefix = "/console/api", endpoint = "create_key")]
pub async fn create_key(
    name: String,
    scope: String,
    expires_in_days: Option<String>,
) -> Result<Option<CreatedKey>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let scope = ssr::slug_field("scope", &scope)?;
    let expires_at = ssr::expiry(expires_in_days.as_deref())?;
    let ctx = crate::api::ssr::context();
    let (info, key) = ctx
        .authoring
        .create_key(&user.name, name.trim(), &scope, expires_at)
        .await
        .map_err(ssr::authoring_error)?;
    let created = CreatedKey {
        name: info.name.clone(),
        scope: info.scope.as_str().to_owned(),
        config: ssr::client_config(key.expose()).await,
        key: key.expose().to_owned(),
    };
    if ssr::is_plain_form_post().await {
        let payload = leptos::serde_json::to_string(&created).map_err(crate::api::ssr::internal)?;
        let token = ctx
            .authoring
            .stash_key_reveal(user.id, &payload)
            .await
            .map_err(crate::api::ssr::internal)?;
        leptos_axum::redirect(&format!("/scopes?reveal={token}#new-key"));
        return Ok(None);
    }
    Ok(Some(created))
}

#[server(prefix = "/console/api", endpoint = "revoke_key")]
pub async fn revoke_key(name: String) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    crate::api::ssr::context()
        .authoring
        .revoke_key(&user.name, &name)
        .await
        .map_err(ssr::authoring_error)?;
    Ok(())
}

#[server(prefix = "/console/api", endpoint = "skill_editor")]
pub async fn get_skill_editor(slug: String) -> Result<Option<SkillEditor>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let skills = ctx
        .authoring
        .skills()
        .await
        .map_err(crate::api::ssr::internal)?;
    let Some(stored) = skills
        .into_iter()
        .find(|s| s.value.skill.slug.as_str() == slug)
    else {
        return Ok(None);
    };
    let versions = ctx
        .authoring
        .skill_versions(&stored.value.skill.slug)
        .await
        .map_err(crate::api::ssr::internal)?;
    Ok(Some(ssr::skill_editor(
        &ctx.authoring.live(),
        stored.value,
        stored.revision,
        versions,
        user.role.allows(ConsoleRole::Admin),
    )))
}

#[server(prefix = "/console/api", endpoint = "skill_version")]
pub async fn skill_version(
    slug: String,
    version: u32,
) -> Result<Option<SkillVersionView>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let Ok(parsed) = skillgate_core::slug::Slug::parse(&slug) else {
        return Ok(None);
    };
    let versions = crate::api::ssr::context()
        .authoring
        .skill_versions(&parsed)
        .await
        .map_err(crate::api::ssr::internal)?;
    Ok(versions
        .into_iter()
        .find(|v| v.version == version)
        .map(|v| SkillVersionView {
            slug,
            version: v.version,
            description: v.skill.description,
            instructions_html: ssr::markdown_html(&v.skill.instructions),
            tools: v.skill.tools,
            resources: ssr::resource_edits(&v.skill.resources),
        }))
}

/// Saves a new version of a skill. `resources` arrive as `resources[i][name|title|content]`
/// (plus `[remove]` when ticked); a ticked or nameless row is left out, and the blank row
/// the form always offers adds one when filled in.
#[server(prefix = "/console/api", endpoint = "save_skill")]
pub async fn save_skill(
    slug: String,
    revision: i64,
    description: String,
    instructions: String,
    tools: Checked,
    resources: Option<BTreeMap<usize, ResourceEdit>>,
) -> Result<u32, ConsoleError> {
    use skillgate_core::model::Skill;
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let slug = ssr::slug_field("slug", &slug)?;
    let authoring = &crate::api::ssr::context().authoring;
    // The form edits no frontmatter beyond the description: the current version's extra
    // fields (license, metadata, …) carry forward. Its uploaded SKILL.md text does not.
    let frontmatter_extra = authoring
        .skills()
        .await
        .map_err(ssr::authoring_error)?
        .into_iter()
        .find(|s| s.value.skill.slug == slug)
        .map(|s| s.value.skill.frontmatter_extra)
        .unwrap_or_default();
    let skill = Skill {
        slug,
        description: description.trim().to_owned(),
        instructions,
        tools: tools.unwrap_or_default().into_keys().collect(),
        resources: ssr::parse_resources(resources)?,
        frontmatter_extra,
    };
    let saved = authoring
        .update_skill(&user.name, &skill, revision)
        .await
        .map_err(ssr::authoring_error)?;
    Ok(saved.value.version)
}

#[server(prefix = "/console/api", endpoint = "restore_skill")]
pub async fn restore_skill(slug: String, revision: i64, version: u32) -> Result<i64, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let slug = ssr::slug_field("slug", &slug)?;
    crate::api::ssr::context()
        .authoring
        .restore_skill_version(&user.name, &slug, version, revision)
        .await
        .map_err(ssr::authoring_error)
}

#[server(prefix = "/console/api", endpoint = "set_sensitive")]
pub async fn set_sensitive(tool: String, args: Checked) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
    let args: Vec<String> = args.unwrap_or_default().into_keys().collect();
    crate::api::ssr::context()
        .authoring
        .set_sensitive_args(&user.name, &tool, &args)
        .await
        .map_err(ssr::authoring_error)
}

#[server(prefix = "/console/api", endpoint = "list_upstreams")]
pub async fn list_upstreams(check: Option<String>) -> Result<UpstreamsView, ConsoleError> {
    use skillgate_core::model::UpstreamKind;
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let live = ctx.authoring.live();
    let catalog = live.catalog();
    let health = match check.filter(|c| catalog.upstreams.iter().any(|u| u.name.as_str() == c)) {
        Some(name) => Some(match ctx.upstreams.health(name.clone()).await {
            Ok(ms) => format!("{name} answered a ping in {ms} ms."),
            Err(e) => format!("{name} is not healthy: {e}"),
        }),
        None => None,
    };
    let credentials = ctx
        .authoring
        .credential_summaries()
        .await
        .map_err(ssr::authoring_error)?;
    let rows = catalog
        .upstreams
        .iter()
        .map(|u| UpstreamRow {
            env_keys: credentials
                .get(u.name.as_str())
                .map(|c| c.env_keys.clone())
                .unwrap_or_default(),
            bearer: credentials.get(u.name.as_str()).is_some_and(|c| c.bearer),
            header_names: credentials
                .get(u.name.as_str())
                .map(|c| c.header_names.clone())
                .unwrap_or_default(),
            ca_bundle: matches!(
                &u.kind,
                UpstreamKind::Http {
                    ca_bundle: Some(_),
                    ..
                }
            ),
            name: u.name.as_str().to_owned(),
            kind: u.kind.label().to_owned(),
            target: match &u.kind {
                UpstreamKind::Stdio { command, args } => std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                UpstreamKind::Http { url, .. } => url.clone(),
                UpstreamKind::Builtin => "built into skillgate".to_owned(),
            },
            tools: catalog
                .tools
                .iter()
                .filter(|t| t.upstream == u.name)
                .map(|t| t.spec.name.clone())
                .collect(),
        })
        .collect();
    Ok(UpstreamsView {
        rows,
        last_sync: ctx.upstreams.last_sync(),
        health,
    })
}

pub use upstream_form::*;

/// The upstream form's server function, in its own module for one lint: it takes one
/// argument per form field, because a plain (no JavaScript) form posts them by these names.
#[allow(clippy::too_many_arguments)]
mod upstream_form {
    use leptos::prelude::*;

    use super::SyncSummary;
    use crate::api::ConsoleError;

    /// Registers (or changes) an upstream: `kind` is `stdio` (with `command` and `args`, one
    /// argument per line) or `http` (with `url` and, optionally, a PEM `ca_bundle` trusted
    /// beside the system's roots); then syncs, so its tools arrive at once. Credentials:
    /// `env` (stdio, `KEY=value` lines), `bearer` and `headers` (http, `Name: value` lines);
    /// each one left empty keeps what is stored.
    #[server(prefix = "/console/api", endpoint = "register_upstream")]
    pub async fn register_upstream(
        name: String,
        kind: String,
        command: Option<String>,
        args: Option<String>,
        url: Option<String>,
        ca_bundle: Option<String>,
        env: Option<String>,
        bearer: Option<String>,
        headers: Option<String>,
        clear_credentials: Option<String>,
    ) -> Result<Vec<SyncSummary>, ConsoleError> {
        use skillgate_core::admin::CredentialUpdate;
        use skillgate_core::model::{Upstream, UpstreamKind};
        use skillgate_core::upstream::Secret;
        use skillgate_core::users::ConsoleRole;
        let user = crate::api::ssr::require(ConsoleRole::Admin).await?;
        let kind = match kind.as_str() {
            "stdio" => UpstreamKind::Stdio {
                command: command.unwrap_or_default().trim().to_owned(),
                args: args
                    .unwrap_or_default()
                    .lines()
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect(),
            },
            "http" => UpstreamKind::Http {
                url: url.unwrap_or_default().trim().to_owned(),
                // A browser posts a textarea's lines with CRLF; the catalog keeps LF.
                ca_bundle: ca_bundle
                    .map(|pem| pem.replace("\r\n", "\n").trim().to_owned())
                    .filter(|pem| !pem.is_empty())
                    .map(|pem| pem + "\n"),
            },
            other => {
                return Err(ConsoleError::Field {
                    field: "kind".into(),
                    message: format!("`{other}` is not a transport: pick stdio or http."),
                });
            }
        };
        let upstream = Upstream {
            name: super::ssr::slug_field("name", &name)?,
            kind,
        };
        let mut parsed_env = std::collections::BTreeMap::new();
        for line in env.as_deref().unwrap_or_default().lines().map(str::trim) {
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(ConsoleError::Field {
                    field: "env".into(),
                    message: "Write one KEY=value per line.".into(),
                });
            };
            parsed_env.insert(key.trim().to_owned(), Secret::new(value));
        }
        let mut parsed_headers = std::collections::BTreeMap::new();
        for line in headers
            .as_deref()
            .unwrap_or_default()
            .lines()
            .map(str::trim)
        {
            if line.is_empty() {
                continue;
            }
            let Some((header, value)) = line.split_once(':') else {
                return Err(ConsoleError::Field {
                    field: "headers".into(),
                    message: "Write one Name: value per line.".into(),
                });
            };
            parsed_headers.insert(header.trim().to_owned(), Secret::new(value.trim()));
        }
        let credentials = CredentialUpdate {
            env: (!parsed_env.is_empty()).then_some(parsed_env),
            headers: (!parsed_headers.is_empty()).then_some(parsed_headers),
            bearer: bearer
                .filter(|b| !b.trim().is_empty())
                .map(|b| Secret::new(b.trim())),
            clear: clear_credentials.is_some(),
        };
        let ctx = crate::api::ssr::context();
        ctx.authoring
            .register_upstream(&user.name, &upstream, credentials)
            .await
            .map_err(super::ssr::authoring_error)?;
        Ok(ctx.upstreams.sync().await)
    }
}

#[server(prefix = "/console/api", endpoint = "sync_upstreams")]
pub async fn sync_upstreams() -> Result<Vec<SyncSummary>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Admin).await?;
    Ok(crate::api::ssr::context().upstreams.sync().await)
}

/// The change log of one entity: `kind` is `role`, `scope`, `skill`, `tool` or `agent_key`.
#[server(prefix = "/console/api", endpoint = "change_log")]
pub async fn change_log(kind: String, name: String) -> Result<Vec<ChangeRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    if !matches!(
        kind.as_str(),
        "role" | "scope" | "skill" | "tool" | "agent_key" | "upstream"
    ) {
        return Err(ConsoleError::Invalid(format!(
            "There is no change log for `{kind}`."
        )));
    }
    let events = crate::api::ssr::context()
        .authoring
        .history(&skillgate_core::admin::target(&kind, &name))
        .await
        .map_err(crate::api::ssr::internal)?;
    Ok(events.iter().map(ssr::change_row).collect())
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use std::collections::BTreeMap;

    use leptos::serde_json::{self, Value};
    use pulldown_cmark::{CowStr, Event, Parser, Tag};
    use skillgate_core::admin::AdminError;
    use skillgate_core::audit::AuditEvent;
    use skillgate_core::model::{Limit, Resource, Role, Scope, SkillVersion, ToolSpec};
    use skillgate_core::policy::CompiledCatalog;
    use skillgate_core::slug::Slug;

    use super::{
        ArgChoice, ChangeRow, Checked, Choice, LimitView, ResourceEdit, RoleEditor, SkillEditor,
        ToolChoice, VersionRow,
    };
    use crate::api::ConsoleError;
    use crate::api::ssr::{ConsoleContext, internal};

    const STAMP: &str = "%Y-%m-%d %H:%M:%S UTC";

    pub(crate) fn field(field: &str, message: impl Into<String>) -> ConsoleError {
        ConsoleError::Field {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub fn slug_field(name: &str, text: &str) -> Result<Slug, ConsoleError> {
        Slug::parse(text.trim()).map_err(|e| field(name, e.to_string()))
    }

    pub fn checked_slugs(name: &str, checked: Checked) -> Result<Vec<Slug>, ConsoleError> {
        checked
            .unwrap_or_default()
            .into_keys()
            .map(|s| slug_field(name, &s))
            .collect()
    }

    /// A refused change shows beside the field it names (the door says which); the rest
    /// above the form; server faults stay in the log.
    pub fn authoring_error(error: AdminError) -> ConsoleError {
        match error.field() {
            Some(name) if error.is_user_error() => field(name, error.to_string()),
            _ if error.is_user_error() => ConsoleError::Invalid(error.to_string()),
            _ => internal(error),
        }
    }

    pub async fn stored_scope(ctx: &ConsoleContext, slug: &Slug) -> Result<Scope, ConsoleError> {
        ctx.authoring
            .scopes()
            .await
            .map_err(internal)?
            .into_iter()
            .map(|s| s.value)
            .find(|s| s.slug == *slug)
            .ok_or_else(|| ConsoleError::Invalid(format!("There is no scope `{slug}`.")))
    }

    pub async fn stored_role(ctx: &ConsoleContext, slug: &str) -> Result<Role, ConsoleError> {
        let slug = slug_field("slug", slug)?;
        ctx.authoring
            .role(&slug)
            .await
            .map_err(internal)?
            .map(|r| r.value)
            .ok_or_else(|| ConsoleError::Invalid(format!("There is no role `{slug}`.")))
    }

    /// Markdown to HTML. Raw HTML in the source becomes text and links may only use safe
    /// schemes, so an instruction can never inject markup or script into the console.
    pub fn markdown_html(markdown: &str) -> String {
        fn safe(url: CowStr<'_>) -> CowStr<'_> {
            let lower = url.to_ascii_lowercase();
            let scheme = lower.split_once(':').map(|(s, _)| s);
            match scheme {
                None => url,
                Some(s) if s.contains('/') || s.contains('#') || s.contains('?') => url,
                Some("http" | "https" | "mailto") => url,
                Some(_) => CowStr::Borrowed("#"),
            }
        }
        let events = Parser::new(markdown).map(|event| match event {
            Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Link {
                link_type,
                dest_url: safe(dest_url),
                title,
                id,
            }),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Image {
                link_type,
                dest_url: safe(dest_url),
                title,
                id,
            }),
            other => other,
        });
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, events);
        html
    }

    fn arg_choices(spec: &ToolSpec) -> Vec<ArgChoice> {
        spec.input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| ArgChoice {
                        name: name.clone(),
                        kind: match p.get("type") {
                            Some(Value::String(t)) => t.clone(),
                            Some(Value::Array(ts)) => ts
                                .iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(" | "),
                            _ => String::new(),
                        },
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn skill_choices(compiled: &CompiledCatalog) -> Vec<Choice> {
        compiled
            .catalog()
            .skills
            .iter()
            .map(|s| Choice {
                name: s.skill.slug.as_str().to_owned(),
                note: s.skill.description.clone(),
            })
            .collect()
    }

    pub fn role_choices(compiled: &CompiledCatalog) -> Vec<Choice> {
        compiled
            .catalog()
            .roles
            .iter()
            .map(|r| Choice {
                name: r.slug.as_str().to_owned(),
                note: r.title.clone(),
            })
            .collect()
    }

    pub fn role_editor(
        compiled: &CompiledCatalog,
        role: Role,
        revision: i64,
        can_edit: bool,
    ) -> RoleEditor {
        let catalog = compiled.catalog();
        let tools = catalog
            .role_tools(&role)
            .into_iter()
            .filter_map(|name| catalog.tool(&name))
            .map(|t| ToolChoice {
                name: t.spec.name.clone(),
                args: arg_choices(&t.spec),
            })
            .collect();
        RoleEditor {
            slug: role.slug.as_str().to_owned(),
            revision,
            instructions_html: markdown_html(&role.instructions),
            limits: limit_views(&role.limits),
            skills: role.skills.iter().map(|s| s.as_str().to_owned()).collect(),
            all_skills: skill_choices(compiled),
            title: role.title,
            description: role.description,
            instructions: role.instructions,
            tools,
            can_edit,
        }
    }

    /// Limits as the editor lists them: the sentence an agent reads and the compact rule.
    pub fn limit_views(limits: &[Limit]) -> Vec<LimitView> {
        limits
            .iter()
            .enumerate()
            .map(|(index, l)| LimitView {
                index,
                sentence: l.sentence(),
                rule: l.to_string(),
            })
            .collect()
    }

    /// Every tool some role of the scope grants, with its arguments, in name order.
    pub fn scope_tools(compiled: &CompiledCatalog, scope: &Scope) -> Vec<ToolChoice> {
        let catalog = compiled.catalog();
        let names: std::collections::BTreeSet<String> = scope
            .roles
            .iter()
            .filter_map(|r| catalog.role(r.as_str()))
            .flat_map(|role| catalog.role_tools(role))
            .collect();
        names
            .iter()
            .filter_map(|name| catalog.tool(name))
            .map(|t| ToolChoice {
                name: t.spec.name.clone(),
                args: arg_choices(&t.spec),
            })
            .collect()
    }

    pub fn resource_edits(resources: &[Resource]) -> Vec<ResourceEdit> {
        resources
            .iter()
            .map(|r| ResourceEdit {
                name: r.name.as_str().to_owned(),
                title: r.title.clone(),
                content: r.content.clone(),
                remove: None,
            })
            .collect()
    }

    pub fn parse_resources(
        rows: Option<BTreeMap<usize, ResourceEdit>>,
    ) -> Result<Vec<Resource>, ConsoleError> {
        rows.unwrap_or_default()
            .into_values()
            .filter(|r| !r.name.trim().is_empty() && r.remove.is_none())
            .map(|r| {
                Ok(Resource {
                    name: slug_field("resources", &r.name)?,
                    title: r.title.trim().to_owned(),
                    content: r.content,
                })
            })
            .collect()
    }

    pub fn skill_editor(
        compiled: &CompiledCatalog,
        current: SkillVersion,
        revision: i64,
        versions: Vec<SkillVersion>,
        can_edit: bool,
    ) -> SkillEditor {
        let skill = current.skill;
        SkillEditor {
            slug: skill.slug.as_str().to_owned(),
            revision,
            version: current.version,
            instructions_html: markdown_html(&skill.instructions),
            all_tools: compiled
                .catalog()
                .tools
                .iter()
                .map(|t| Choice {
                    name: t.spec.name.clone(),
                    note: t.upstream.as_str().to_owned(),
                })
                .collect(),
            resources: resource_edits(&skill.resources),
            versions: versions
                .into_iter()
                .rev()
                .map(|v| VersionRow {
                    version: v.version,
                    current: v.version == current.version,
                    instructions_chars: v.skill.instructions.chars().count(),
                    description: v.skill.description,
                    tools: v.skill.tools,
                    resources: v
                        .skill
                        .resources
                        .iter()
                        .map(|r| r.name.as_str().to_owned())
                        .collect(),
                })
                .collect(),
            description: skill.description,
            instructions: skill.instructions,
            tools: skill.tools,
            can_edit,
        }
    }

    pub fn expiry(
        days: Option<&str>,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, ConsoleError> {
        let Some(days) = days.map(str::trim).filter(|d| !d.is_empty()) else {
            return Ok(None);
        };
        match days.parse::<u32>() {
            Ok(d @ 1..=36_500) => Ok(Some(chrono::Utc::now() + chrono::Duration::days(d.into()))),
            _ => Err(field(
                "expires_in_days",
                "Enter a number of days from 1 to 36500, or leave it empty for no expiry.",
            )),
        }
    }

    /// The MCP endpoint as this request reached the server, for the pasted configuration.
    pub async fn client_config(key: &str) -> String {
        let host = leptos_axum::extract::<http::HeaderMap>()
            .await
            .ok()
            .and_then(|h| {
                h.get(http::header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
        let config = serde_json::json!({
            "mcpServers": {
                "skillgate": {
                    "type": "http",
                    "url": format!("http://{host}/mcp"),
                    "headers": { "Authorization": format!("Bearer {key}") },
                }
            }
        });
        serde_json::to_string_pretty(&config).unwrap_or_default()
    }

    /// A browser form post without JavaScript asks for HTML; a server-function call does not.
    pub async fn is_plain_form_post() -> bool {
        leptos_axum::extract::<http::HeaderMap>()
            .await
            .ok()
            .and_then(|h| {
                h.get(http::header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.contains("text/html"))
            })
            .unwrap_or(false)
    }

    pub fn change_row(event: &AuditEvent) -> ChangeRow {
        let payload = &event.payload;
        let before = &payload["before"];
        let after = &payload["after"];
        let fields = |v: &Value| -> BTreeMap<String, Value> {
            let inner = v.get("value").unwrap_or(v);
            inner
                .as_object()
                .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default()
        };
        let (b, a) = (fields(before), fields(after));
        let changed = a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let pretty = |v: &Value| {
            if v.is_null() {
                String::new()
            } else {
                serde_json::to_string_pretty(v).unwrap_or_default()
            }
        };
        ChangeRow {
            seq: event.seq,
            at: event.at.format(STAMP).to_string(),
            actor: event.actor.clone().unwrap_or_default(),
            action: payload["action"].as_str().unwrap_or_default().to_owned(),
            changed,
            before: pretty(before),
            after: pretty(after),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::markdown_html;

        #[test]
        fn markdown_renders_but_raw_html_and_script_links_do_not() {
            let html = markdown_html(
                "# Refunds\n\n**Check** first.\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) [ok](https://example.org/a)",
            );
            assert!(html.contains("<h1>Refunds</h1>"), "{html}");
            assert!(html.contains("<strong>Check</strong>"), "{html}");
            assert!(!html.contains("<script>"), "{html}");
            assert!(html.contains("&lt;script&gt;"), "{html}");
            assert!(!html.contains("javascript:"), "{html}");
            assert!(html.contains("href=\"https://example.org/a\""), "{html}");
        }
    }
}
