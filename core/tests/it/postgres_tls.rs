//! The store over TLS to PostgreSQL: `sslmode=verify-full&sslrootcert=FILE` verified
//! against a CA made here, on a throwaway PostgreSQL that accepts TCP only over TLS.
//! Always PostgreSQL, whatever `SKILLGATE_TEST_DATABASE` says.

use std::error::Error;

use skillgate_core::store::Store;
use skillgate_testpg::tls::TlsPostgres;

fn tls_postgres() -> &'static TlsPostgres {
    TlsPostgres::shared()
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
