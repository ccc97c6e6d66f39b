//! An upstream's identity as its connections see it: the SHA-256 of its TLS certificate's
//! public key (recorded by a verifier that wraps the usual one) and its MCP `serverInfo`;
//! and the pinned identity every new connection must match, or it is closed (fail closed).
//! A new `serverInfo.version` of the same party is an upgrade: the connection stands, and
//! the client reports it once so it is recorded against the pin.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use sha2::{Digest as _, Sha256};

use crate::model::UpstreamIdentity;

/// `sha256/<base64>` of the SubjectPublicKeyInfo of a DER certificate (HPKP's pin form):
/// what stays the same when a certificate is renewed with the same key, and changes when
/// it is re-issued with another, by whichever CA.
pub fn spki_sha256(certificate: &[u8]) -> Result<String, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate)
        .map_err(|e| format!("the certificate cannot be parsed: {e}"))?;
    let digest = Sha256::digest(parsed.tbs_certificate.subject_pki.raw);
    Ok(format!(
        "sha256/{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    ))
}

/// One upstream's identity slot, shared by its client and the TLS verifier of each of its
/// connections: the pin to match (set by the sync from the store) and what was last seen.
#[derive(Debug, Default)]
pub struct IdentityWatch {
    pinned: RwLock<Option<UpstreamIdentity>>,
    /// The key of the last certificate that passed verification.
    seen_key: RwLock<Option<String>>,
    /// The identity of the last completed MCP handshake (or of the refused one).
    seen: RwLock<Option<UpstreamIdentity>>,
    /// A handshake met the pinned party with another version, not yet reported.
    upgraded: AtomicBool,
}

impl IdentityWatch {
    /// Sets the identity new connections must present; `None`: any (not pinned yet).
    pub fn pin(&self, identity: Option<UpstreamIdentity>) {
        *self.pinned.write().unwrap_or_else(PoisonError::into_inner) = identity;
    }

    pub fn pinned(&self) -> Option<UpstreamIdentity> {
        self.pinned
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The identity the upstream presented last: its last handshake's `serverInfo` with the
    /// key of its last verified certificate. `None` before any handshake.
    pub fn seen(&self) -> Option<UpstreamIdentity> {
        let mut seen = self
            .seen
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        if seen.spki_sha256.is_some() {
            seen.spki_sha256 = self.seen_key();
        }
        Some(seen)
    }

    /// The last seen identity, when it is another party than the pin's (another key or
    /// server name; a version alone is an upgrade, see [`Self::take_upgrade`]).
    pub fn mismatch(&self) -> Option<UpstreamIdentity> {
        let pinned = self.pinned()?;
        let seen = self.seen()?;
        (!pinned.same_party(&seen)).then_some(seen)
    }

    /// The identity of an upgrade a handshake met (the pinned party with another
    /// version), once: the caller records it and pins it. Cheap when there is none (one
    /// atomic load), as it is asked after every request.
    pub fn take_upgrade(&self) -> Option<UpstreamIdentity> {
        if !self.upgraded.load(Ordering::Relaxed) || !self.upgraded.swap(false, Ordering::AcqRel) {
            return None;
        }
        let (pinned, seen) = (self.pinned()?, self.seen()?);
        (pinned.same_party(&seen) && pinned != seen).then_some(seen)
    }

    fn seen_key(&self) -> Option<String> {
        self.seen_key
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records a completed handshake: `server_name`/`server_version` from `serverInfo`,
    /// over TLS or not. Returns the identity, and whether it is the pinned party (or there
    /// is no pin); a new version of the pinned party is noted as an upgrade.
    pub(super) fn handshake(
        &self,
        tls: bool,
        server_name: &str,
        server_version: &str,
    ) -> (UpstreamIdentity, bool) {
        let identity = UpstreamIdentity {
            spki_sha256: if tls { self.seen_key() } else { None },
            server_name: server_name.to_owned(),
            server_version: server_version.to_owned(),
        };
        *self.seen.write().unwrap_or_else(PoisonError::into_inner) = Some(identity.clone());
        let matches = match self.pinned() {
            None => true,
            Some(pinned) if pinned.same_party(&identity) => {
                if pinned.server_version != identity.server_version {
                    self.upgraded.store(true, Ordering::Release);
                }
                true
            }
            Some(_) => false,
        };
        (identity, matches)
    }

    /// Records a verified certificate's key; false when a pin names another key. A key
    /// refused before any handshake completed is reported with the pinned `serverInfo`
    /// (the handshake that would tell another never happens).
    fn certificate(&self, key: String) -> bool {
        let pinned = self.pinned();
        let allowed = pinned
            .as_ref()
            .and_then(|p| p.spki_sha256.as_deref())
            .is_none_or(|pinned| pinned == key);
        *self
            .seen_key
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(key.clone());
        let mut seen = self.seen.write().unwrap_or_else(PoisonError::into_inner);
        if seen.is_none() && !allowed {
            *seen = pinned.map(|p| UpstreamIdentity {
                spki_sha256: Some(key),
                ..p
            });
        }
        allowed
    }
}

/// The certificate key differs from the pinned one.
#[derive(Debug)]
struct KeyChanged {
    pinned: String,
    presented: String,
}

impl std::fmt::Display for KeyChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the certificate's key {} is not the pinned {}",
            self.presented, self.pinned
        )
    }
}

