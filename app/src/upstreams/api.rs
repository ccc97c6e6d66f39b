//! Server functions of the upstreams page: list, check, register and sync.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::catalog::authoring as ssr;
use crate::shared::ConsoleError;

pub use crate::shared::SyncSummary;

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
    /// Whether the upstream may be dialled over plain `http://` on a remote host.
    pub allow_plaintext: bool,
    /// Its pinned identity, once a sync has seen it.
    pub identity: Option<IdentityView>,
}

/// An upstream's pinned identity and, while it is quarantined, the one it offers instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdentityView {
    /// `key sha256/…, serverInfo NAME VERSION`.
    pub pinned: String,
    pub pinned_at: String,
    /// What it presents now, when that differs from the pin (then it is quarantined).
    pub offered: Option<String>,
    /// The fingerprint the admit form quotes, so a further change is not admitted unseen.
    pub offered_digest: Option<String>,
    pub quarantined_since: Option<String>,
    /// The last upgrade (the same party with another version): the version it replaced
    /// and when.
    pub upgraded: Option<(String, String)>,
}

#[cfg(feature = "ssr")]
fn identity_text(identity: &skillgate_core::model::UpstreamIdentity) -> String {
    let key = identity
        .spki_sha256
        .as_deref()
        .map_or_else(|| "no TLS key".to_owned(), |k| format!("key {k}"));
    format!(
        "{key}, serverInfo {} {}",
        identity.server_name, identity.server_version
    )
}

/// The upstreams page: the upstreams, the last sync's reports, and a health answer when
/// the page was asked to check one (`?check=NAME`, a plain link).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamsView {
    /// The caller may register, sync and admit (an admin).
    pub can_edit: bool,
    pub rows: Vec<UpstreamRow>,
    pub last_sync: Vec<SyncSummary>,
    pub health: Option<String>,
}

#[server(prefix = "/console/api", endpoint = "list_upstreams")]
pub async fn list_upstreams(check: Option<String>) -> Result<UpstreamsView, ConsoleError> {
    use skillgate_core::model::UpstreamKind;
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
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
    let identities = ctx
        .authoring
        .store()
        .upstream_identities()
        .await
        .map_err(|e| ssr::authoring_error(e.into()))?;
    let rows = catalog
        .upstreams
        .iter()
        .map(|u| UpstreamRow {
            identity: identities
                .iter()
                .find(|i| i.upstream == u.name.as_str())
                .map(|i| IdentityView {
                    pinned: identity_text(&i.pinned),
                    pinned_at: i.pinned_at.clone(),
                    offered: i.offered.as_ref().map(identity_text),
                    offered_digest: i
                        .offered
                        .as_ref()
                        .map(skillgate_core::store::catalog::identity_digest),
                    quarantined_since: i.quarantined_since.clone(),
                    upgraded: i.upgraded_from.clone(),
                }),
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
            allow_plaintext: matches!(
                &u.kind,
                UpstreamKind::Http {
                    allow_plaintext: true,
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
        can_edit: user.role.allows(ConsoleRole::Admin),
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
    use crate::shared::ConsoleError;

    /// Registers (or changes) an upstream: `kind` is `stdio` (with `command` and `args`, one
    /// argument per line) or `http` (with `url` and, optionally, a PEM `ca_bundle` trusted
    /// beside the system's roots, and `allow_plaintext` to dial plain http:// on a remote
    /// host); then syncs, so its tools arrive at once. Credentials:
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
        allow_plaintext: Option<String>,
        env: Option<String>,
        bearer: Option<String>,
        headers: Option<String>,
        clear_credentials: Option<String>,
    ) -> Result<Vec<SyncSummary>, ConsoleError> {
        use skillgate_core::admin::CredentialUpdate;
        use skillgate_core::model::{Upstream, UpstreamKind};
        use skillgate_core::upstream::Secret;
        use skillgate_core::users::ConsoleRole;
        let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
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
                allow_plaintext: allow_plaintext.is_some(),
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
        let ctx = crate::shared::ssr::context();
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
    crate::shared::ssr::require(ConsoleRole::Admin).await?;
    Ok(crate::shared::ssr::context().upstreams.sync().await)
}

/// Admits the identity `upstream` presents now, if it is still the one whose fingerprint is
/// `offered` (what the page showed), then syncs, so the gateway's connections expect it.
#[server(prefix = "/console/api", endpoint = "admit_upstream_identity")]
pub async fn admit_upstream_identity(
    upstream: String,
    offered: String,
) -> Result<Vec<SyncSummary>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    if offered.len() != 64 || !offered.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ConsoleError::Invalid(
            "The form names no offered identity (a SHA-256 in hex): reload the upstreams page and review it again.".into(),
        ));
    }
    let ctx = crate::shared::ssr::context();
    ctx.authoring
        .admit_upstream_identity(&user.name, &upstream, &offered.to_ascii_lowercase())
        .await
        .map_err(ssr::authoring_error)?;
    Ok(ctx.upstreams.sync().await)
}
