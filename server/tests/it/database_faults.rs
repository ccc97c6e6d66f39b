//! What replicas do when their PostgreSQL database goes away or cannot keep up (issue #53):
//! calls fail closed with an error that says whether to retry and whether anything ran,
//! nothing runs without its audit event, and service comes back by itself.
//!
//! Calls go over raw HTTP, so each answer is seen exactly as a client gets it: the status,
//! `Retry-After`, and the JSON-RPC error's `data`.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::console::http;
use common::executions::{
    assert_every_ticket_execution_was_allowed_first, assert_one_chain, of_kind, ticket, verify,
};
use common::replies::assert_allowed;
use common::{Server, init, learn};
use futures::future::join_all;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use serde_json::{Value, json};
use skillgate_core::store::testing::{WriteLockHolder, postgres_url};
use skillgate_testpg::TempPostgres;

/// How long a polling loop or one request waits before the test gives up and says what
/// it saw.
const DEADLINE: Duration = Duration::from_secs(60);
/// The replicas' pool wait in these tests: short, so an outage fails calls quickly.
const ACQUIRE_TIMEOUT_MS: &str = "1000";

/// What one `call_tool` of `create_ticket` came to, as the client saw it.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The tool ran and the agent got its result.
    Ran,
    /// 503 at admission with `Retry-After`, saying nothing ran.
    Unavailable,
    /// A JSON-RPC error: the database was unavailable, nothing ran, retry.
    NotExecuted,
    /// A JSON-RPC error: the tool ran, its result was withheld, do not retry blindly.
    ExecutedUnrecorded,
    /// Anything else (a bare internal error, a denial, no answer): not a clear failure.
    Unclear(String),
}

/// Posts one `tools/call` of `call_tool` for a ticket named `subject` in `session`.
async fn call_ticket(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    session: &str,
    subject: &str,
) -> Outcome {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "call_tool", "arguments": {
            "tool": "create_ticket", "arguments": ticket(subject), "session_id": session}}});
    let sent = client
        .post(server.mcp_url())
        .bearer_auth(key)
        .header(CONTENT_TYPE, "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send();
    let response = match tokio::time::timeout(DEADLINE, sent).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Outcome::Unclear(format!("no answer: {error}")),
        Err(_) => return Outcome::Unclear(format!("no answer within {DEADLINE:?}")),
    };
    let status = response.status().as_u16();
    let retry_after = response.headers().get(RETRY_AFTER).cloned();
    let text = response.text().await.unwrap_or_default();
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(&text);
    let message: Value = serde_json::from_str(json.trim()).unwrap_or(Value::Null);
    let unclear = || Outcome::Unclear(format!("{status} {text}"));
    match status {
        503 if retry_after.is_some()
            && message["error"] == "unavailable"
            && message["message"]
                .as_str()
                .is_some_and(|m| m.contains("nothing was executed")) =>
        {
            Outcome::Unavailable
        }
        200 if message["result"]["structuredContent"]["code"] == "ALLOWED" => Outcome::Ran,
        200 => {
            let data = &message["error"]["data"];
            match (data["reason"].as_str(), data["executed"].as_bool()) {
                (Some("database_unavailable"), Some(false)) if data["retryable"] == true => {
                    Outcome::NotExecuted
                }
                (Some("database_unavailable" | "result_unrecorded"), Some(true))
                    if data["retryable"] == false =>
                {
                    Outcome::ExecutedUnrecorded
                }
                _ => unclear(),
            }
        }
        _ => unclear(),
    }
}

