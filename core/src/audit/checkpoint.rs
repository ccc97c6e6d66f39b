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

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use futures::TryStreamExt;
use rand::RngCore as _;
use serde_json::Value;
use zeroize::Zeroizing;

use super::chain::{self, ChainVerifier, VerifyReport, canonical_json};
use super::event::NewEvent;
use crate::store::audit::{Anchor, AuditRow, Checkpoint, Pruned, TipCheckpoint};
use crate::store::{Store, StoreError, stamp};

const CHECKPOINT_CONTEXT: &str = "skillgate audit checkpoint v1";
const PRUNE_CONTEXT: &str = "skillgate audit prune v1";
/// Problems listed one by one in a report; the rest are counted.
const MAX_LISTED: usize = 20;

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

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("`{0}` is not an Ed25519 public key (64 hex digits)")]
    PublicKey(String),
    #[error("cannot read the audit signing key {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the audit signing key {path}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the audit signing key {path} is not 64 hex digits (a 32-byte Ed25519 seed)")]
    Malformed { path: PathBuf },
}

/// An Ed25519 public key, written as 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    fn verifies(&self, message: &str, signature_hex: &str) -> bool {
        let mut bytes = [0u8; 64];
        if hex::decode_to_slice(signature_hex, &mut bytes).is_err() {
            return false;
        }
        self.0
            .verify_strict(message.as_bytes(), &Signature::from_bytes(&bytes))
            .is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || KeyError::PublicKey(s.to_owned());
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(s.trim(), &mut bytes).map_err(|_| invalid())?;
        VerifyingKey::from_bytes(&bytes)
            .map(Self)
            .map_err(|_| invalid())
    }
}

/// The public keys whose signatures a verifier accepts (several while a key is rotated).
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys(Vec<PublicKey>);

impl TrustedKeys {
    pub fn new(keys: Vec<PublicKey>) -> Self {
        Self(keys)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn keys(&self) -> &[PublicKey] {
        &self.0
    }

    fn verify(&self, message: &str, signature_hex: &str) -> bool {
        self.0
            .iter()
            .any(|key| key.verifies(message, signature_hex))
    }
}

impl Checkpoint {
    pub fn tip(&self) -> Anchor {
        Anchor {
            seq: self.seq,
            hash: self.hash.clone(),
        }
    }

    pub fn message(&self) -> String {
        checkpoint_message(self.seq, &self.hash, &self.at)
    }

    /// Whether one of `keys` signed this checkpoint.
    pub fn is_signed_by(&self, keys: &TrustedKeys) -> bool {
        keys.verify(&self.message(), &self.signature)
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

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("audit event {0} does not exist")]
    NoSuchEvent(u64),
    #[error("nothing to prune: the chain already starts after seq {0}")]
    AlreadyPruned(u64),
    #[error("refusing to prune: the events to delete do not verify ({0})")]
    Broken(chain::BadEvent),
    #[error(
        "refusing to prune: event {0} is not the one its signed checkpoint names; run `skillgate audit verify`"
    )]
    CheckpointMismatch(u64),
}