impl std::error::Error for KeyChanged {}

/// A verifier that runs `inner` (unchanged: the platform verifier with the upstream's own
/// roots, exactly as strict), then records the end-entity certificate's key in the watch
/// and refuses one that differs from the pinned key.
#[derive(Debug)]
pub(super) struct PinningVerifier {
    pub(super) inner: Arc<dyn ServerCertVerifier>,
    pub(super) watch: Arc<IdentityWatch>,
}

impl ServerCertVerifier for PinningVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        let key = spki_sha256(end_entity).map_err(|reason| {
            rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                Arc::new(std::io::Error::other(reason)),
            )))
        })?;
        let pinned = self.watch.pinned().and_then(|p| p.spki_sha256);
        if !self.watch.certificate(key.clone()) {
            return Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(KeyChanged {
                    pinned: pinned.unwrap_or_default(),
                    presented: key,
                })),
            )));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate() -> (rcgen::KeyPair, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (key, cert.der().to_vec())
    }

    #[test]
    fn the_key_fingerprint_is_the_sha256_of_the_subject_public_key_info() {
        let (key, der) = certificate();
        let expected = format!(
            "sha256/{}",
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(
                rcgen::PublicKeyData::subject_public_key_info(&key)
            ))
        );
        assert_eq!(spki_sha256(&der).unwrap(), expected);
        let (_, other) = certificate();
        assert_ne!(spki_sha256(&other).unwrap(), expected);
        assert!(spki_sha256(b"not a certificate").is_err());
    }

    #[test]
    fn a_pinned_watch_refuses_another_key_and_reports_the_mismatch() {
        let watch = IdentityWatch::default();
        assert!(watch.certificate("sha256/A".into()));
        let (seen, matches) = watch.handshake(true, "demo", "1.0.0");
        assert!(matches);
        assert_eq!(seen.spki_sha256.as_deref(), Some("sha256/A"));
        watch.pin(Some(seen.clone()));
        assert_eq!(watch.mismatch(), None);

        assert!(!watch.certificate("sha256/B".into()));
        let offered = watch.mismatch().expect("another key was presented");
        assert_eq!(offered.spki_sha256.as_deref(), Some("sha256/B"));

        let plain = IdentityWatch::default();
        plain.pin(Some(UpstreamIdentity {
            spki_sha256: None,
            server_name: "demo".into(),
            server_version: "1.0.0".into(),
        }));
        assert!(!plain.handshake(false, "other", "1.0.0").1);
        assert!(plain.handshake(false, "demo", "1.0.0").1);
    }

    #[test]
    fn a_new_version_of_the_pinned_party_connects_and_is_reported_once() {
        let watch = IdentityWatch::default();
        watch.pin(Some(UpstreamIdentity {
            spki_sha256: None,
            server_name: "demo".into(),
            server_version: "1.0.0".into(),
        }));
        assert!(watch.handshake(false, "demo", "1.0.0").1);
        assert_eq!(
            watch.take_upgrade(),
            None,
            "the pinned version is no upgrade"
        );

        assert!(
            watch.handshake(false, "demo", "1.1.0").1,
            "an upgrade connects"
        );
        assert_eq!(watch.mismatch(), None);
        let upgrade = watch.take_upgrade().expect("the upgrade is reported");
        assert_eq!(upgrade.server_version, "1.1.0");
        assert_eq!(watch.take_upgrade(), None, "once");
    }
}
