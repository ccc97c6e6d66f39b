//! Signed checkpoints: what makes deleting the newest events, forging a retention anchor
//! and pruning a range other than the one signed detectable.
//!
//! A hash chain proves that nothing *inside* it changed, but a chain whose newest events
//! were deleted, or whose oldest were deleted behind a hand-made retention anchor, still
//! verifies. So the server signs its chain tip with an Ed25519 key (RFC 8032) every so
//! often ([`checkpoint_tip`]), and a prune appends an `audit_pruned` event that carries the
//! key's signature of the range it deleted ([`prune_through`]). [`verify_integrity`] walks
//! the chain and then checks it against every stored checkpoint with the public key the
//! verifier trusts (never the key a row names).
//!
//! # Signed bytes (for verifiers outside Skillgate)
//!
//! Keys are 32 bytes and signatures 64 bytes, stored as lowercase hex. A checkpoint signs
//! the UTF-8 text [`checkpoint_message`], a prune [`prune_message`]:
//!
//! ```text
//! skillgate audit checkpoint v1\nseq 1234\nhash <64 hex>\nat 2026-11-30T05:44:42.123456Z\n
//! skillgate audit prune v1\nfrom_seq 1\nthrough_seq 2000\nanchor_hash <64 hex>\n
//! ```
//!
//! The checkpoints sit in the same database as the events, so someone who can delete both
//! the newest events and every newer checkpoint is caught only by a checkpoint kept
//! elsewhere: each one is also logged, and `skillgate audit verify` names the newest.
//!
//! This file holds the signing key and the checkpoints it makes; `keys` the public keys a
//! verifier trusts, `prune` the signed prune, `verify` the checks.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use ed25519_dalek::{Signer as _, SigningKey};
use rand::RngCore as _;
use serde_json::Value;
use zeroize::Zeroizing;

use super::event::NewEvent;
use crate::store::audit::{Anchor, Checkpoint, TipCheckpoint};
use crate::store::{Store, StoreError, stamp};

mod keys;
mod prune;
mod verify;
pub mod walk;

pub use keys::{KeyError, PublicKey, TrustedKeys};
pub use prune::{PruneError, prune_through};
pub use verify::{CheckpointProblem, CheckpointReport, Extent, IntegrityReport, verify_integrity};

const CHECKPOINT_CONTEXT: &str = "skillgate audit checkpoint v1";
const PRUNE_CONTEXT: &str = "skillgate audit prune v1";

/// The text a checkpoint of tip `seq`/`hash` made at `at` signs.
pub fn checkpoint_message(seq: u64, hash: &str, at: &str) -> String {
    format!("{CHECKPOINT_CONTEXT}\nseq {seq}\nhash {hash}\nat {at}\n")
}

/// The text an `audit_pruned` event's signature signs.
pub fn prune_message(range: &PrunedRange) -> String {
    format!(
        "{PRUNE_CONTEXT}\nfrom_seq {}\nthrough_seq {}\nanchor_hash {}\n",
        range.from_seq, range.through_seq, range.anchor_hash
    )
}

pub use crate::store::audit::PrunedRange;

impl PrunedRange {
    /// The range an `audit_pruned` payload names, if it is well formed.
    fn from_payload(payload: &Value) -> Option<Self> {
        Some(Self {
            from_seq: payload.get("from_seq")?.as_u64()?,
            through_seq: payload.get("through_seq")?.as_u64()?,
            anchor_hash: payload.get("anchor_hash")?.as_str()?.to_owned(),
            events: payload.get("events")?.as_u64()?,
        })
    }
}

/// The audit signing key. Never `Debug`-printed, serialized or logged: only its public
/// half is shown.
pub struct CheckpointSigner {
    key: SigningKey,
}

impl fmt::Debug for CheckpointSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointSigner")
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

/// Where [`CheckpointSigner::load_or_create`] got its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrigin {
    Loaded,
    Created,
}