/// Deletes the events from the current anchor through `through`, after checking that they
/// verify and match their signed checkpoints (a prune must not erase the evidence of a
/// tampered range), and appends the signed `audit_pruned` event and a checkpoint of it,
/// all in one transaction with the deletion.
#[tracing::instrument(skip(store, signer))]
pub async fn prune_through(
    store: &Store,
    signer: &CheckpointSigner,
    through: u64,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Pruned, PruneError> {
    let start = store
        .audit_latest_anchor()
        .await?
        .unwrap_or_else(Anchor::genesis);
    if through <= start.seq {
        return Err(PruneError::AlreadyPruned(start.seq));
    }
    let mut verifier = ChainVerifier::new(start.clone());
    {
        let mut rows = store.audit_events(start.seq, None);
        while let Some(row) = rows.try_next().await? {
            if row.seq > through {
                break;
            }
            verifier.push(&row);
        }
    }
    let walked = verifier.finish();
    if let Some(bad) = walked.first_bad {
        return Err(PruneError::Broken(bad));
    }
    if walked.verified_tip.seq != through {
        return Err(PruneError::NoSuchEvent(through));
    }
    let keys = signer.trusted();
    let mut checkpoints = store.audit_checkpoints_against_events(start.seq, Some(through));
    while let Some(c) = checkpoints.try_next().await? {
        if c.checkpoint.is_signed_by(&keys) && c.event_hash.as_deref() != Some(&c.checkpoint.hash) {
            return Err(PruneError::CheckpointMismatch(c.checkpoint.seq));
        }
    }
    drop(checkpoints);
    let at = stamp(now);
    let pruned = store
        .audit_prune_signed(
            &start,
            through,
            &walked.verified_tip.hash,
            &at,
            |range, tip| {
                let event = signer.prune_event(actor, range);
                let row = chain::link(
                    tip,
                    at.clone(),
                    event.session_id,
                    event.kind.as_str().to_owned(),
                    event.actor,
                    canonical_json(&event.payload),
                );
                let checkpoint = signer.sign_checkpoint(
                    &Anchor {
                        seq: row.seq,
                        hash: row.hash.clone(),
                    },
                    &at,
                );
                (row, checkpoint)
            },
        )
        .await?;
    tracing::info!(
        from = pruned.range.from_seq,
        through = pruned.range.through_seq,
        events = pruned.range.events,
        "pruned audit events"
    );
    Ok(pruned)
}

/// Something the checkpoints and prune events say is wrong with the stored chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointProblem {
    /// There are checkpoints (or a retention anchor) but no key to check them with.
    NoTrustedKey { checkpoints: u64 },
    /// A valid checkpoint names a seq past the stored tip: the newest events were deleted.
    Truncated {
        stored_tip: u64,
        checkpoint_seq: u64,
        signed_at: String,
    },
    /// The event at a valid checkpoint's seq is missing or has another hash: the chain
    /// was cut back to before it and re-grown, or rewritten.
    Rewritten {
        seq: u64,
        signed_hash: String,
        stored_hash: Option<String>,
    },
    /// A checkpoint whose signature no trusted key made.
    ForgedCheckpoint { seq: u64 },
    /// The retention anchor the chain starts from has no signed prune event.
    ForgedAnchor { seq: u64 },
    /// A prune event, anchor and checkpoint disagree about what was pruned.
    PrunedRangeMismatch { through_seq: u64, detail: String },
}

impl CheckpointProblem {
    /// A stable name for the kind of problem: `truncated`, `forged anchor`, …
    pub fn label(&self) -> &'static str {
        match self {
            CheckpointProblem::NoTrustedKey { .. } => "no trusted key",
            CheckpointProblem::Truncated { .. } => "truncated",
            CheckpointProblem::Rewritten { .. } => "rewritten",
            CheckpointProblem::ForgedCheckpoint { .. } => "forged checkpoint",
            CheckpointProblem::ForgedAnchor { .. } => "forged anchor",
            CheckpointProblem::PrunedRangeMismatch { .. } => "pruned range mismatch",
        }
    }
}

