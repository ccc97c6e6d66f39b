//! The store over TLS to PostgreSQL: `sslmode=verify-full&sslrootcert=FILE` verified
//! against a CA made here, on a throwaway PostgreSQL that accepts TCP only over TLS.
//! Always PostgreSQL, whatever `SKILLGATE_TEST_DATABASE` says.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use skillgate_core::store::Store;
use skillgate_testpg::{ServerTls, TempPostgres};
use tempfile::TempDir;

/// A CA made for these tests: its certificate (PEM) and what signs with it.
struct TestCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A server certificate for 127.0.0.1 and localhost, signed by this CA.
    fn server_tls(&self) -> ServerTls {
        let key = rcgen::KeyPair::generate().unwrap();
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        ServerTls {
            cert_chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The TLS PostgreSQL of this test process, with the CA file that verifies it and one of
/// another CA that does not.
struct TlsPostgres {
    server: TempPostgres,
    ca_file: PathBuf,
    other_ca_file: PathBuf,
    _files: TempDir,
}

fn tls_postgres() -> &'static TlsPostgres {
    static TLS: OnceLock<TlsPostgres> = OnceLock::new();
    TLS.get_or_init(|| {
        let ca = TestCa::new("skillgate test database CA");
        let server = TempPostgres::start_with_tls(&ca.server_tls())
            .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL with TLS: {e}"));
        let files = tempfile::tempdir().unwrap();
        let ca_file = files.path().join("db-ca.pem");
        std::fs::write(&ca_file, &ca.pem).unwrap();
        let other_ca_file = files.path().join("other-ca.pem");
        std::fs::write(&other_ca_file, TestCa::new("some other CA").pem).unwrap();
        TlsPostgres {
            server,
            ca_file,
            other_ca_file,
            _files: files,
        }
    })
}

impl TlsPostgres {
    /// A fresh database's name, and its URL verifying the server against `ca_file`.
    fn database(&self, ca_file: &Path) -> (String, String) {
        let url = self.server.fresh_database();
        let name = url.rsplit('/').next().unwrap().to_owned();
        let verified = format!(
            "{url}?sslmode=verify-full&sslrootcert={}",
            ca_file.display()
        );
        (name, verified)
    }

    /// The connections to `database` the server sees: (over TLS, in the clear).
    fn connections(&self, database: &str) -> (u32, u32) {
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
            .unwrap();
        let (tls, clear) = counts.split_once('|').unwrap();
        (tls.parse().unwrap(), clear.parse().unwrap())
    }

    fn tables(&self, database: &str) -> u32 {
        self.server
            .psql(
                database,
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'",
            )
            .unwrap()
            .parse()
            .unwrap()
    }
}

/// An error with its causes, as `skillgate` prints them.
fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn a_store_opened_with_verify_full_and_the_ca_file_talks_tls_on_every_connection() {
    let pg = tls_postgres();
    let (database, url) = pg.database(&pg.ca_file);
    let store = Store::open(&url)
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(store.ping().await);
    // The server's view of the statement pool's own connection.
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(store.test_pool())
        .await
        .unwrap();
    assert!(ssl, "the store's connection is not TLS");
    // The migrating, console-session pool too: none of the store's connections is clear.
    let (tls, clear) = pg.connections(&database);
    assert!(tls >= 2, "{tls} TLS connections, expected both pools'");
    assert_eq!(clear, 0, "connections in the clear");
    assert!(
        pg.tables(&database) > 10,
        "the database was migrated over TLS"
    );
}

#[tokio::test]
async fn a_server_certificate_of_another_ca_is_refused_naming_the_certificate_and_changes_nothing()
{
    let pg = tls_postgres();
    let (database, url) = pg.database(&pg.other_ca_file);
    let error = chain(&Store::open(&url).await.unwrap_err());
    assert!(error.contains("cannot open the database"), "{error}");
    assert!(
        error.contains("certificate") && error.contains("UnknownIssuer"),
        "the error does not say the certificate is not trusted: {error}"
    );
    assert_eq!(pg.tables(&database), 0, "nothing was created");

    // A CA file that is not there is named.
    let missing = pg.ca_file.with_file_name("no-such-ca.pem");
    let (_, url) = pg.database(&missing);
    let error = chain(&Store::open(&url).await.unwrap_err());
    assert!(error.contains("no-such-ca.pem"), "{error}");
}
