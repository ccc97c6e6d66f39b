//! Exports of the audit chain and their re-verification outside the database.

use serde_json::{Value, json};
use skillgate_core::audit::export::COLUMNS;
use skillgate_core::audit::{
    AuditLog, BadEvent, BadReason, EventKind, ExportFilter, ExportFormat, NewEvent,
    verify_exported_jsonl,
};
use skillgate_core::store::Store;

async fn log_with_events() -> (tempfile::TempDir, AuditLog) {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "audit.db");
    let log = AuditLog::new(Store::open(&url).await.unwrap());
    for i in 0..8 {
        let session = if i % 2 == 0 { "even" } else { "odd" };
        let event = NewEvent::new(
            EventKind::CallResult,
            json!({ "i": i, "amount": "12.50", "note": "a \"quoted\", comma\nline" }),
        )
        .in_session(session)
        .by("agent");
        log.append(event).await.unwrap();
    }
    log.append(NewEvent::admin_change(
        "alice",
        "update",
        "role:refunds",
        json!(null),
        json!({"x": 1.50}),
    ))
    .await
    .unwrap();
    (dir, log)
}

async fn export(log: &AuditLog, session: Option<&str>, format: ExportFormat) -> String {
    let filter = ExportFilter {
        session_id: session.map(str::to_owned),
    };
    let mut out = Vec::new();
    log.export(&filter, format, &mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

fn reverify(jsonl: &str) -> Option<BadEvent> {
    verify_exported_jsonl(jsonl.as_bytes()).unwrap().first_bad
}

#[tokio::test]
async fn each_jsonl_line_is_one_event_with_every_column() {
    let (_dir, log) = log_with_events().await;
    let jsonl = export(&log, None, ExportFormat::Jsonl).await;
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 9);
    for (i, line) in lines.iter().enumerate() {
        let keys: Vec<_> = line.as_object().unwrap().keys().cloned().collect();
        let mut expected: Vec<_> = COLUMNS.iter().map(|c| c.to_string()).collect();
        expected.sort();
        let mut keys = keys;
        keys.sort();
        assert_eq!(keys, expected);
        assert_eq!(line["seq"], json!(i + 1));
    }
    assert_eq!(lines[8]["actor"], "alice");
    assert_eq!(lines[8]["session_id"], Value::Null);
    assert_eq!(lines[8]["kind"], "admin_change");
}

#[tokio::test]
async fn a_csv_export_has_the_same_columns_and_payload_as_json_text() {
    let (_dir, log) = log_with_events().await;
    let csv = export(&log, Some("odd"), ExportFormat::Csv).await;
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    assert_eq!(reader.headers().unwrap(), COLUMNS.as_slice());
    let records: Vec<_> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), 4);
    assert_eq!(&records[0][0], "2");
    assert_eq!(&records[0][2], "odd");
    let payload: Value = serde_json::from_str(&records[0][5]).unwrap();
    assert_eq!(payload["note"], "a \"quoted\", comma\nline");
}

#[tokio::test]
async fn an_exported_chain_re_verifies_without_the_database() {
    let (_dir, log) = log_with_events().await;
    let jsonl = export(&log, None, ExportFormat::Jsonl).await;
    let report = verify_exported_jsonl(jsonl.as_bytes()).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 9);
    assert_eq!(report.verified_tip, log.store().audit_tip().await.unwrap());
}

#[tokio::test]
async fn a_tampered_exported_line_is_caught() {
    let (_dir, log) = log_with_events().await;
    let jsonl = export(&log, None, ExportFormat::Jsonl).await;
    let mut lines: Vec<String> = jsonl.lines().map(str::to_owned).collect();

    let mut edited = lines.clone();
    edited[5] = edited[5].replace("12.50", "1250.00");
    assert_eq!(
        reverify(&edited.join("\n")),
        Some(BadEvent {
            seq: 6,
            reason: BadReason::Changed
        })
    );

    let mut removed = lines.clone();
    removed.remove(2);
    assert_eq!(
        reverify(&removed.join("\n")),
        Some(BadEvent {
            seq: 3,
            reason: BadReason::Removed
        })
    );

    lines.swap(1, 4);
    assert_eq!(
        reverify(&lines.join("\n")),
        Some(BadEvent {
            seq: 2,
            reason: BadReason::Reordered
        })
    );

    let mut broken: Vec<String> = jsonl.lines().map(str::to_owned).collect();
    broken[0].truncate(10);
    assert!(matches!(
        reverify(&broken.join("\n")),
        Some(BadEvent {
            seq: 1,
            reason: BadReason::Malformed(_)
        })
    ));
}
