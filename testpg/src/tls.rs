//! A throwaway PostgreSQL that speaks only TLS over TCP, with a certificate signed by a CA
//! made for the test process, and the CA files a client verifies it with (or fails to).
//! Shared by the store's TLS tests and the binary's.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tempfile::TempDir;

use crate::{ServerTls, TempPostgres};

/// A CA made for tests: its certificate (PEM) and what signs with it.
pub struct TestCa {
    pub pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).expect("a CA certificate").pem();
        Self {
            pem,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A server certificate for 127.0.0.1 and localhost, signed by this CA.
    pub fn server_tls(&self) -> ServerTls {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let cert = rcgen::CertificateParams::new(names)
            .expect("params")
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        ServerTls {
            cert_chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The TLS PostgreSQL of this test process, with the CA file that verifies it and one of
/// another CA that does not.
pub struct TlsPostgres {
    pub server: TempPostgres,
    pub ca_file: PathBuf,
    pub other_ca_file: PathBuf,
    _files: TempDir,
}

impl TlsPostgres {
    /// Started on first use, gone with the test process.
    pub fn shared() -> &'static TlsPostgres {
        static TLS: OnceLock<TlsPostgres> = OnceLock::new();
        TLS.get_or_init(|| {
            let ca = TestCa::new("skillgate test database CA");
            let server = TempPostgres::start_with_tls(&ca.server_tls())
                .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL with TLS: {e}"));
            let files = tempfile::tempdir().expect("a temporary directory");
            let ca_file = files.path().join("db-ca.pem");
            std::fs::write(&ca_file, &ca.pem).expect("the CA file");
            let other_ca_file = files.path().join("other-ca.pem");
            std::fs::write(&other_ca_file, TestCa::new("some other CA").pem)
                .expect("the other CA file");
            TlsPostgres {
                server,
                ca_file,
                other_ca_file,
                _files: files,
            }
        })
    }

    /// A fresh database's name, and its URL verifying the server against `ca_file`.
    pub fn database(&self, ca_file: &Path) -> (String, String) {
        let url = self.server.fresh_database();
        let name = url.rsplit('/').next().unwrap_or_default().to_owned();
        let verified = format!(
            "{url}?sslmode=verify-full&sslrootcert={}",
            ca_file.display()
        );
        (name, verified)
    }

    /// The connections to `database` the server sees: (over TLS, in the clear).
    pub fn connections(&self, database: &str) -> (u32, u32) {
        let counts = self
            .server
            .psql(
                "postgres",
                &format!(
                    "SELECT COUNT(*) FILTER (WHERE s.ssl), COUNT(*) FILTER (WHERE NOT s.ssl) \
                     FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
                     WHERE a.datname = '{database}'"
                ),
            )
            .expect("pg_stat_ssl");
        let (tls, clear) = counts.split_once('|').expect("two counts");
        (
            tls.parse().expect("a count"),
            clear.parse().expect("a count"),
        )
    }

    /// How many tables `database` has.
    pub fn tables(&self, database: &str) -> u32 {
        self.server
            .psql(
                database,
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'",
            )
            .expect("pg_tables")
            .parse()
            .expect("a count")
    }
}
