//! `Store::copy_into`, the heart of `skillgate migrate`: a SQLite deployment with a row in
//! every table (and an audit chain with a retention anchor and signed checkpoints) copied
//! into an empty SQLite file and an empty PostgreSQL database.

use std::collections::BTreeSet;

use chrono::{Duration, Utc};
use serde_json::json;
use skillgate_core::audit::checkpoint::checkpoint_tip;
use skillgate_core::audit::{
    AuditLog, CheckpointSigner, EventKind, Extent, IntegrityReport, NewEvent, TipCheckpoint,
    verify_integrity,
};
use skillgate_core::compliance::Compliance;
use skillgate_core::store::copy::{COPIED_TABLES, NOT_COPIED};
use skillgate_core::store::testing::postgres_url;
use skillgate_core::store::{Backend, Store, StoreError, stamp};
use sqlx::{AnyPool, Executor as _, Row as _};

struct Source {
    _dir: tempfile::TempDir,
    store: Store,
    signer: CheckpointSigner,
}

/// Runs one statement with bound values on `pool`.
async fn exec(pool: &AnyPool, sql: &str, values: &[Option<&str>]) {
    let mut query = sqlx::query(sql);
    for value in values {
        query = query.bind(value.map(str::to_owned));
    }
    query
        .execute(pool)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
}