impl fmt::Display for CheckpointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.label())?;
        match self {
            CheckpointProblem::NoTrustedKey { checkpoints: 0 } => f.write_str(
                "the retention anchor cannot be checked without the audit public key \
                 (pass --public-key or --audit-signing-key)",
            ),
            CheckpointProblem::NoTrustedKey { checkpoints } => write!(
                f,
                "{checkpoints} signed checkpoints cannot be checked without the audit public \
                 key (pass --public-key or --audit-signing-key)"
            ),
            CheckpointProblem::Truncated {
                stored_tip,
                checkpoint_seq,
                signed_at,
            } => write!(
                f,
                "the chain ends at seq {stored_tip}, but a checkpoint signed at {signed_at} \
                 names seq {checkpoint_seq}: events {}..={checkpoint_seq} were deleted",
                stored_tip + 1
            ),
            CheckpointProblem::Rewritten {
                seq,
                signed_hash,
                stored_hash: Some(stored),
            } => write!(
                f,
                "event {seq} has hash {stored}, but its checkpoint signed {signed_hash}: \
                 the chain was cut back and re-grown, or rewritten, at or before seq {seq}"
            ),
            CheckpointProblem::Rewritten {
                seq, signed_hash, ..
            } => write!(
                f,
                "event {seq}, which a checkpoint signed with hash {signed_hash}, is missing"
            ),
            CheckpointProblem::ForgedCheckpoint { seq } => write!(
                f,
                "the checkpoint at seq {seq} is not signed by the trusted audit key"
            ),
            CheckpointProblem::ForgedAnchor { seq } => write!(
                f,
                "the retention anchor at seq {seq} is not vouched for by a signed prune \
                 event: events up to {seq} were deleted outside retention"
            ),
            CheckpointProblem::PrunedRangeMismatch {
                through_seq,
                detail,
            } => write!(f, "the prune through seq {through_seq}: {detail}"),
        }
    }
}

/// What the checkpoints say about the stored chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Checkpoints read.
    pub checkpoints: u64,
    /// The newest checkpoint a trusted key signed.
    pub newest_valid: Option<Checkpoint>,
    /// The newest stored event (or anchor, or genesis).
    pub stored_tip: Anchor,
    /// The first problems found, in the order found.
    pub problems: Vec<CheckpointProblem>,
    /// Problems found beyond those listed.
    pub more_problems: u64,
}

impl CheckpointReport {
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty() && self.more_problems == 0
    }

    /// Events after the newest valid checkpoint: not yet protected against truncation.
    pub fn uncovered_events(&self) -> u64 {
        let covered = self.newest_valid.as_ref().map_or(0, |c| c.seq);
        self.stored_tip.seq.saturating_sub(covered)
    }

    fn note(&mut self, problem: CheckpointProblem) {
        if self.problems.len() < MAX_LISTED {
            self.problems.push(problem);
        } else {
            self.more_problems += 1;
        }
    }
}

/// The hash chain walk and the checkpoint checks together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityReport {
    pub chain: VerifyReport,
    pub checkpoints: CheckpointReport,
}

impl IntegrityReport {
    pub fn is_intact(&self) -> bool {
        self.chain.is_intact() && self.checkpoints.is_intact()
    }
}

/// Walks the stored chain from its newest retention anchor, then checks it against every
/// checkpoint and the anchor against its prune event, trusting only `keys`.
#[tracing::instrument(skip_all)]
pub async fn verify_integrity(
    store: &Store,
    keys: &TrustedKeys,
) -> Result<IntegrityReport, StoreError> {
    let start = store
        .audit_latest_anchor()
        .await?
        .unwrap_or_else(Anchor::genesis);
    let mut verifier = ChainVerifier::new(start.clone());
    {
        let mut rows = store.audit_events(start.seq, None);
        let mut read = 0u32;
        while let Some(row) = rows.try_next().await? {
            verifier.push(&row);
            read = read.wrapping_add(1);
            if read.is_multiple_of(1024) {
                tokio::task::yield_now().await;
            }
        }
    }
    let chain = verifier.finish();
    let checkpoints = check_checkpoints(store, &chain.start, keys).await?;
    Ok(IntegrityReport { chain, checkpoints })
}