/// Polls `condition` until it holds; panics with `what` after [`DEADLINE`].
async fn until(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition().await {
        assert!(Instant::now() < deadline, "{what} within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One governance session of the demo support key on `server`, with tier-1 support learned.
async fn session_on(server: &Server) -> String {
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    assert_allowed(&learn(&client, &session, "/roles/tier-1-support").await);
    session
}

/// Where the load is: before the stop, from the stop until the database is back, after.
const BEFORE: usize = 0;
const DOWN: usize = 1;
const BACK: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_under_load_fails_calls_closed_with_a_clear_error_and_service_resumes_by_itself()
 {
    const WORKERS: usize = 3;
    // The database stops once this many tickets ran; the load ends once every worker had
    // this many calls run after it came back.
    const STOP_AFTER: usize = 30;
    const RAN_AFTER: usize = 5;

    let mut pg = TempPostgres::start().expect("a PostgreSQL of this test's own to restart");
    let url = pg.fresh_database();
    let args = ["--database-acquire-timeout-ms", ACQUIRE_TIMEOUT_MS];
    let first = Server::start_on(url, &args);
    let second = first.replica_with("replica-1.log", &args);
    let servers = [first, second];
    let key = servers[0].support_key.clone();
    let mut workers = Vec::new();
    for (r, server) in servers.iter().enumerate() {
        for w in 0..WORKERS {
            workers.push((r, w, server, session_on(server).await));
        }
    }

    let phase = AtomicUsize::new(BEFORE);
    let done = AtomicBool::new(false);
    // Per worker: failures seen while down, runs seen after the database came back.
    let failed_down: Vec<AtomicUsize> = workers.iter().map(|_| AtomicUsize::new(0)).collect();
    let ran_back: Vec<AtomicUsize> = workers.iter().map(|_| AtomicUsize::new(0)).collect();
    let outcomes = Mutex::new(Vec::new());
    let client = http();
    let load = join_all(
        workers
            .iter()
            .enumerate()
            .map(|(i, (r, w, server, session))| {
                let (phase, done, outcomes, client, key) =
                    (&phase, &done, &outcomes, &client, &key);
                let (failed_down, ran_back) = (&failed_down[i], &ran_back[i]);
                async move {
                    let mut n = 0;
                    while !done.load(Ordering::SeqCst) {
                        let subject = format!("replica {r} worker {w} ticket {n}");
                        n += 1;
                        let sent_in = phase.load(Ordering::SeqCst);
                        let outcome = call_ticket(client, server, key, session, &subject).await;
                        let answered_in = phase.load(Ordering::SeqCst);
                        if answered_in == DOWN && sent_in == DOWN && outcome != Outcome::Ran {
                            failed_down.fetch_add(1, Ordering::SeqCst);
                        }
                        if sent_in == BACK && outcome == Outcome::Ran {
                            ran_back.fetch_add(1, Ordering::SeqCst);
                        }
                        outcomes
                            .lock()
                            .unwrap()
                            .push((subject, answered_in, outcome));
                    }
                }
            }),
    );
    let restart = async {
        until("the load started", async || {
            servers[0].executed("create_ticket").len() >= STOP_AFTER
        })
        .await;
        // Down from the moment the stop begins: its first act ends every connection.
        phase.store(DOWN, Ordering::SeqCst);
        let stopped = Instant::now();
        tokio::task::block_in_place(|| pg.stop()).expect("PostgreSQL stops");
        until(
            "every worker saw a call fail while the database was down",
            async || failed_down.iter().all(|n| n.load(Ordering::SeqCst) > 0),
        )
        .await;
        let down_for = stopped.elapsed();
        tokio::task::block_in_place(|| pg.start_again()).expect("PostgreSQL starts again");
        let started = Instant::now();
        phase.store(BACK, Ordering::SeqCst);
        until("every worker's calls ran again", async || {
            ran_back
                .iter()
                .all(|n| n.load(Ordering::SeqCst) >= RAN_AFTER)
        })
        .await;
        done.store(true, Ordering::SeqCst);
        (down_for, started.elapsed())
    };
    let (_, (down_for, back_within)) = futures::join!(load, restart);

    let outcomes = outcomes.into_inner().unwrap();
    let count =
        |wanted: fn(&Outcome) -> bool| outcomes.iter().filter(|(_, _, o)| wanted(o)).count();
    eprintln!(
        "PostgreSQL down for {down_for:?}, every worker ran {RAN_AFTER} calls within \
         {back_within:?} of its start; {} calls: {} ran, {} 503, {} not executed, {} executed \
         but unrecorded",
        outcomes.len(),
        count(|o| *o == Outcome::Ran),
        count(|o| *o == Outcome::Unavailable),
        count(|o| *o == Outcome::NotExecuted),
        count(|o| *o == Outcome::ExecutedUnrecorded),
    );
    // Every failure said clearly what it was.
    let unclear: Vec<_> = outcomes
        .iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Unclear(_)))
        .collect();
    assert!(
        unclear.is_empty(),
        "failures that say nothing useful: {unclear:#?}"
    );
    // Nothing failed before the stop.
    let early: Vec<_> = outcomes
        .iter()
        .filter(|(_, answered_in, o)| *answered_in == BEFORE && *o != Outcome::Ran)
        .collect();
    assert!(
        early.is_empty(),
        "calls failed before the database stopped: {early:#?}"
    );

    let executions = servers[0].executed("create_ticket");
    let events = servers[0].audit_events();
    assert_one_chain(&events);
    // Nothing ran without its `call_allowed` first, and nothing ran twice.
    let executed = assert_every_ticket_execution_was_allowed_first(&executions, &events);
    for (subject, _, outcome) in &outcomes {
        match outcome {
            Outcome::Ran | Outcome::ExecutedUnrecorded => assert!(
                executed.contains(subject),
                "`{subject}` was answered {outcome:?} but never ran"
            ),
            Outcome::Unavailable | Outcome::NotExecuted => assert!(
                !executed.contains(subject),
                "`{subject}` was answered {outcome:?} but ran"
            ),
            Outcome::Unclear(_) => unreachable!("checked above"),
        }
    }
    // A ticket that ran without its `call_result` is one whose agent was told so.
    let results = of_kind(&events, "call_result", "create_ticket").len();
    assert!(
        executions.len() - results <= count(|o| *o == Outcome::ExecutedUnrecorded),
        "{} executions, {results} call_result events",
        executions.len()
    );
    assert_eq!(verify(&servers[0]), events.len());
    let seen: BTreeSet<&str> = outcomes.iter().map(|(s, ..)| s.as_str()).collect();
    assert_eq!(seen.len(), outcomes.len(), "a subject was sent twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_database_pool_is_exhausted_answers_503_after_its_bounded_wait_and_serves_again_once_a_connection_frees()
 {
    // One connection, so one stuck write holds the whole pool.
    let server = Server::start_on(
        postgres_url(),
        &[
            "--database-pool-size",
            "1",
            "--database-acquire-timeout-ms",
            ACQUIRE_TIMEOUT_MS,
        ],
    );
    let key = server.support_key.clone();
    let session = session_on(&server).await;
    let client = http();

    // A transaction elsewhere holds the lock every write takes; the next call's write waits
    // for it on the pool's only connection.
    let mut holder = WriteLockHolder::take(&server.database_url()).await;
    let stuck = call_ticket(&client, &server, &key, &session, "stuck behind the lock");
    let refused = async {
        until("a write waits for the lock", async || {
            holder.waiting().await >= 1
        })
        .await;
        let asked = Instant::now();
        let outcome = call_ticket(&client, &server, &key, &session, "no connection free").await;
        let waited = asked.elapsed();
        // Still stuck: the refusal did not come from the lock giving way.
        assert!(holder.waiting().await >= 1);
        holder.release().await;
        (outcome, waited)
    };
    let (stuck, (refused, waited)) = futures::join!(stuck, refused);
    eprintln!(
        "with the pool's one connection stuck, a call was answered {refused:?} in {waited:?}"
    );
    assert_eq!(refused, Outcome::Unavailable);
    let timeout = Duration::from_millis(ACQUIRE_TIMEOUT_MS.parse().unwrap());
    assert!(
        waited >= timeout,
        "answered before the pool's wait: {waited:?}"
    );
    assert!(
        waited < timeout + Duration::from_secs(10),
        "the wait was not bounded by the pool's: {waited:?}"
    );
    // The stuck call ran once the lock was released, and the replica serves again.
    assert_eq!(stuck, Outcome::Ran);
    assert_eq!(
        call_ticket(&client, &server, &key, &session, "after the lock").await,
        Outcome::Ran
    );
    let executed: Vec<String> = server
        .executed("create_ticket")
        .iter()
        .map(|e| e["arguments"]["subject"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(executed, ["stuck behind the lock", "after the lock"]);
    let events = server.audit_events();
    assert_every_ticket_execution_was_allowed_first(&server.executed("create_ticket"), &events);
    assert_eq!(verify(&server), events.len());
}