impl CheckpointSigner {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(seed.as_mut());
        Self {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// Reads a key file: the 32-byte seed as 64 hex digits (surrounding whitespace allowed).
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        // A key file is 64 hex digits: a path to anything big is refused before it is read.
        let text = Zeroizing::new(
            crate::limited_read::read_limited_to_string(path, 4096, "the key file limit").map_err(
                |error| KeyError::Read {
                    path: path.to_owned(),
                    source: match error {
                        crate::limited_read::LimitedReadError::Io { source, .. } => source,
                        too_big => std::io::Error::other(too_big.to_string()),
                    },
                },
            )?,
        );
        let mut seed = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.trim(), seed.as_mut()).map_err(|_| KeyError::Malformed {
            path: path.to_owned(),
        })?;
        Ok(Self {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Reads the key file at `path`, or creates it with a fresh key (mode 0600, its
    /// directory too) when there is none.
    pub fn load_or_create(path: &Path) -> Result<(Self, KeyOrigin), KeyError> {
        if path.exists() {
            return Ok((Self::from_file(path)?, KeyOrigin::Loaded));
        }
        let create = |source| KeyError::Create {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(create)?;
        }
        let signer = Self::generate();
        // The key is written in full to a temporary file beside it (created mode 0600),
        // then linked into place only if no file is there yet: replicas starting at once
        // on one machine must neither each write their own key nor read one half written.
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut file = tempfile::Builder::new()
            .prefix(".audit-signing-key-")
            .tempfile_in(dir)
            .map_err(create)?;
        let text = Zeroizing::new(format!("{}\n", hex::encode(signer.key.to_bytes())));
        file.write_all(text.as_bytes()).map_err(create)?;
        file.as_file().sync_all().map_err(create)?;
        match file.persist_noclobber(path) {
            Ok(_) => Ok((signer, KeyOrigin::Created)),
            Err(err) if err.error.kind() == std::io::ErrorKind::AlreadyExists => {
                Ok((Self::from_file(path)?, KeyOrigin::Loaded))
            }
            Err(err) => Err(create(err.error)),
        }
    }

    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.key.verifying_key())
    }

    /// Only this key's public half.
    pub fn trusted(&self) -> TrustedKeys {
        TrustedKeys::new(vec![self.public_key()])
    }

    fn sign(&self, message: &str) -> String {
        hex::encode(self.key.sign(message.as_bytes()).to_bytes())
    }

    pub fn sign_checkpoint(&self, tip: &Anchor, at: &str) -> Checkpoint {
        Checkpoint {
            seq: tip.seq,
            hash: tip.hash.clone(),
            at: at.to_owned(),
            public_key: self.public_key().to_string(),
            signature: self.sign(&checkpoint_message(tip.seq, &tip.hash, at)),
        }
    }

    /// The `audit_pruned` event of `range`, with this key's signature of it.
    pub fn prune_event(&self, actor: &str, range: &PrunedRange) -> NewEvent {
        NewEvent::audit_pruned(
            actor,
            range,
            &self.public_key().to_string(),
            &self.sign(&prune_message(range)),
        )
    }
}

/// The key file used when none is configured: `audit-signing.key` beside the SQLite file
/// of `database_url`; `None` for an in-memory database or another URL.
pub fn default_key_path(database_url: &str) -> Option<PathBuf> {
    let file = crate::store::sqlite_file(database_url).ok()??;
    let dir = file.parent().unwrap_or(Path::new(""));
    Some(dir.join("audit-signing.key"))
}

/// Signs the chain tip if it moved past the newest checkpoint.
#[tracing::instrument(skip_all)]
pub async fn checkpoint_tip(
    store: &Store,
    signer: &CheckpointSigner,
    now: DateTime<Utc>,
) -> Result<TipCheckpoint, StoreError> {
    let at = stamp(now);
    let outcome = store
        .audit_checkpoint_tip(|tip| signer.sign_checkpoint(tip, &at))
        .await?;
    match &outcome {
        TipCheckpoint::Signed(c) => tracing::info!(
            seq = c.seq,
            hash = %c.hash,
            at = %c.at,
            signature = %c.signature,
            "signed an audit checkpoint"
        ),
        TipCheckpoint::Behind { tip, newest } => tracing::error!(
            tip_seq = tip.seq,
            checkpoint_seq = newest.seq,
            "the audit chain's tip is not the one its newest checkpoint signed: events were deleted or rewritten; run `skillgate audit verify`"
        ),
        TipCheckpoint::Unchanged | TipCheckpoint::Empty => {}
    }
    Ok(outcome)
}

/// Signs the tip every `period` (the first time at once) for as long as it runs; an idle
/// chain costs one small read per period and no rows.
pub async fn checkpoint_every(
    store: Store,
    signer: std::sync::Arc<CheckpointSigner>,
    period: std::time::Duration,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(error) = checkpoint_tip(&store, &signer, Utc::now()).await {
            tracing::error!(%error, "cannot sign an audit checkpoint");
        }
    }
}

#[cfg(test)]
mod tests;
