//! The audit signing key of a deployment: the file `serve` signs checkpoints with and the
//! one-shot commands sign prunes and checkpoints with, found beside the platform database
//! unless configured; every workspace's chain is signed with it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use skillgate_core::audit::checkpoint::default_key_path;
use skillgate_core::audit::{CheckpointSigner, KeyOrigin, PublicKey, TrustedKeys};

/// The key file to use: the configured one, else the default beside the database.
fn key_path(database_url: &str, configured: Option<&Path>) -> anyhow::Result<PathBuf> {
    match configured {
        Some(path) => Ok(path.to_owned()),
        None => default_key_path(database_url).with_context(|| {
            format!(
                "{database_url} has no directory for an audit signing key: pass --audit-signing-key"
            )
        }),
    }
}

/// Whether a missing key file is created or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingKey {
    Create,
    /// For commands that must sign with the key the server uses: a fresh key would sign
    /// prunes and checkpoints that no verifier trusting the server's key accepts.
    Refuse,
}

/// The audit signing key, created (mode 0600) when its file does not exist yet and
/// `missing` allows; says on the log where it is.
pub fn load_signer(
    database_url: &str,
    configured: Option<&Path>,
    missing: MissingKey,
) -> anyhow::Result<CheckpointSigner> {
    let postgres =
        database_url.starts_with("postgres://") || database_url.starts_with("postgresql://");
    // Replicas share one chain, so they must share its signing key: a key of each
    // process's own would sign checkpoints that verifiers trusting another reject.
    anyhow::ensure!(
        configured.is_some() || !postgres,
        "a PostgreSQL database needs --audit-signing-key FILE (or SKILLGATE_AUDIT_SIGNING_KEY): \
         every replica and command must sign with the same key; the file is created on first use"
    );
    if configured.is_none() && default_key_path(database_url).is_none() {
        tracing::warn!(
            "no audit signing key file for an in-memory database: using a key that lives as long as this process"
        );
        return Ok(CheckpointSigner::generate());
    }
    let path = key_path(database_url, configured)?;
    anyhow::ensure!(
        missing == MissingKey::Create || path.exists(),
        "there is no audit signing key at {}: pass the one `skillgate serve` uses with \
         --audit-signing-key (or SKILLGATE_AUDIT_SIGNING_KEY), or start the server once to create it",
        path.display()
    );
    let (signer, origin) = CheckpointSigner::load_or_create(&path)?;
    match origin {
        KeyOrigin::Created => tracing::warn!(
            path = %path.display(),
            public_key = %signer.public_key(),
            "created an audit signing key; in production keep it off the database host (see docs/operations.md)"
        ),
        KeyOrigin::Loaded => tracing::info!(
            path = %path.display(),
            public_key = %signer.public_key(),
            "audit signing key"
        ),
    }
    Ok(signer)
}

/// The keys `audit verify` trusts: those given, else the signing key file's public half;
/// none when there is no such file (verification then says it cannot check checkpoints).
pub fn trusted_keys(
    database_url: &str,
    configured: Option<&Path>,
    public_keys: Vec<PublicKey>,
) -> anyhow::Result<TrustedKeys> {
    if !public_keys.is_empty() {
        return Ok(TrustedKeys::new(public_keys));
    }
    let path = match configured {
        Some(path) => path.to_owned(),
        None => match default_key_path(database_url) {
            Some(path) if path.exists() => path,
            _ => return Ok(TrustedKeys::default()),
        },
    };
    Ok(CheckpointSigner::from_file(&path)?.trusted())
}
