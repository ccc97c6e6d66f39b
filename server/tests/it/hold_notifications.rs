//! Approvers hear of holds: a webhook receiver on loopback gets each hold its notifier
//! selects, signed, retried after a failure, with the hold's console link in a chat-ready
//! `text`; a delivery that keeps failing is audited and changes no decision; and a
//! receiver that does not answer holds up no governed call.

use crate::common;
use crate::holds::{held, tier_one};

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{Server, call};
use serde_json::{Value, json};
use skillgate_core::inspect::hook::sign;
use tokio::sync::{Notify, Semaphore};

/// Fast rounds and retries, so a test waits milliseconds for what takes seconds by default.
const FAST: [&str; 4] = [
    "--hold-notify-poll-ms",
    "50",
    "--hold-notify-retry-ms",
    "50",
];

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).unwrap().to_str().unwrap()
    }
}

/// A webhook receiver: answers the statuses queued (200 once they run out); with a gate,
/// each request waits for a permit before it is answered.
#[derive(Default)]
struct Receiver {
    got: Mutex<Vec<Received>>,
    statuses: Mutex<VecDeque<u16>>,
    arrived: Notify,
    gate: Option<Arc<Semaphore>>,
}

impl Receiver {
    async fn serve(self) -> (Arc<Self>, String) {
        let receiver = Arc::new(self);
        let router = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (receiver, url)
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until the receiver has got `count` requests (the test's time limit bounds it).
    async fn wait_for(&self, count: usize) -> Vec<Received> {
        loop {
            let arrived = self.arrived.notified();
            let got = self.got();
            if got.len() >= count {
                return got;
            }
            arrived.await;
        }
    }
}

async fn receive(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    receiver
        .got
        .lock()
        .unwrap()
        .push(Received { headers, body });
    receiver.arrived.notify_waiters();
    if let Some(gate) = &receiver.gate {
        gate.acquire().await.unwrap().forget();
    }
    let status = receiver.statuses.lock().unwrap().pop_front().unwrap_or(200);
    StatusCode::from_u16(status).unwrap()
}

/// `skillgate notifier add-webhook NAME --url URL ARGS…`; returns the secret it printed.
fn add_webhook(server: &Server, name: &str, url: &str, args: &[&str]) -> String {
    let mut all = vec!["notifier", "add-webhook", name, "--url", url];
    all.extend_from_slice(args);
    let output = server.cli(&all);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("signing secret: "))
        .unwrap_or_else(|| panic!("no secret in {stdout}"))
        .to_owned()
}

fn cli_ok(server: &Server, args: &[&str]) -> String {
    let output = server.cli(args);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The server's `/metrics` page.
async fn metrics(server: &Server) -> String {
    reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Waits until the audit has an event of `kind` (bounded by the test's time limit).
async fn wait_for_event(server: &Server, kind: &str) -> Value {
    loop {
        if let Some(event) = server
            .audit_events()
            .into_iter()
            .find(|e| e["kind"] == kind)
        {
            return event;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_hold_is_announced_to_a_signed_webhook_and_retried_after_a_500() {
    let (receiver, url) = Receiver {
        statuses: Mutex::new(VecDeque::from([500])),
        ..Receiver::default()
    }
    .serve()
    .await;
    let server = Server::start_with(&FAST);
    let secret = add_webhook(&server, "ops-chat", &url, &["--scope", "support"]);
    assert!(
        cli_ok(&server, &["notifier", "list"]).contains("ops-chat"),
        "listed"
    );
    assert!(
        !cli_ok(&server, &["notifier", "list"]).contains(&secret),
        "the secret is never shown again"
    );

    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let got = receiver.wait_for(2).await;
    let (first, second) = (&got[0], &got[1]);

    // The same delivery twice: refused with a 500, then accepted.
    assert_eq!(
        first.header("skillgate-delivery"),
        second.header("skillgate-delivery")
    );
    for request in [first, second] {
        let timestamp = request.header("skillgate-timestamp");
        assert_eq!(
            request.header("skillgate-signature"),
            sign(secret.as_bytes(), timestamp, &request.body),
            "signed with the secret over the timestamp and the body"
        );
        assert_eq!(request.header("skillgate-event"), "hold.created");
    }
    let body = second.json();
    assert_eq!(body["type"], "hold.created");
    assert_eq!(body["hold"]["id"], hold.as_str());
    assert_eq!(body["hold"]["tool"], "process_refund");
    assert_eq!(body["hold"]["arguments"]["amount"], 300);
    assert_eq!(body["hold"]["session_id"], session.as_str());
    let link = format!("{}/holds/{hold}", server.base);
    assert_eq!(body["url"], link.as_str());
    let text = body["text"].as_str().unwrap();
    assert!(
        text.contains(&link) && text.contains("process_refund"),
        "{text}"
    );

    let log = cli_ok(&server, &["notifier", "log", "--hold", &hold]);
    let line = log.lines().find(|l| l.contains("hold.created")).unwrap();
    assert!(line.contains("delivered"), "{log}");
    assert!(line.contains(" 2 "), "two attempts: {log}");
    assert!(line.contains("200"), "{log}");
    let log = cli_ok(&server, &["notifier", "log"]);
    assert!(log.contains(&hold), "{log}");
}

#[tokio::test]
async fn only_the_holds_a_notifier_selects_are_announced_and_expiry_is_warned_of() {
    let (receiver, url) = Receiver::default().serve().await;
    let (other, other_url) = Receiver::default().serve().await;
    let server = Server::start_with(&FAST);
    // The demo's holds expire after 15 minutes: a 60-minute warning is due at once.
    add_webhook(
        &server,
        "tier-one",
        &url,
        &["--role", "tier-1-support", "--expiring-minutes", "60"],
    );
    add_webhook(&server, "billing", &other_url, &["--scope", "billing"]);

    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let got = receiver.wait_for(2).await;
    let mut events: Vec<String> = got
        .iter()
        .map(|r| r.header("skillgate-event").to_owned())
        .collect();
    events.sort();
    assert_eq!(events, ["hold.created", "hold.expiring"]);
    let expiring = got
        .iter()
        .find(|r| r.header("skillgate-event") == "hold.expiring")
        .unwrap()
        .json();
    assert!(
        expiring["text"]
            .as_str()
            .unwrap()
            .contains("unless someone decides"),
        "{expiring}"
    );
    // The round that announced the hold to `tier-one` decided `billing` too.
    assert!(other.got().is_empty());
    let log = cli_ok(&server, &["notifier", "log", "--hold", &hold]);
    assert!(!log.contains("billing"), "{log}");
}

#[tokio::test]
async fn an_announcement_that_keeps_failing_is_audited_and_changes_no_decision() {
    let (receiver, url) = Receiver {
        statuses: Mutex::new(VecDeque::from([503; 6])),
        ..Receiver::default()
    }
    .serve()
    .await;
    let server = Server::start_with(&FAST);
    add_webhook(&server, "flaky", &url, &[]);
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;

    let failed = wait_for_event(&server, "hold_notification_failed").await;
    assert_eq!(failed["session_id"], session.as_str());
    assert_eq!(failed["payload"]["hold_id"], hold.as_str());
    assert_eq!(failed["payload"]["notifier"], "flaky");
    assert_eq!(failed["payload"]["attempts"], 6);
    assert_eq!(failed["payload"]["error"], "answered HTTP 503");
    assert_eq!(receiver.got().len(), 6, "six attempts, then no more");
    let log = cli_ok(&server, &["notifier", "log", "--hold", &hold]);
    assert!(log.contains("failed") && log.contains("503"), "{log}");

    // Still pending: a person decides it as if nothing happened.
    let shown = cli_ok(&server, &["holds", "show", &hold, "--format", "json"]);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["state"], "pending");
    cli_ok(&server, &["holds", "deny", &hold, "--reason", "not today"]);
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains("skillgate_hold_notifications_total{outcome=\"failed\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_announcement_whose_hold_was_decided_before_its_retry_is_skipped_not_sent_again() {
    let gate = Arc::new(Semaphore::new(0));
    let (receiver, url) = Receiver {
        statuses: Mutex::new(VecDeque::from([500])),
        gate: Some(gate.clone()),
        ..Receiver::default()
    }
    .serve()
    .await;
    let server = Server::start_with(&FAST);
    add_webhook(&server, "ops-chat", &url, &[]);
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    // The first attempt is out; a reviewer denies the hold before it is answered (500).
    receiver.wait_for(1).await;
    cli_ok(&server, &["holds", "deny", &hold, "--reason", "not today"]);
    gate.add_permits(10);

    // Wait for the delivery to settle, whichever way.
    let line = loop {
        let log = cli_ok(&server, &["notifier", "log", "--hold", &hold]);
        let settled = ["skipped", "delivered", "failed"];
        if let Some(line) = log
            .lines()
            .find(|l| settled.iter().any(|state| l.contains(state)))
        {
            break line.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        line.contains("not sent: the hold was denied first"),
        "{line}"
    );
    assert_eq!(receiver.got().len(), 1, "the retry was not sent");
    assert!(
        !server
            .audit_events()
            .iter()
            .any(|e| e["kind"] == "hold_notification_failed"),
        "a skipped announcement is no failure"
    );
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains("skillgate_hold_notifications_total{outcome=\"skipped\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_receiver_that_does_not_answer_holds_up_no_governed_call() {
    let gate = Arc::new(Semaphore::new(0));
    let (receiver, url) = Receiver {
        gate: Some(gate.clone()),
        ..Receiver::default()
    }
    .serve()
    .await;
    let (quick, quick_url) = Receiver::default().serve().await;
    let server = Server::start_with(&FAST);
    add_webhook(&server, "stuck", &url, &[]);
    let (client, session) = tier_one(&server, &server.support_key).await;
    let first = held(&client, &session, 300).await;
    // The receiver has the announcement and does not answer it.
    receiver.wait_for(1).await;

    // Meanwhile the agent's calls are answered: another hold, and a call that runs; and
    // another notifier hears of the new hold.
    add_webhook(&server, "quick", &quick_url, &[]);
    let (other, other_session) = tier_one(&server, &server.support_key).await;
    let second = held(&other, &other_session, 250).await;
    let heard = quick.wait_for(1).await;
    assert_eq!(heard[0].json()["hold"]["id"], second.as_str());
    // ... before the stuck delivery even timed out: it is still out, unrecorded.
    let log = cli_ok(&server, &["notifier", "log", "--hold", &first]);
    let stuck = log.lines().find(|l| l.contains("stuck")).unwrap();
    assert!(stuck.contains("pending") && stuck.contains(" 0 "), "{log}");
    let looked_up = call(
        &client,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1003"}),
    )
    .await;
    assert!(!looked_up.is_error, "{}", looked_up.text);
    assert_eq!(
        gate.available_permits(),
        0,
        "answered while the receiver still held the first announcement"
    );
    gate.add_permits(10);
    receiver.wait_for(2).await;
}

/// One message an SMTP sink accepted.
#[derive(Debug, Clone)]
struct Mail {
    from: String,
    to: Vec<String>,
    data: String,
}

/// A small SMTP server on loopback that accepts every message and keeps it: what a mail
/// relay would be handed. It offers no STARTTLS.
struct SmtpSink {
    mails: Arc<Mutex<Vec<Mail>>>,
    arrived: Arc<Notify>,
    port: u16,
}

impl SmtpSink {
    async fn start() -> Self {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let (kept, told) = (mails.clone(), arrived.clone());
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (kept, told) = (kept.clone(), told.clone());
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read).lines();
                    write.write_all(b"220 sink ESMTP\r\n").await.unwrap();
                    let mut mail = Mail {
                        from: String::new(),
                        to: Vec::new(),
                        data: String::new(),
                    };
                    while let Ok(Some(line)) = lines.next_line().await {
                        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
                        let answer: &[u8] = match verb.as_str() {
                            "EHLO" => b"250-sink\r\n250 8BITMIME\r\n",
                            "HELO" | "RSET" | "NOOP" => b"250 ok\r\n",
                            "MAIL" => {
                                mail.from = line.clone();
                                b"250 ok\r\n"
                            }
                            "RCPT" => {
                                mail.to.push(line.clone());
                                b"250 ok\r\n"
                            }
                            "DATA" => {
                                write.write_all(b"354 go on\r\n").await.unwrap();
                                while let Ok(Some(data)) = lines.next_line().await {
                                    if data == "." {
                                        break;
                                    }
                                    mail.data.push_str(&data);
                                    mail.data.push('\n');
                                }
                                kept.lock().unwrap().push(mail.clone());
                                told.notify_waiters();
                                b"250 kept\r\n"
                            }
                            "QUIT" => {
                                let _ = write.write_all(b"221 bye\r\n").await;
                                return;
                            }
                            _ => b"502 not here\r\n",
                        };
                        write.write_all(answer).await.unwrap();
                    }
                });
            }
        });
        Self {
            mails,
            arrived,
            port,
        }
    }

    async fn wait_for_mail(&self) -> Mail {
        loop {
            let arrived = self.arrived.notified();
            if let Some(mail) = self.mails.lock().unwrap().first().cloned() {
                return mail;
            }
            arrived.await;
        }
    }
}

#[tokio::test]
async fn a_hold_is_emailed_to_approvers_through_an_smtp_server_with_its_link() {
    let sink = SmtpSink::start().await;
    let server = Server::start_with(&FAST);
    let port = sink.port.to_string();
    let added = cli_ok(
        &server,
        &[
            "notifier",
            "add-email",
            "approvers",
            "--to",
            "rita@example.com",
            "--to",
            "sam@example.com",
            "--from",
            "skillgate@example.com",
            "--smtp-host",
            "127.0.0.1",
            "--smtp-port",
            &port,
            "--tls",
            "none",
        ],
    );
    assert!(
        added.contains("rita@example.com,sam@example.com"),
        "{added}"
    );
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;

    let mail = sink.wait_for_mail().await;
    // The body is quoted-printable: join its soft line breaks.
    let text = mail.data.replace("=\n", "");
    assert!(mail.from.contains("<skillgate@example.com>"), "{mail:?}");
    assert_eq!(mail.to.len(), 2, "{mail:?}");
    assert!(
        text.contains("Subject: Approval needed: process_refund"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}/holds/{hold}", server.base)),
        "{text}"
    );
    assert!(text.contains("\"amount\": 300"), "{text}");
    // The delivery is recorded with the server's acceptance. (The sink runs on this
    // test's thread: the wait yields to it, so it can answer the client's QUIT.)
    let log = loop {
        let log = cli_ok(&server, &["notifier", "log", "--hold", &hold]);
        if log.contains("delivered") {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(log.contains("250"), "{log}");
}

#[tokio::test]
async fn an_email_notifier_refuses_to_send_in_clear_to_a_server_without_starttls() {
    let sink = SmtpSink::start().await;
    let server = Server::start_with(&FAST);
    let port = sink.port.to_string();
    // No --tls: STARTTLS is required, and the sink does not offer it.
    cli_ok(
        &server,
        &[
            "notifier",
            "add-email",
            "strict",
            "--to",
            "rita@example.com",
            "--from",
            "skillgate@example.com",
            "--smtp-host",
            "127.0.0.1",
            "--smtp-port",
            &port,
        ],
    );
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let failed = wait_for_event(&server, "hold_notification_failed").await;
    assert_eq!(failed["payload"]["hold_id"], hold.as_str());
    let error = failed["payload"]["error"].as_str().unwrap();
    assert!(error.starts_with("SMTP:"), "{error}");
    assert!(
        sink.mails.lock().unwrap().is_empty(),
        "nothing was sent in clear"
    );
}
