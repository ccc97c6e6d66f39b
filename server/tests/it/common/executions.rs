//! What ran against what the audit says: the demo upstream's executions log (every
//! replica's upstream appends to one file) joined with the one audit chain, for the tests
//! that break something under load (a replica killed, the database restarted).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::Server;

/// `skillgate audit verify` passes; returns the number of events it says it walked.
pub fn verify(server: &Server) -> usize {
    let out = server.cli(&["audit", "verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "audit verify failed: {out:?}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .split("audit chain intact: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("audit verify names the events it walked: {stdout}"))
}

/// The chain as exported is one chain: seqs 1..=N, each once, and each event's `prev_hash`
/// is the hash of the event before it (a fork or a duplicate seq breaks one of these).
pub fn assert_one_chain(events: &[Value]) {
    let mut seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    seqs.sort_unstable();
    let expected: Vec<i64> = (1..=events.len() as i64).collect();
    if seqs != expected {
        let mut seen = BTreeSet::new();
        let duplicates: Vec<i64> = seqs.iter().copied().filter(|s| !seen.insert(*s)).collect();
        let gaps: Vec<i64> = expected
            .iter()
            .copied()
            .filter(|s| !seen.contains(s))
            .collect();
        panic!(
            "{} events whose seqs are not 1..={}: duplicates {duplicates:?}, missing {gaps:?}",
            events.len(),
            events.len()
        );
    }
    for event in events {
        for field in ["hash", "prev_hash"] {
            assert!(
                event[field].as_str().is_some_and(|h| h.len() == 64),
                "event {} has no {field}: {event}",
                event["seq"]
            );
        }
    }
    let mut by_seq: Vec<&Value> = events.iter().collect();
    by_seq.sort_by_key(|e| e["seq"].as_i64().unwrap());
    for pair in by_seq.windows(2) {
        assert_eq!(
            pair[1]["prev_hash"], pair[0]["hash"],
            "event {} does not follow event {}",
            pair[1]["seq"], pair[0]["seq"]
        );
    }
}

pub fn of_kind<'a>(events: &'a [Value], kind: &str, tool: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind && e["payload"]["tool"] == tool)
        .collect()
}

/// `create_ticket` arguments whose subject names the call: the executions log and the
/// audit's `call_allowed` events share nothing else, so the subject is their join key.
pub fn ticket(subject: &str) -> Value {
    json!({"customer_id": "C-1003", "subject": subject,
           "description": "Raised by the replica tests", "priority": "normal"})
}

/// Every `create_ticket` the upstream ran has its `call_allowed` event with the very same
/// arguments, and ran once; returns the executed subjects.
pub fn assert_every_ticket_execution_was_allowed_first(
    executions: &[Value],
    events: &[Value],
) -> BTreeSet<String> {
    let allowed: BTreeMap<String, &Value> = of_kind(events, "call_allowed", "create_ticket")
        .into_iter()
        .map(|e| {
            let subject = e["payload"]["arguments"]["subject"].as_str().unwrap();
            (subject.to_owned(), &e["payload"]["arguments"])
        })
        .collect();
    let mut executed = BTreeSet::new();
    for execution in executions {
        let subject = execution["arguments"]["subject"]
            .as_str()
            .unwrap()
            .to_owned();
        let Some(arguments) = allowed.get(&subject) else {
            panic!("an execution without its call_allowed event: {execution}");
        };
        assert_eq!(*arguments, &execution["arguments"], "{subject}");
        assert!(
            executed.insert(subject.clone()),
            "`{subject}` ran twice: {executions:?}"
        );
    }
    executed
}