/// A SQLite deployment with at least one row in every copied table. Integer columns are
/// bound as text where SQLite's affinity makes them integers again; rows whose order
/// matters are written out of key order.
async fn source() -> Source {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("source.db").display());
    let store = Store::open(&url).await.unwrap();
    assert!(store.seed_demo("skillgate").await.unwrap());
    let pool = store.test_pool();
    let now = stamp(Utc::now());
    let at = Some(now.as_str());
    let skill: String = sqlx::query_scalar("SELECT slug FROM skills ORDER BY slug LIMIT 1")
        .fetch_one(pool)
        .await
        .unwrap();
    let skill = Some(skill.as_str());

    for (id, name, role, disabled) in [("1", "admin", "admin", "0"), ("7", "vera", "viewer", "1")] {
        exec(
            pool,
            "INSERT INTO console_users (id, name, role, password_hash, disabled, created_at, \
             updated_at) VALUES (CAST($1 AS INTEGER), $2, $3, 'argon2-hash', \
             CAST($4 AS INTEGER), $5, $5)",
            &[Some(id), Some(name), Some(role), Some(disabled), at],
        )
        .await;
    }
    exec(
        pool,
        "INSERT INTO console_user_scopes (user_id, scope) VALUES (7, 'support')",
        &[],
    )
    .await;
    exec(
        pool,
        "INSERT INTO console_user_identities (user_id, issuer, subject, created_at) \
         VALUES (7, 'https://login.example.com', 'vera-at-acme', $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO hold_notifiers (id, name, kind, target, secret, scopes, roles, \
         expiring_minutes, created_at, created_by) VALUES (3, 'ops-chat', 'webhook', \
         'https://hooks.example.com/x', 'whsec_s3cret', '[\"support\"]', '[]', 30, $1, 'admin')",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO hold_notifications (id, notifier_id, hold_id, event, state, attempts, \
         next_attempt_at, last_status, created_at, delivered_at) VALUES ('ntf_1', 3, \
         'hold_gone', 'hold.created', 'delivered', 2, $1, 200, $1, $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO console_api_tokens (user_id, name, token_hash, prefix, created_at, \
         created_by, expires_at, revoked_at) VALUES (7, 'runbook', 'hash-of-sgp', 'sgp_AbCdEfGh', \
         $1, 'admin', NULL, $1)",
        &[at],
    )
    .await;
    for address in ["10.0.0.1", "10.0.0.2", "10.0.0.1"] {
        exec(
            pool,
            "INSERT INTO login_failures (user_name, address, at) VALUES ('vera', $1, $2)",
            &[Some(address), at],
        )
        .await;
    }
    exec(
        pool,
        "INSERT INTO agent_keys (id, name, scope, key_hash, prefix, created_at, created_by, \
         expires_at, revoked_at, last_used_at, kind) VALUES \
         (3, 'demo', 'support', 'hash-3', 'sg_demo_1234', $1, 'admin', NULL, NULL, $1, 'key'), \
         (5, 'old', 'support', 'hash-5', 'sg_old_12345', $1, 'admin', $1, $1, NULL, 'key'), \
         (6, 'oauth vera', 'support', 'hash-6', 'sg_oauth_123', $1, NULL, NULL, NULL, NULL, 'oauth'), \
         (8, 'ivy@https://login.example.com', 'support', 'hash-8', 'external', $1, \
          'https://login.example.com', NULL, NULL, $1, 'external')",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO external_subjects (key_id, issuer, subject, created_at) \
         VALUES (8, 'https://login.example.com', 'ivy', $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO oauth_grants (key_id, user_id, user_name, client_id, client_name, \
         resource, created_at) VALUES (6, 7, 'vera', 'sgc_1', 'Desktop', \
         'http://127.0.0.1:3000/mcp', $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO agent_key_reveals (token_hash, user_id, payload, expires_at) \
         VALUES ('token-hash', 1, '{\"key\":\"sg_…\"}', $1)",
        &[at],
    )
    .await;
    for id in ["c-session", "a-session", "b-session"] {
        exec(
            pool,
            "INSERT INTO governance_sessions (id, key_id, key_name, scope, connection, \
             task_summary, created_at, expires_at, state, revision) VALUES \
             ($1, 3, 'demo', 'support', NULL, 'Refund a mug — 2.50 €', $2, $2, \
             '{\"learned\":[\"tier-1-support\"],\"usage\":{\"amount\":2.50}}', 4)",
            &[Some(id), at],
        )
        .await;
    }
    for id in ["feedback-2", "feedback-1"] {
        exec(
            pool,
            "INSERT INTO skill_feedback (id, skill, version, rating, comment, session_id, \
             key_id, key_name, at, kind, author) VALUES \
             ($1, $2, 1, 4, NULL, 'a-session', 3, 'demo', $3, 'general', NULL)",
            &[Some(id), skill, at],
        )
        .await;
    }
    exec(
        pool,
        "INSERT INTO skill_candidates (id, skill, base_version, description, instructions, \
         note, sources, evidence, verdict, verdict_explanation, proposer_kind, proposer, \
         status, created_at, frontmatter) VALUES \
         ('cand-1', $1, 1, NULL, 'Do it well', 'clearer', '[]', NULL, 'pass', 'fine', \
          'agent', 'demo', 'pending', $2, '{}')",
        &[skill, at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO wiki_patterns (id, skill, name, content, sources, created_by, created_at) \
         VALUES ('pattern-1', $1, 'ask first', 'Ask for the order id.', '[]', 'rita', $2)",
        &[skill, at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO holds (id, session_id, key_id, key_name, scope, role, tool, arguments, \
         arguments_digest, usage, rule, minutes, catalog_revision, state, created_at, \
         expires_at, decided_by, decided_at, reason, decided_revision, finished_at) VALUES \
         ('hold-1', 'a-session', 3, 'demo', 'support', 'tier-1-support', 'process_refund', \
          '{\"amount\":300}', 'digest', '{}', 'approval_over_200', 15, 'rev-1', 'approved', \
          $1, $1, 'rita', $1, 'confirmed', 'rev-1', NULL)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO call_tasks (id, hold_id, key_id, status, result, created_at, updated_at, \
         expires_at) VALUES ('task-1', 'hold-1', 3, 'completed', \
         '{\"content\":[],\"isError\":true}', $1, $1, $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO rate_limit_slots (subject, action, at_ms) VALUES \
         ('key:3', 'feedback', 1700000000002), ('key:3', 'feedback', 1700000000001)",
        &[],
    )
    .await;
    exec(
        pool,
        "INSERT INTO oauth_clients (client_id, registration, name, redirect_uris, \
         auth_method, secret_hash, metadata, created_at) VALUES \
         ('sgc_1', 'dynamic', 'Desktop', '[\"http://127.0.0.1/cb\"]', 'none', NULL, '{}', $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO oauth_requests (id, client_id, redirect_uri, state, code_challenge, \
         resource, requested_scope, created_at, expires_at) VALUES \
         ('req-1', 'sgc_1', 'http://127.0.0.1/cb', 'xyz', 'challenge', \
          'http://127.0.0.1:3000/mcp', NULL, $1, $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO oauth_codes (code_hash, key_id, client_id, redirect_uri, code_challenge, \
         expires_at, used_at) VALUES ('code-hash', 6, 'sgc_1', 'http://127.0.0.1/cb', \
         'challenge', $1, $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO oauth_tokens (token_hash, kind, key_id, created_at, expires_at, used_at, \
         revoked_at) VALUES ('access-hash', 'access', 6, $1, $1, NULL, NULL), \
         ('refresh-hash', 'refresh', 6, $1, $1, $1, NULL)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO compliance_settings (key, value) VALUES ('retention_days', '400')",
        &[],
    )
    .await;
    exec(
        pool,
        "INSERT INTO workspaces (slug, title, created_at, created_by, archived_at) \
         VALUES ('finance', 'Finance', $1, 'admin', NULL)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO upstream_shares (upstream, workspace, shared_by, shared_at) \
         VALUES ('demo', 'finance', 'admin', $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO inspection_policy (id, policy, updated_at) \
         VALUES (1, '{\"rules\":[{\"inspector\":\"injection\",\"action\":\"block\"}]}', $1)",
        &[at],
    )
    .await;
    exec(
        pool,
        "INSERT INTO upstream_identity (upstream, endpoint, pinned, offered, state, pinned_at, \
         quarantined_since) VALUES ('demo', '{\"kind\":\"stdio\"}', \
         '{\"server_name\":\"demo\",\"server_version\":\"1.2.0\"}', \
         '{\"server_name\":\"demo\",\"server_version\":\"1.2.1\"}', 'quarantined', $1, $1)",
        &[at],
    )
    .await;

    // The audit chain: 1200 events in sessions (their summaries), pruned through seq 1000
    // as retention does (an anchor and a signed `audit_pruned` event), a few more events,
    // and a signed checkpoint of the tip.
    let log = AuditLog::new(store.clone());
    let events = (0..1200)
        .map(|i| {
            NewEvent::new(
                EventKind::CallAllowed,
                json!({"tool": "process_refund", "amount": 2.50, "i": i, "note": "café ☕"}),
            )
            .in_session(format!("s-{}", i % 7))
            .by("demo")
        })
        .collect();
    log.append_batch(events).await.unwrap();
    let signer = CheckpointSigner::generate();
    let pruned = Compliance::new(store.clone())
        .prune_older_than(1, Utc::now() + Duration::days(2), &signer, "retention")
        .await
        .unwrap()
        .expect("a whole segment is old enough");
    assert_eq!(pruned.anchor.seq, 1000);
    for i in 0..3 {
        log.append(NewEvent::new(EventKind::CallResult, json!({"i": i})).in_session("s-late"))
            .await
            .unwrap();
    }
    assert!(matches!(
        checkpoint_tip(&store, &signer, Utc::now()).await.unwrap(),
        TipCheckpoint::Signed(_)
    ));

    for table in COPIED_TABLES {
        assert!(
            count(pool, table).await > 0,
            "the fixture leaves {table} empty: add a row, so its copy is tested"
        );
    }
    Source {
        _dir: dir,
        store,
        signer,
    }
}

async fn count(pool: &AnyPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// An empty SQLite file and an empty PostgreSQL database, freshly migrated.
async fn targets(dir: &tempfile::TempDir) -> Vec<Store> {
    let sqlite = format!("sqlite://{}", dir.path().join("target.db").display());
    vec![
        Store::open(&sqlite).await.unwrap(),
        Store::open(&postgres_url()).await.unwrap(),
    ]
}

/// Every row of `table`, each column as text, in a stable order.
async fn contents(store: &Store, columns: &[String], table: &str) -> Vec<Vec<Option<String>>> {
    let list = columns
        .iter()
        .map(|c| format!("CAST(\"{c}\" AS TEXT)"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = sqlx::query(&format!("SELECT {list} FROM {table}"))
        .fetch_all(store.test_pool())
        .await
        .unwrap();
    let mut rows: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|row| (0..columns.len()).map(|i| row.get(i)).collect())
        .collect();
    rows.sort();
    rows
}

async fn sqlite_columns(store: &Store, table: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
        .bind(table)
        .fetch_all(store.test_pool())
        .await
        .unwrap()
}

async fn ids_in_insertion_order(store: &Store, table: &str) -> Vec<String> {
    sqlx::query_scalar(&format!("SELECT id FROM {table} ORDER BY rowid"))
        .fetch_all(store.test_pool())
        .await
        .unwrap()
}

async fn total_rows(store: &Store) -> i64 {
    let mut total = 0;
    for table in COPIED_TABLES {
        total += count(store.test_pool(), table).await;
    }
    total
}

#[tokio::test]
async fn every_row_is_copied_as_stored_and_the_copy_verifies_with_the_same_tip() {
    let source = source().await;
    let source_check = verify(&source.store, &source.signer).await;
    assert!(source_check.is_intact(), "{source_check:?}");
    let dir = tempfile::tempdir().unwrap();
    for target in targets(&dir).await {
        let backend = target.backend();
        let report = source.store.copy_into(&target).await.unwrap();
        assert_eq!(report.tables.len(), COPIED_TABLES.len());
        for table in COPIED_TABLES {
            let columns = sqlite_columns(&source.store, table).await;
            let expected = contents(&source.store, &columns, table).await;
            assert_eq!(
                report.rows(table),
                Some(expected.len() as u64),
                "{backend:?}: {table}"
            );
            assert_eq!(
                contents(&target, &columns, table).await,
                expected,
                "{backend:?}: the rows of {table}"
            );
        }
        for table in ["governance_sessions", "skill_feedback"] {
            assert_eq!(
                ids_in_insertion_order(&target, table).await,
                ids_in_insertion_order(&source.store, table).await,
                "{backend:?}: {table} keeps its insertion order"
            );
        }

        let copy_check = verify(&target, &source.signer).await;
        assert!(copy_check.is_intact(), "{backend:?}: {copy_check:?}");
        assert_eq!(copy_check.chain, source_check.chain, "{backend:?}");
        assert_eq!(copy_check.chain.start.seq, 1000, "{backend:?}: the anchor");
        assert_eq!(
            copy_check.checkpoints, source_check.checkpoints,
            "{backend:?}"
        );
        assert!(
            target.compiled_catalog().await.is_ok(),
            "{backend:?}: the copied catalog compiles"
        );

        // Ids the application hands out next continue after the copied ones.
        let pool = target.test_pool();
        let now = stamp(Utc::now());
        let user: i64 = sqlx::query_scalar(
            "INSERT INTO console_users (name, role, password_hash, disabled, created_at, \
             updated_at) VALUES ('new', 'viewer', 'x', 0, $1, $1) RETURNING id",
        )
        .bind(&now)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(user, 8, "{backend:?}");
        let key: i64 = sqlx::query_scalar(
            "INSERT INTO agent_keys (name, scope, key_hash, prefix, created_at) \
             VALUES ('new', 'support', 'hash-new', 'sg_new', $1) RETURNING id",
        )
        .bind(&now)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(key, 9, "{backend:?}");
        let failure: i64 = sqlx::query_scalar(
            "INSERT INTO login_failures (user_name, address, at) VALUES ('x', 'y', $1) \
             RETURNING id",
        )
        .bind(&now)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(failure, 4, "{backend:?}");
    }
}

#[tokio::test]
async fn a_target_holding_any_row_is_refused_and_left_as_it_was() {
    let source = source().await;
    let dir = tempfile::tempdir().unwrap();
    for target in targets(&dir).await {
        let backend = target.backend();
        exec(
            target.test_pool(),
            "INSERT INTO compliance_settings (key, value) VALUES ('retention_days', '30')",
            &[],
        )
        .await;
        let error = source.store.copy_into(&target).await.unwrap_err();
        assert!(matches!(error, StoreError::Conflict(_)), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains("not empty") && message.contains("compliance_settings"),
            "{backend:?}: {message}"
        );
        assert_eq!(total_rows(&target).await, 1, "{backend:?}");

        // A finished copy is refused the same way: a second run changes nothing.
        sqlx::query("DELETE FROM compliance_settings")
            .execute(target.test_pool())
            .await
            .unwrap();
        source.store.copy_into(&target).await.unwrap();
        let copied = total_rows(&target).await;
        let again = source.store.copy_into(&target).await.unwrap_err();
        assert!(again.to_string().contains("not empty"), "{again}");
        assert_eq!(total_rows(&target).await, copied, "{backend:?}");
    }
}

#[tokio::test]
async fn a_copy_that_fails_part_way_leaves_the_target_empty_and_can_be_run_again() {
    let source = source().await;
    let dir = tempfile::tempdir().unwrap();
    for target in targets(&dir).await {
        let backend = target.backend();
        // The last tables are copied after everything else: refuse one of them.
        let (add, drop) = match backend {
            Backend::Sqlite => (
                "CREATE TRIGGER refuse_checkpoints BEFORE INSERT ON audit_checkpoints \
                 BEGIN SELECT RAISE(ABORT, 'disk full'); END"
                    .to_owned(),
                "DROP TRIGGER refuse_checkpoints".to_owned(),
            ),
            Backend::Postgres => (
                "CREATE FUNCTION refuse_checkpoints() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN RAISE EXCEPTION 'disk full'; END $$; \
                 CREATE TRIGGER refuse_checkpoints BEFORE INSERT ON audit_checkpoints \
                 FOR EACH ROW EXECUTE FUNCTION refuse_checkpoints();"
                    .to_owned(),
                "DROP TRIGGER refuse_checkpoints ON audit_checkpoints; \
                 DROP FUNCTION refuse_checkpoints();"
                    .to_owned(),
            ),
        };
        target.test_pool().execute(add.as_str()).await.unwrap();
        let error = source.store.copy_into(&target).await.unwrap_err();
        assert!(
            error.to_string().contains("disk full"),
            "{backend:?}: {error}"
        );
        assert_eq!(total_rows(&target).await, 0, "{backend:?}: nothing stays");

        target.test_pool().execute(drop.as_str()).await.unwrap();
        let report = source.store.copy_into(&target).await.unwrap();
        assert_eq!(
            report.total_rows() as i64,
            total_rows(&source.store).await,
            "{backend:?}"
        );
    }
}

#[tokio::test]
async fn a_source_table_the_copy_does_not_know_is_refused_before_anything_is_copied() {
    let source = source().await;
    source
        .store
        .test_pool()
        .execute("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me');")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for target in targets(&dir).await {
        let error = source.store.copy_into(&target).await.unwrap_err();
        assert!(error.to_string().contains("notes"), "{error}");
        assert_eq!(total_rows(&target).await, 0);
    }
}

#[tokio::test]
async fn the_table_lists_name_every_table_of_both_schemas() {
    let listed: BTreeSet<String> = COPIED_TABLES
        .iter()
        .chain(NOT_COPIED.iter().map(|(table, _)| table))
        .map(|table| (*table).to_owned())
        .collect();
    assert_eq!(
        listed.len(),
        COPIED_TABLES.len() + NOT_COPIED.len(),
        "no table is listed twice"
    );
    let dir = tempfile::tempdir().unwrap();
    for store in targets(&dir).await {
        // On SQLite the console's session table is created by `serve`, not the migrations.
        store.console_sessions().migrate().await.unwrap();
        let tables: BTreeSet<String> = store.table_names().await.unwrap().into_iter().collect();
        assert_eq!(
            tables,
            listed,
            "{:?}: every table is copied or named in NOT_COPIED \
             (core/src/store/copy.rs), and every name is a table",
            store.backend()
        );
    }
}

#[tokio::test]
async fn a_postgresql_copy_copies_back_into_sqlite_unchanged() {
    let source = source().await;
    let postgres = Store::open(&postgres_url()).await.unwrap();
    source.store.copy_into(&postgres).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let back = format!("sqlite://{}", dir.path().join("back.db").display());
    let back = Store::open(&back).await.unwrap();
    postgres.copy_into(&back).await.unwrap();
    for table in COPIED_TABLES {
        let columns = sqlite_columns(&source.store, table).await;
        assert_eq!(
            contents(&back, &columns, table).await,
            contents(&source.store, &columns, table).await,
            "the rows of {table}"
        );
    }
    for table in ["governance_sessions", "skill_feedback"] {
        assert_eq!(
            ids_in_insertion_order(&back, table).await,
            ids_in_insertion_order(&source.store, table).await,
            "{table} keeps its insertion order"
        );
    }
    let report = verify(&back, &source.signer).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        report.chain,
        verify(&source.store, &source.signer).await.chain
    );
}

/// The verification `skillgate migrate` runs, trusting the fixture's signing key.
async fn verify(store: &Store, signer: &CheckpointSigner) -> IntegrityReport {
    verify_integrity(store, &signer.trusted(), Extent::Whole)
        .await
        .unwrap()
}
