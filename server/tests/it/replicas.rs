//! Two or three real `skillgate serve` processes on ONE PostgreSQL database, as replicas
//! behind a load balancer run (issue #16). Always PostgreSQL, whatever
//! `SKILLGATE_TEST_DATABASE` says: each test gets a fresh database in the throwaway server
//! that `skillgate-testpg` starts once per test process.
//!
//! What ran is proven from the demo upstream's executions log, which every replica's demo
//! upstream appends to (one file in the shared directory); what was decided, from the one
//! audit chain in the database.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::console::{
    Browser, encode, fetch_post, http, mcp_status, navigation, page, sign_in_admin,
};
use common::executions::{
    assert_every_ticket_execution_was_allowed_first, assert_one_chain, of_kind, ticket, verify,
};
use common::replies::{assert_allowed, role_names};
use common::{Client, Reply, Server, call, init, learn};
use futures::future::join_all;
use reqwest::StatusCode;
use reqwest::header::LOCATION;
use rmcp::model::{CallToolRequestParams, JsonObject};
use serde_json::{Value, json};
use skillgate_core::store::testing::postgres_url;

/// How long a polling loop waits before it gives up and reports what it saw.
const DEADLINE: Duration = Duration::from_secs(30);

/// `n` processes on one fresh PostgreSQL database: the first seeds the demo catalog (and
/// prints the key and the admin password), the others are replicas beside it.
fn cluster(n: usize, args: &[&str]) -> Vec<Server> {
    let first = Server::start_on(postgres_url(), args);
    assert!(
        first.database_url().starts_with("postgres"),
        "{}",
        first.database_url()
    );
    let mut servers = vec![first];
    for i in 1..n {
        let replica = servers[0].replica_with(&format!("replica-{i}.log"), args);
        servers.push(replica);
    }
    servers
}

/// One MCP connection of the demo support key to each server.
async fn connect_all(servers: &[Server]) -> Vec<Client> {
    let key = servers[0].support_key.clone();
    join_all(servers.iter().map(|s| s.connect(&key))).await
}

/// `call_tool` without panicking on a protocol error (a replica that died mid-request).
async fn try_call(
    client: &Client,
    session: &str,
    tool: &str,
    arguments: Value,
) -> Result<Reply, String> {
    let mut params = JsonObject::new();
    params.insert("tool".to_owned(), json!(tool));
    params.insert("arguments".to_owned(), arguments);
    params.insert("session_id".to_owned(), json!(session));
    let request = client.call_tool(CallToolRequestParams::new("call_tool").with_arguments(params));
    match tokio::time::timeout(DEADLINE, request).await {
        Ok(result) => result.map(Reply::from).map_err(|error| error.to_string()),
        Err(_) => Err(format!("no answer within {DEADLINE:?}")),
    }
}

// ---- caps ------------------------------------------------------------------------------

/// `process_refund` of 200 on the demo's order O-5011 (total 2400), named by `reason`.
fn refund(reason: &str) -> Value {
    json!({"customer_id": "C-1008", "order_id": "O-5011", "amount": 200, "reason": reason})
}

