//! The public keys a verifier trusts, and what they verify: a checkpoint's signature.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use ed25519_dalek::{Signature, VerifyingKey};

use super::checkpoint_message;
use crate::store::audit::{Anchor, Checkpoint};

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
pub struct PublicKey(pub(super) VerifyingKey);

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

    pub(super) fn verify(&self, message: &str, signature_hex: &str) -> bool {
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