async fn check_checkpoints(
    store: &Store,
    anchor: &Anchor,
    keys: &TrustedKeys,
) -> Result<CheckpointReport, StoreError> {
    let mut report = CheckpointReport {
        checkpoints: 0,
        newest_valid: None,
        stored_tip: store.audit_tip().await?,
        problems: Vec::new(),
        more_problems: 0,
    };
    let total = store.audit_checkpoint_count().await?;
    if keys.is_empty() {
        if total > 0 || anchor.seq > 0 {
            report.checkpoints = total;
            report.note(CheckpointProblem::NoTrustedKey { checkpoints: total });
        }
        return Ok(report);
    }
    if anchor.seq > 0 {
        check_anchor(store, anchor, keys, &mut report).await?;
    }
    let mut truncated: Option<Checkpoint> = None;
    let mut rows = store.audit_checkpoints_against_events(0, None);
    while let Some(row) = rows.try_next().await? {
        report.checkpoints += 1;
        let c = row.checkpoint;
        if !c.is_signed_by(keys) {
            report.note(CheckpointProblem::ForgedCheckpoint { seq: c.seq });
            continue;
        }
        if c.seq > report.stored_tip.seq {
            // Only the furthest one is named: it says how much was deleted.
            truncated = Some(c.clone());
        } else if c.seq == anchor.seq && anchor.seq > 0 {
            if c.hash != anchor.hash {
                report.note(CheckpointProblem::PrunedRangeMismatch {
                    through_seq: anchor.seq,
                    detail: format!(
                        "its checkpoint signed hash {}, but the retention anchor records {}",
                        c.hash, anchor.hash
                    ),
                });
            }
        } else if c.seq > anchor.seq && row.event_hash.as_deref() != Some(&c.hash) {
            report.note(CheckpointProblem::Rewritten {
                seq: c.seq,
                signed_hash: c.hash.clone(),
                stored_hash: row.event_hash,
            });
        }
        report.newest_valid = Some(c);
    }
    if let Some(c) = truncated {
        report.note(CheckpointProblem::Truncated {
            stored_tip: report.stored_tip.seq,
            checkpoint_seq: c.seq,
            signed_at: c.at,
        });
    }
    Ok(report)
}

/// A retention anchor is vouched for by a signed `audit_pruned` event, later in the chain,
/// naming exactly its seq and hash, and the previous anchor as where the range began.
async fn check_anchor(
    store: &Store,
    anchor: &Anchor,
    keys: &TrustedKeys,
    report: &mut CheckpointReport,
) -> Result<(), StoreError> {
    let previous = store
        .audit_anchor_before(anchor.seq)
        .await?
        .map_or(0, |a| a.seq);
    let mut mismatch = None;
    let mut vouched = false;
    for row in store.audit_prune_events(anchor.seq, anchor.seq).await? {
        match prune_event_range(&row, keys) {
            Some(range) if range.anchor_hash != anchor.hash => {
                mismatch = Some(format!(
                    "its signed event {} names hash {}, but the retention anchor records {}",
                    row.seq, range.anchor_hash, anchor.hash
                ));
            }
            Some(range) if range.from_seq != previous + 1 => {
                mismatch = Some(format!(
                    "its signed event {} says it began at seq {}, but the previous anchor is at seq {previous}",
                    row.seq, range.from_seq
                ));
            }
            Some(_) => vouched = true,
            None => {}
        }
    }
    match (vouched, mismatch) {
        (_, Some(detail)) => report.note(CheckpointProblem::PrunedRangeMismatch {
            through_seq: anchor.seq,
            detail,
        }),
        (false, None) => report.note(CheckpointProblem::ForgedAnchor { seq: anchor.seq }),
        (true, None) => {}
    }
    Ok(())
}