#[tokio::test]
async fn refunds_of_one_session_sent_at_once_through_three_replicas_execute_exactly_what_fits_under_its_cap()
 {
    let servers = cluster(3, &[]);
    let clients = connect_all(&servers).await;
    // Started on the first replica, learned on the second, checked on the third: the
    // session lives in the database, not in the process that started it.
    let (session, _) = init(&clients[0]).await;
    assert_allowed(&learn(&clients[1], &session, "/roles/tier-1-support").await);
    assert_allowed(
        &call(
            &clients[2],
            &session,
            "check_refund_eligibility",
            json!({"customer_id": "C-1008", "order_id": "O-5011"}),
        )
        .await,
    );

    // Eighteen refunds of 200 at once, six through each replica. The support scope's
    // guardrail and the role both cap a session at 1000: five fit, to the cent.
    const CALLS: usize = 18;
    const FIT: usize = 5;
    let reasons: Vec<String> = (0..CALLS)
        .map(|i| format!("duplicate charge #{i}"))
        .collect();
    let replies = join_all(reasons.iter().enumerate().map(|(i, reason)| {
        let client = &clients[i % 3];
        let session = session.clone();
        async move { call(client, &session, "process_refund", refund(reason)).await }
    }))
    .await;

    let mut allowed = BTreeSet::new();
    let mut allowed_per_replica = [0; 3];
    let mut violations = 0;
    for (i, reply) in replies.iter().enumerate() {
        if !reply.is_error {
            allowed.insert(reasons[i].clone());
            allowed_per_replica[i % 3] += 1;
            continue;
        }
        // A save that loses to another replica is retried (gateway/call.rs, 8 attempts);
        // only the five reservations and the first success's bookkeeping can beat it, so
        // the retry budget cannot run out here and "too busy" would be a bug.
        assert_eq!(reply.code(), "GOVERNANCE_VIOLATION", "{}", reply.text);
        assert!(
            reply.text.starts_with("GOVERNANCE VIOLATION"),
            "{}",
            reply.text
        );
        assert!(reply.text.contains("1000"), "names the cap: {}", reply.text);
        violations += 1;
    }
    eprintln!(
        "refunds through 3 replicas: {} allowed (per replica {allowed_per_replica:?}), \
         {violations} denied, cap fits {FIT}",
        allowed.len()
    );
    assert_eq!(
        (allowed.len(), violations),
        (FIT, CALLS - FIT),
        "{replies:?}"
    );

    // The upstream ran exactly the allowed ones, and never more than the cap.
    let executed = servers[0].executed("process_refund");
    assert_eq!(executed.len(), FIT, "{executed:?}");
    assert!(executed.iter().all(|e| e["ok"] == true), "{executed:?}");
    let total: f64 = executed
        .iter()
        .map(|e| e["arguments"]["amount"].as_f64().unwrap())
        .sum();
    assert_eq!(total, 1000.0, "{executed:?}");
    let executed_reasons: BTreeSet<String> = executed
        .iter()
        .map(|e| e["arguments"]["reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(executed_reasons, allowed);

    // And the one chain says the same.
    let events = servers[0].audit_events();
    let audited_allowed: BTreeSet<String> = of_kind(&events, "call_allowed", "process_refund")
        .iter()
        .map(|e| {
            e["payload"]["arguments"]["reason"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(audited_allowed, allowed);
    let denied = of_kind(&events, "call_denied", "process_refund");
    assert_eq!(denied.len(), CALLS - FIT);
    assert!(
        denied
            .iter()
            .all(|e| e["payload"]["code"] == "GOVERNANCE_VIOLATION" && e["session_id"] == session),
        "{denied:?}"
    );
    assert_eq!(verify(&servers[0]), events.len());
}

// ---- the audit chain -------------------------------------------------------------------

#[tokio::test]
async fn audit_appends_from_three_replicas_at_once_make_one_chain_that_verifies() {
    let servers = cluster(3, &[]);
    let clients = connect_all(&servers).await;
    const AGENTS: usize = 9;
    const TICKETS: usize = 5;

    // Nine agents at once, each hopping between the replicas: init on one, learn on the
    // next, tickets round the three, and one refund the role's per-call bound refuses.
    let outcomes = join_all((0..AGENTS).map(|agent| {
        let clients = &clients;
        async move {
            let (session, _) = init(&clients[agent % 3]).await;
            assert_allowed(
                &learn(&clients[(agent + 1) % 3], &session, "/roles/tier-1-support").await,
            );
            let mut subjects = Vec::new();
            for n in 0..TICKETS {
                let subject = format!("agent {agent} ticket {n}");
                let reply = call(
                    &clients[(agent + n) % 3],
                    &session,
                    "create_ticket",
                    ticket(&subject),
                )
                .await;
                assert_allowed(&reply);
                subjects.push(subject);
            }
            let over = call(
                &clients[(agent + 2) % 3],
                &session,
                "process_refund",
                json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": 1200,
                       "reason": "over the bound"}),
            )
            .await;
            assert_eq!(over.code(), "GOVERNANCE_VIOLATION", "{}", over.text);
            (session, subjects)
        }
    }))
    .await;

    let events = servers[1].audit_events();
    assert_one_chain(&events);
    let verified = verify(&servers[2]);
    assert_eq!(verified, events.len());

    let sessions: BTreeSet<&str> = outcomes.iter().map(|(s, _)| s.as_str()).collect();
    let count = |kind: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == kind)
            .filter(|e| {
                e["session_id"]
                    .as_str()
                    .is_some_and(|s| sessions.contains(s))
            })
            .count()
    };
    let calls = AGENTS * TICKETS;
    assert_eq!(count("session_started"), AGENTS);
    assert_eq!(count("learn_granted"), AGENTS);
    assert_eq!(count("call_allowed"), calls);
    assert_eq!(count("call_result"), calls);
    assert_eq!(count("call_denied"), AGENTS);

    let executions = servers[0].executed("create_ticket");
    assert!(executions.iter().all(|e| e["ok"] == true), "{executions:?}");
    let executed = assert_every_ticket_execution_was_allowed_first(&executions, &events);
    let asked: BTreeSet<String> = outcomes.into_iter().flat_map(|(_, s)| s).collect();
    assert_eq!(executed, asked);
    assert!(servers[0].executed("process_refund").is_empty());
    eprintln!(
        "audit from 3 replicas: {} events in one chain (tip seq {}), {calls} tickets executed",
        events.len(),
        verified
    );
}

#[tokio::test]
async fn a_replica_killed_under_load_leaves_no_execution_without_its_allowed_event_and_a_chain_that_verifies()
 {
    let mut servers = cluster(2, &[]);
    let key = servers[0].support_key.clone();
    const WORKERS: usize = 4;
    // The victim's workers run until the kill stops them (at most this many calls each).
    const MAX_CALLS: usize = 5_000;
    // The victim is killed once this many of its tickets ran; the survivor's workers go on
    // for this many calls each after it.
    const KILL_AFTER: usize = 40;
    const AFTER_KILL: usize = 20;

    // Each worker: its own connection and session on one replica, then tickets.
    let mut workers = Vec::new();
    for (replica, name) in [(0, "survivor"), (1, "victim")] {
        for w in 0..WORKERS {
            let client = servers[replica].connect(&key).await;
            let (session, _) = init(&client).await;
            assert_allowed(&learn(&client, &session, "/roles/tier-1-support").await);
            workers.push((name, w, client, session));
        }
    }
    let survivor = servers[0].connect(&key).await;
    let (first, second) = servers.split_at_mut(1);
    let (rest, victim) = (&first[0], &mut second[0]);
    let victim_executed = || {
        rest.executed("create_ticket")
            .iter()
            .filter(|e| {
                e["arguments"]["subject"]
                    .as_str()
                    .unwrap()
                    .starts_with("victim")
            })
            .count()
    };

    let killed = AtomicBool::new(false);
    let load = join_all(workers.iter().map(|(name, w, client, session)| {
        let killed = &killed;
        async move {
            let mut answered = Vec::new();
            let mut after_kill = 0;
            for n in 0..MAX_CALLS {
                if *name == "survivor" && killed.load(Ordering::SeqCst) {
                    if after_kill == AFTER_KILL {
                        return (answered, None);
                    }
                    after_kill += 1;
                }
                let subject = format!("{name} {w} ticket {n}");
                match try_call(client, session, "create_ticket", ticket(&subject)).await {
                    Ok(reply) => {
                        assert_allowed(&reply);
                        answered.push(subject);
                    }
                    Err(error) => return (answered, Some(error)),
                }
            }
            (answered, None)
        }
    }));
    let killer = async {
        let deadline = Instant::now() + DEADLINE;
        while victim_executed() < KILL_AFTER {
            assert!(Instant::now() < deadline, "the victim's load did not start");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let status = victim.kill_hard();
        killed.store(true, Ordering::SeqCst);
        (status, victim_executed())
    };
    let (results, (status, at_kill)) = futures::join!(load, killer);
    eprintln!("killed the victim replica ({status}) after {at_kill} of its tickets ran");

    let counts: Vec<String> = workers
        .iter()
        .zip(&results)
        .map(|((name, w, ..), (answered, _))| format!("{name} {w}: {}", answered.len()))
        .collect();
    eprintln!("answered per worker ({AFTER_KILL} of each survivor's after the kill): {counts:?}");
    let mut answered_ok = BTreeSet::new();
    for ((name, w, _, _), (answered, error)) in workers.iter().zip(&results) {
        if *name == "survivor" {
            assert_eq!(error, &None, "survivor {w}");
        } else {
            assert!(
                error.is_some(),
                "victim {w} was not stopped by the kill after {} calls",
                answered.len()
            );
        }
        answered_ok.extend(answered.iter().cloned());
    }

    // A session the dead replica served goes on through the survivor.
    for (name, w, _, session) in workers.iter().filter(|(name, ..)| *name == "victim") {
        let subject = format!("{name} {w} after the kill");
        let reply = call(&survivor, session, "create_ticket", ticket(&subject)).await;
        assert_allowed(&reply);
        answered_ok.insert(subject);
    }

    let executions = rest.executed("create_ticket");
    let events = rest.audit_events();
    assert_one_chain(&events);
    let executed = assert_every_ticket_execution_was_allowed_first(&executions, &events);
    // Every call whose agent heard "done" ran; a call cut off by the kill may have run
    // (its allowed event came first) or not.
    let missing: Vec<_> = answered_ok.difference(&executed).collect();
    assert!(missing.is_empty(), "answered but never ran: {missing:?}");
    let allowed = of_kind(&events, "call_allowed", "create_ticket").len();
    let results = of_kind(&events, "call_result", "create_ticket").len();
    assert_eq!(verify(rest), events.len());
    eprintln!(
        "kill -9 under load: {} executions, {allowed} call_allowed, {results} call_result, \
         {} answered, {} events verified",
        executions.len(),
        answered_ok.len(),
        events.len()
    );

    // A replica started again on the same database serves, and the chain goes on.
    let restarted = rest.replica_with("restarted.log", &[]);
    let client = restarted.connect(&key).await;
    let (session, _) = init(&client).await;
    assert_allowed(&learn(&client, &session, "/roles/tier-1-support").await);
    assert_allowed(
        &call(
            &client,
            &session,
            "create_ticket",
            ticket("after the restart"),
        )
        .await,
    );
    let executions = rest.executed("create_ticket");
    let events = rest.audit_events();
    assert_one_chain(&events);
    let executed = assert_every_ticket_execution_was_allowed_first(&executions, &events);
    assert!(executed.contains("after the restart"));
    assert_eq!(verify(&restarted), events.len());
}

// ---- the catalog -----------------------------------------------------------------------

/// The roles a fresh session of the demo support key is offered on `server`.
async fn offered(client: &Client) -> Vec<String> {
    role_names(&init(client).await.1)
}

/// Polls `client` until its offer has `role` (or not, as `present` says); returns how long
/// that took from `since`.
async fn until_offered(client: &Client, role: &str, present: bool, since: Instant) -> Duration {
    let deadline = since + DEADLINE;
    loop {
        let roles = offered(client).await;
        if roles.iter().any(|r| r == role) == present {
            return since.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "`{role}` offered is still not {present}: {roles:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Saves the support scope with `roles` through the console of `server`.
async fn save_support_scope(server: &Server, admin: &Browser, roles: &[&str]) {
    let (status, editor) = fetch_post(
        server,
        admin,
        "/console/api/scope_editor",
        &[("slug", "support"), ("csrf_token", &admin.token)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{editor}");
    let editor: Value = serde_json::from_str(&editor).unwrap();
    let revision = editor["revision"].as_i64().unwrap().to_string();
    let description = editor["description"].as_str().unwrap().to_owned();
    let fields: Vec<(String, String)> = roles
        .iter()
        .map(|r| (format!("roles[{r}]"), "on".to_owned()))
        .chain([
            ("slug".to_owned(), "support".to_owned()),
            ("revision".to_owned(), revision),
            ("description".to_owned(), description),
            ("csrf_token".to_owned(), admin.token.clone()),
        ])
        .collect();
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let (status, saved) = fetch_post(server, admin, "/console/api/save_scope", &fields).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
}

#[tokio::test]
async fn a_catalog_change_saved_on_one_replica_is_in_force_on_the_others_within_the_poll_bound() {
    const POLL_MS: u64 = 200;
    // The poll interval, one reload (a few queries and a recompile) and slack for a busy
    // two-core machine.
    const BOUND: Duration = Duration::from_millis(2000);
    let servers = cluster(3, &["--catalog-poll-ms", &POLL_MS.to_string()]);
    let clients = connect_all(&servers).await;
    let admin = sign_in_admin(&servers[0]).await;
    for client in &clients {
        assert!(offered(client).await.contains(&"retention-desk".to_owned()));
    }

    let mut delays = Vec::new();
    for (roles, present) in [
        (&["tier-1-support", "security-fraud"][..], false),
        (
            &["tier-1-support", "retention-desk", "security-fraud"][..],
            true,
        ),
    ] {
        let sent = Instant::now();
        save_support_scope(&servers[0], &admin, roles).await;
        let saved = Instant::now();
        // The replica that saved it serves it at once.
        assert_eq!(
            offered(&clients[0])
                .await
                .contains(&"retention-desk".to_owned()),
            present
        );
        let (b, c) = futures::join!(
            until_offered(&clients[1], "retention-desk", present, saved),
            until_offered(&clients[2], "retention-desk", present, saved),
        );
        eprintln!(
            "retention-desk {} on the other replicas {b:?} and {c:?} after the save answered \
             ({:?} after it was sent; poll every {POLL_MS} ms)",
            if present { "back" } else { "gone" },
            saved - sent,
        );
        for delay in [b, c] {
            assert!(delay < BOUND, "took {delay:?}, bound {BOUND:?}");
        }
        delays.extend([b, c]);
        if !present {
            // Not only the offer: learning it is refused there too.
            let (session, _) = init(&clients[1]).await;
            let refused = learn(&clients[1], &session, "/roles/retention-desk").await;
            assert_eq!(refused.code(), "ACCESS_DENIED", "{}", refused.text);
        }
    }
    eprintln!("catalog propagation delays: {delays:?}");
}

// ---- console sign-in and agent keys ----------------------------------------------------

#[tokio::test]
async fn a_console_sign_in_on_one_replica_is_valid_on_another_and_signing_out_there_ends_it_everywhere()
 {
    let servers = cluster(3, &[]);
    let (a, b, c) = (&servers[0], &servers[1], &servers[2]);
    let admin = sign_in_admin(a).await;

    // Without the cookie the other replica sends the browser to sign in; with it, it serves.
    let anonymous = http().get(format!("{}/", b.base)).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::SEE_OTHER);
    for server in [a, b, c] {
        let (status, html) = page(server, &admin.cookie, "/").await;
        assert_eq!(status, StatusCode::OK, "{}: {html}", server.base);
        assert!(html.contains(r#"action="/logout""#), "{html}");
    }
    // A server function on B knows the user A signed in, and their console role.
    let (status, editor) = fetch_post(
        b,
        &admin,
        "/console/api/scope_editor",
        &[("slug", "support")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{editor}");
    let editor: Value = serde_json::from_str(&editor).unwrap();
    assert_eq!(editor["can_edit"], true, "{editor}");

    // Signing out is a form post to B with the form token of A's page: the token belongs
    // to the session, which lives in the database.
    let signed_out = http()
        .post(format!("{}/logout", b.base))
        .headers(navigation(b, &admin.cookie, "/"))
        .body(encode(&[("csrf_token", &admin.token)]))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed_out.headers()[LOCATION], "/login?signed_out=1");
    for server in [a, b, c] {
        let response = http()
            .get(format!("{}/", server.base))
            .header(reqwest::header::COOKIE, &admin.cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{}", server.base);
        assert_eq!(response.headers()[LOCATION], "/login", "{}", server.base);
    }
}

#[tokio::test]
async fn a_key_revoked_on_one_replica_is_refused_by_the_others_on_the_very_next_request() {
    let servers = cluster(3, &[]);
    let (a, b, c) = (&servers[0], &servers[1], &servers[2]);
    let admin = sign_in_admin(a).await;
    let key = a.create_key("replica-agent", "support");
    let on_b = b.connect(&key).await;
    let (session, _) = init(&on_b).await;
    assert_allowed(&learn(&on_b, &session, "/roles/tier-1-support").await);
    for server in [b, c] {
        assert_eq!(mcp_status(server, &key).await, StatusCode::OK);
    }

    let (status, text) = fetch_post(
        a,
        &admin,
        "/console/api/revoke_key",
        &[("name", "replica-agent"), ("csrf_token", &admin.token)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");

    // No wait: the very next request to another replica is refused.
    assert_eq!(mcp_status(b, &key).await, StatusCode::UNAUTHORIZED);
    assert_eq!(mcp_status(c, &key).await, StatusCode::UNAUTHORIZED);
    let refused = try_call(&on_b, &session, "create_ticket", ticket("after revocation")).await;
    eprintln!("an open connection of the revoked key on another replica: {refused:?}");
    // rmcp's words for the HTTP 401 it got.
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("Auth required")),
        "an open connection is cut off too: {refused:?}"
    );
    assert!(a.executed("create_ticket").is_empty());
    // Only that key: the demo key still works there.
    assert_eq!(mcp_status(b, &a.support_key).await, StatusCode::OK);
}
