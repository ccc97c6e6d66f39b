//! An upstream's identity through the admin door: what a sync or a connection saw, saved
//! against the pin (pinned, quarantined, released), and an admin's admission of a new one.

use super::{AdminError, AdminService, Changed, target};
use crate::model::UpstreamIdentity;
use crate::slug::Slug;
use crate::store::catalog::{self, IdentityChange};

impl AdminService {
    /// Saves the identity `seen` when connecting to `upstream` (reached at `endpoint`, its
    /// config as JSON) against the pin ([`catalog::sync_identity_on`]): the first one is
    /// pinned; another party (another key or server name) quarantines the upstream, so
    /// `decide` refuses its tools' calls (`UPSTREAM_QUARANTINED`) from the next call on; the
    /// pinned one again releases it; the pinned party with another version is an upgrade,
    /// pinned and audited (`upstream.identity_version`), never refused. Each change of a pin is one `admin_change` event by `upstream-sync:<upstream>`
    /// on `upstream:<upstream>` naming both identities (public values only). The very
    /// first pin replaces nothing and is trusted on first use like a seed: stored with its
    /// time, shown on the Upstreams page and logged, but not an event (every server's
    /// startup sync takes it in the background, and the audit of a fresh deployment stays
    /// what its admins did). Returns the change, `None` when nothing changed.
    #[tracing::instrument(skip(self, endpoint, seen), fields(upstream = %upstream))]
    pub async fn sync_identity(
        &self,
        upstream: &Slug,
        endpoint: &str,
        seen: &UpstreamIdentity,
    ) -> Result<Option<IdentityChange>, AdminError> {
        let actor = format!("upstream-sync:{upstream}");
        let (upstream, endpoint, seen) = (upstream.clone(), endpoint.to_owned(), seen.clone());
        let change = self
            .commit(
                &actor,
                Box::new(move |tx| {
                    Box::pin(async move {
                        let change =
                            catalog::sync_identity_on(tx, &upstream, &endpoint, &seen).await?;
                        let changed = change
                            .iter()
                            .filter(|c| !c.before.is_null())
                            .map(|c| {
                                Changed::new(
                                    c.action,
                                    target("upstream", upstream.as_str()),
                                    c.before.clone(),
                                    c.after.clone(),
                                )
                            })
                            .collect();
                        Ok((change, changed))
                    })
                }),
            )
            .await?;
        match &change {
            Some(change) if change.action == "upstream.identity_quarantine" => tracing::warn!(
                after = %change.after,
                "upstream identity changed: its tools are refused until an admin admits it"
            ),
            Some(change) if change.action == "upstream.identity_pin" => {
                tracing::info!(pinned = %change.after, "upstream identity pinned")
            }
            Some(change) if change.action == "upstream.identity_version" => tracing::info!(
                before = %change.before,
                after = %change.after,
                "upstream upgraded: the new version is pinned"
            ),
            _ => {}
        }
        Ok(change)
    }

    /// Pins the identity `upstream` offers now, if it is still the one whose
    /// [`catalog::identity_digest`] is `expected` (what the admin reviewed; else a
    /// conflict), and lifts the quarantine. Audited as `upstream.identity_admit` with both
    /// identities. The upstream pool learns the new pin at the next sync.
    #[tracing::instrument(skip(self))]
    pub async fn admit_upstream_identity(
        &self,
        actor: &str,
        upstream: &str,
        expected: &str,
    ) -> Result<UpstreamIdentity, AdminError> {
        self.authorable()?;
        self.refuse_shared_upstream(upstream).await?;
        let (name, expected) = (upstream.to_owned(), expected.to_owned());
        self.save(
            actor,
            "upstream.identity_admit",
            target("upstream", upstream),
            move |tx| {
                Box::pin(async move {
                    let change = catalog::admit_identity_on(tx, &name, &expected).await?;
                    let admitted: UpstreamIdentity =
                        serde_json::from_value(change.after["pinned"].clone()).map_err(|e| {
                            crate::store::StoreError::Corrupt(format!(
                                "admitted identity of `{name}`: {e}"
                            ))
                        })?;
                    Ok((admitted, change.before, change.after))
                })
            },
        )
        .await
    }
}