/// The range of an `audit_pruned` event whose signature a trusted key made.
fn prune_event_range(row: &AuditRow, keys: &TrustedKeys) -> Option<PrunedRange> {
    let payload: Value = serde_json::from_str(&row.payload).ok()?;
    let range = PrunedRange::from_payload(&payload)?;
    let signature = payload.get("signature")?.as_str()?;
    keys.verify(&prune_message(&range), signature)
        .then_some(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tip(seq: u64) -> Anchor {
        Anchor {
            seq,
            hash: format!("{seq:064x}"),
        }
    }

    #[test]
    fn processes_creating_the_key_file_at_once_all_end_up_with_the_one_key_written() {
        // Threads stand in for replicas starting together on one machine: each must read
        // the key whoever wrote it, never a file that is still being written.
        for round in 0..50 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("keys/audit-signing.key");
            let barrier = std::sync::Barrier::new(8);
            let outcomes: Vec<_> = std::thread::scope(|scope| {
                let starts: Vec<_> = (0..8)
                    .map(|_| {
                        scope.spawn(|| {
                            barrier.wait();
                            CheckpointSigner::load_or_create(&path)
                        })
                    })
                    .collect();
                starts.into_iter().map(|t| t.join().unwrap()).collect()
            });
            let mut created = 0;
            for outcome in &outcomes {
                let (signer, origin) = outcome
                    .as_ref()
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
                created += usize::from(*origin == KeyOrigin::Created);
                assert_eq!(
                    signer.public_key(),
                    CheckpointSigner::from_file(&path).unwrap().public_key(),
                    "round {round}: a process signs with a key that is not the file's"
                );
            }
            assert_eq!(created, 1, "round {round}");
            let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
            assert_eq!(leftovers, 1, "round {round}: temporary files left behind");
        }
    }

    #[test]
    fn a_checkpoint_verifies_with_its_signers_public_key_and_no_other() {
        let signer = CheckpointSigner::generate();
        let checkpoint = signer.sign_checkpoint(&tip(7), "2026-01-01T00:00:00.000000Z");
        assert!(checkpoint.is_signed_by(&signer.trusted()));
        assert!(!checkpoint.is_signed_by(&CheckpointSigner::generate().trusted()));
        assert!(!checkpoint.is_signed_by(&TrustedKeys::default()));
        let moved = Checkpoint {
            seq: 6,
            ..checkpoint.clone()
        };
        assert!(!moved.is_signed_by(&signer.trusted()));
    }

    #[test]
    fn the_signed_bytes_are_the_documented_text() {
        assert_eq!(
            checkpoint_message(3, "ab", "2026-01-01T00:00:00.000000Z"),
            "skillgate audit checkpoint v1\nseq 3\nhash ab\nat 2026-01-01T00:00:00.000000Z\n"
        );
        let range = PrunedRange {
            from_seq: 1,
            through_seq: 1000,
            anchor_hash: "cd".into(),
            events: 1000,
        };
        assert_eq!(
            prune_message(&range),
            "skillgate audit prune v1\nfrom_seq 1\nthrough_seq 1000\nanchor_hash cd\n"
        );
    }

    #[test]
    fn a_public_key_round_trips_through_hex_and_garbage_is_refused() {
        let key = CheckpointSigner::generate().public_key();
        assert_eq!(key.to_string().parse::<PublicKey>().unwrap(), key);
        assert!("zz".parse::<PublicKey>().is_err());
        assert!("00".repeat(31).parse::<PublicKey>().is_err());
    }

    #[test]
    fn the_signer_debug_output_shows_only_the_public_key() {
        let signer = CheckpointSigner::generate();
        let shown = format!("{signer:?}");
        assert!(shown.contains(&signer.public_key().to_string()), "{shown}");
        assert!(
            !shown.contains(&hex::encode(signer.key.to_bytes())),
            "{shown}"
        );
    }

    #[test]
    fn a_key_file_is_created_once_owner_only_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/audit-signing.key");
        let (first, origin) = CheckpointSigner::load_or_create(&path).unwrap();
        assert_eq!(origin, KeyOrigin::Created);
        let (again, origin) = CheckpointSigner::load_or_create(&path).unwrap();
        assert_eq!(origin, KeyOrigin::Loaded);
        assert_eq!(first.public_key(), again.public_key());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not a key").unwrap();
        assert!(matches!(
            CheckpointSigner::from_file(&path),
            Err(KeyError::Malformed { .. })
        ));
    }

    #[test]
    fn the_default_key_sits_beside_the_database_file() {
        assert_eq!(
            default_key_path("sqlite://data/skillgate.db"),
            Some(PathBuf::from("data/audit-signing.key"))
        );
        assert_eq!(default_key_path("sqlite::memory:"), None);
    }
}
