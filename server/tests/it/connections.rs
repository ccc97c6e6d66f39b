//! Client connections of the real binary on a real socket: slow and idle clients are
//! disconnected after their timeouts while `/healthz` keeps answering, a connection past
//! `--max-connections` is shed without taking the service down, and a request in progress is
//! never cut by those timeouts.

use crate::common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use common::Server;

const SLOW_CLIENTS: usize = 2_000;
const IDLE_CLIENTS: usize = 200;
const HEALTH_PROBES: usize = 200;

/// The test opens thousands of sockets; the hard limit allows it, the soft one may not.
fn raise_file_limit() {
    let soft = rlimit::increase_nofile_limit(u64::MAX).expect("the file limit can be raised");
    assert!(
        soft >= (SLOW_CLIENTS + IDLE_CLIENTS + 500) as u64,
        "the test needs more open files than the hard limit allows ({soft})"
    );
}

async fn connect(port: u16) -> TcpStream {
    TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the server accepts TCP connections")
}

/// One `GET /healthz` on a fresh connection, as a monitoring probe sends it; its latency.
async fn healthz(port: u16) -> Duration {
    let started = Instant::now();
    let answer = timeout(Duration::from_secs(5), async {
        let mut stream = connect(port).await;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            .await
            .expect("the probe is sent");
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .expect("the answer is read");
        answer
    })
    .await
    .expect("/healthz answered within 5 s");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "/healthz answered {}",
        String::from_utf8_lossy(&answer)
    );
    started.elapsed()
}

/// Waits until the server closes `stream` (EOF or reset); false if it is still open at
/// `deadline`.
async fn closed_by(stream: &mut TcpStream, deadline: Instant) -> bool {
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_keeps_answering_with_2000_slow_clients_and_they_are_cut_after_the_header_read_timeout()
 {
    raise_file_limit();
    const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(8);
    const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
    let server = Server::start_with(&[
        "--header-read-timeout-ms",
        &HEADER_READ_TIMEOUT.as_millis().to_string(),
        "--idle-timeout-ms",
        &IDLE_TIMEOUT.as_millis().to_string(),
        // Every client here is one address: what is tested is the timeouts, not the share.
        "--max-connections-per-address",
        "10000",
    ]);
    let port = server.port;
    let before = healthz(port).await;

    // Slow clients: a partial header, then one more byte a second (slowloris). Each task
    // reports how long after its first byte the server closed it, or None if it never did.
    let connected_all = std::sync::Arc::new(tokio::sync::Barrier::new(SLOW_CLIENTS + 1));
    let mut slow = Vec::with_capacity(SLOW_CLIENTS);
    for _ in 0..SLOW_CLIENTS {
        let stream = connect(port).await;
        let connected_all = connected_all.clone();
        slow.push(tokio::spawn(async move {
            let (mut reader, mut writer) = stream.into_split();
            let first_byte = Instant::now();
            let _ = writer
                .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
                .await;
            connected_all.wait().await;
            let deadline = first_byte + HEADER_READ_TIMEOUT + Duration::from_secs(10);
            let trickle = async {
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if writer.write_all(b"a").await.is_err() {
                        break;
                    }
                }
                std::future::pending::<()>().await
            };
            let closed = async {
                let mut buffer = [0u8; 256];
                loop {
                    match reader.read(&mut buffer).await {
                        Ok(0) | Err(_) => return first_byte.elapsed(),
                        Ok(_) => {}
                    }
                }
            };
            tokio::select! {
                () = trickle => None,
                elapsed = closed => Some(elapsed),
                () = tokio::time::sleep_until(deadline) => None,
            }
        }));
    }
    // Idle clients: connected, never a byte.
    let mut idle = Vec::with_capacity(IDLE_CLIENTS);
    for _ in 0..IDLE_CLIENTS {
        idle.push((connect(port).await, Instant::now()));
    }
    connected_all.wait().await;

    let mut latencies = Vec::with_capacity(HEALTH_PROBES);
    for _ in 0..HEALTH_PROBES {
        latencies.push(healthz(port).await);
    }
    latencies.sort();
    let (p50, max) = (percentile(&latencies, 0.5), latencies[latencies.len() - 1]);
    println!(
        "/healthz with {SLOW_CLIENTS} slow and {IDLE_CLIENTS} idle clients connected: \
         p50 {p50:?}, p99 {:?}, max {max:?} over {HEALTH_PROBES} probes (alone: {before:?})",
        percentile(&latencies, 0.99)
    );
    assert!(
        max < Duration::from_secs(2),
        "/healthz slowed to {max:?} with slow clients connected"
    );

    let mut cut_after = Vec::with_capacity(SLOW_CLIENTS);
    for client in slow {
        cut_after.push(client.await.expect("a slow client task"));
    }
    let kept = cut_after.iter().filter(|cut| cut.is_none()).count();
    assert_eq!(
        kept, 0,
        "{kept} of {SLOW_CLIENTS} slow clients were still connected 10 s past the header-read timeout"
    );
    let earliest = cut_after.iter().flatten().min().expect("slow clients");
    let latest = cut_after.iter().flatten().max().expect("slow clients");
    println!("slow clients were cut {earliest:?} to {latest:?} after their first byte");
    assert!(
        *earliest >= HEADER_READ_TIMEOUT - Duration::from_millis(200),
        "a slow client was cut after {earliest:?}, before the header-read timeout"
    );
    for (mut stream, connected) in idle {
        assert!(
            closed_by(
                &mut stream,
                connected + IDLE_TIMEOUT + Duration::from_secs(10)
            )
            .await,
            "an idle client was still connected 10 s past the idle timeout"
        );
        assert!(
            connected.elapsed() >= IDLE_TIMEOUT - Duration::from_millis(200),
            "an idle client was closed before the idle timeout"
        );
    }
    healthz(port).await;
}

/// A connection from `ip` (any address of 127.0.0.0/8 is this host's).
async fn connect_from(ip: [u8; 4], port: u16) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind((std::net::Ipv4Addr::from(ip), 0).into())
        .expect("a loopback address can be bound");
    socket
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("the server accepts TCP connections")
}

/// Opens `count` connections from `ip`, each with a partial header (slowloris).
async fn trickling(ip: [u8; 4], port: u16, count: usize) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = connect_from(ip, port).await;
        let _ = stream
            .write_all(b"GET /login HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
            .await;
        streams.push(stream);
    }
    streams
}

/// Completes each trickled request; how many were answered 200, answered 503 (a reserved
/// slot), or found closed.
async fn finish_trickled(streams: Vec<TcpStream>) -> (usize, usize, usize) {
    let (mut served, mut health_only, mut closed) = (0, 0, 0);
    for mut stream in streams {
        if stream
            .write_all(b"a\r\nconnection: close\r\n\r\n")
            .await
            .is_err()
        {
            closed += 1;
            continue;
        }
        let mut answer = Vec::new();
        let _ = timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
        if answer.starts_with(b"HTTP/1.1 200") {
            served += 1;
        } else if answer.starts_with(b"HTTP/1.1 503") {
            health_only += 1;
        } else {
            closed += 1;
        }
    }
    (served, health_only, closed)
}

/// `POST /mcp` `tools/list` with the support key on a fresh connection from `ip`: its
/// latency, and `/healthz` likewise.
async fn probe(server: &Server, ip: [u8; 4]) -> (Duration, Duration) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let call = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2025-06-18\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        server.support_key,
        body.len()
    );
    let health = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    let mut latencies = [Duration::ZERO; 2];
    for (latency, request) in latencies.iter_mut().zip([call.as_str(), health]) {
        let started = Instant::now();
        let mut stream = connect_from(ip, server.port).await;
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
            .await
            .expect("answered within 5 s")
            .expect("the answer is read");
        assert!(
            answer.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        *latency = started.elapsed();
    }
    (latencies[0], latencies[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_trickling_twice_its_share_keeps_no_one_else_out() {
    raise_file_limit();
    const CAP: usize = 200;
    const SHARE: usize = 50;
    const PROBES: usize = 100;
    let server = Server::start_with(&[
        "--max-connections",
        &CAP.to_string(),
        "--max-connections-per-address",
        &SHARE.to_string(),
        // Long enough that nothing here times out: what closes a connection is admission.
        "--header-read-timeout-ms",
        "60000",
        "--idle-timeout-ms",
        "60000",
    ]);
    let log = std::fs::read_to_string(server.dir().join("server.log")).unwrap_or_default();
    assert!(
        log.contains(&format!("max_connections={CAP}"))
            && log.contains(&format!("per_address={SHARE}")),
        "the effective caps are logged at start:\n{log}"
    );

    // One address holds twice its share; three more fill the rest of the cap.
    let attacker = trickling([127, 0, 0, 2], server.port, 2 * SHARE).await;
    let mut others = Vec::new();
    for last in 3..=5 {
        others.extend(trickling([127, 0, 0, last], server.port, SHARE).await);
    }
    // Everyone else, under that pressure: each probe's connection closes a trickling one.
    let (mut calls, mut healths) = (Vec::new(), Vec::new());
    for _ in 0..PROBES {
        let (call, health) = probe(&server, [127, 0, 0, 7]).await;
        calls.push(call);
        healths.push(health);
    }
    calls.sort();
    healths.sort();
    let p99 = |sorted: &[Duration]| percentile(sorted, 0.99);
    println!(
        "with {} trickling connections ({} from one address, share {SHARE}, cap {CAP}): \
         tools/list p50 {:?} p99 {:?}, /healthz p50 {:?} p99 {:?} over {PROBES} probes each",
        attacker.len() + others.len(),
        attacker.len(),
        percentile(&calls, 0.5),
        p99(&calls),
        percentile(&healths, 0.5),
        p99(&healths),
    );
    assert!(
        p99(&calls) < Duration::from_millis(100),
        "tools/list p99 {:?}",
        p99(&calls)
    );
    assert!(
        p99(&healths) < Duration::from_millis(100),
        "/healthz p99 {:?}",
        p99(&healths)
    );

    // The attacker's connections past its share were never served as its own: each was
    // refused, closed, or held to /healthz.
    let (served, health_only, closed) = finish_trickled(attacker).await;
    println!(
        "the attacker's {} connections: {served} served, {health_only} held to /healthz, {closed} closed",
        2 * SHARE
    );
    assert!(
        served <= SHARE,
        "{served} of the attacker's connections were served"
    );
    assert_eq!(served + health_only + closed, 2 * SHARE);
    assert!(
        closed >= SHARE - 16,
        "only {closed} of the attacker's connections were closed"
    );
    finish_trickled(others).await;
    healthz(server.port).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_is_working_healthz_answers_from_a_reserved_slot() {
    raise_file_limit();
    const CAP: usize = 20;
    let server = Server::start_with(&[
        "--max-connections",
        &CAP.to_string(),
        "--max-connections-per-address",
        &CAP.to_string(),
    ]);
    // Every place taken by a request in progress: an MCP call whose body has not come yet.
    // The server asking for it (`100 Continue`) shows its request is being served.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let mut working = Vec::with_capacity(CAP);
    for _ in 0..CAP {
        let mut stream = connect_from([127, 0, 0, 2], server.port).await;
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
             mcp-protocol-version: 2025-06-18\r\nexpect: 100-continue\r\ncontent-length: {}\r\n\r\n",
            server.support_key,
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut buffer = [0u8; 64];
        let read = timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("the server asks for the body")
            .unwrap();
        assert!(
            buffer[..read].starts_with(b"HTTP/1.1 100"),
            "{:?}",
            &buffer[..read]
        );
        working.push(stream);
    }

    // Past the cap, with nothing to close: a probe is answered, anything else is not.
    for _ in 0..20 {
        let health = get_past_the_cap(server.port, "/healthz").await;
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    }
    let other = get_past_the_cap(server.port, "/login").await;
    assert!(other.starts_with("HTTP/1.1 503"), "{other}");
    assert!(other.contains("answers only /healthz"), "{other}");

    // The working connections were never cut: each gets its answer.
    for mut stream in working {
        stream.write_all(body.as_bytes()).await.unwrap();
        let response = read_response(&mut stream).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    healthz(server.port).await;
}

/// `GET path` on a fresh connection from 127.0.0.3: the answer, read until the server
/// closes (a reserved slot serves one request).
async fn get_past_the_cap(port: u16, path: &str) -> String {
    let mut stream = connect_from([127, 0, 0, 3], port).await;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("answered and closed within 5 s")
        .expect("the answer is read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Reads one HTTP/1.1 response with a `content-length` body off a kept-alive connection.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("a response within 10 s")
            .expect("the response is read");
        assert!(read > 0, "the connection closed mid-response: {received:?}");
        received.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .expect("a content-length");
            if received.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_but_a_slow_request_in_progress_is_not() {
    const TIMEOUT: Duration = Duration::from_millis(1000);
    let millis = TIMEOUT.as_millis().to_string();
    let server = Server::start_with(&[
        "--idle-timeout-ms",
        &millis,
        "--header-read-timeout-ms",
        &millis,
    ]);

    // A kept-alive connection: two requests, then nothing; closed one timeout after the last.
    let mut stream = connect(server.port).await;
    for _ in 0..2 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let response = read_response(&mut stream).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    let answered = Instant::now();
    assert!(
        closed_by(&mut stream, answered + TIMEOUT + Duration::from_secs(5)).await,
        "an idle kept-alive connection stayed open past the idle timeout"
    );
    assert!(answered.elapsed() >= TIMEOUT - Duration::from_millis(100));

    // A request whose headers are complete is in progress: its body may take longer than
    // either timeout (here 3 s, trickled), and it is answered.
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        .to_string();
    let mut stream = connect(server.port).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n\r\n",
        server.support_key,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let third = body.len() / 3;
    for piece in [&body[..third], &body[third..2 * third], &body[2 * third..]] {
        tokio::time::sleep(TIMEOUT).await;
        stream.write_all(piece.as_bytes()).await.unwrap();
    }
    let response = read_response(&mut stream).await;
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "a slow request in progress was not answered: {response}"
    );
}

/// A request the server refuses on its headers alone, with a body of `length` bytes.
struct EarlyRefusal {
    what: &'static str,
    head: &'static str,
    content_type: &'static str,
    length: usize,
    status: &'static str,
}

/// How a kept-alive connection fared after an early refusal.
#[derive(Debug, PartialEq, Eq)]
enum Afterwards {
    /// The client sent the body and its next request on the same connection: answered.
    NextAnswered,
    /// The refusal said `Connection: close` and the server closed the connection.
    CloseAnnounced,
}

/// Sends the refused request's headers, reads the refusal, and only then sends the body (the
/// extreme of a client whose body follows its headers a moment later) and a next request on
/// the same connection. Errors name what the client saw.
async fn after_early_refusal(port: u16, case: &EarlyRefusal) -> Result<Afterwards, String> {
    let mut stream = connect(port).await;
    let head = format!(
        "{}\r\nhost: 127.0.0.1\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n",
        case.head, case.content_type, case.length
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let refusal = read_head_and_body(&mut stream).await?;
    let (refusal_head, _) = refusal.split_once("\r\n\r\n").unwrap_or((&refusal, ""));
    if !refusal_head.starts_with(case.status) {
        return Err(format!("expected {}, got {refusal_head}", case.status));
    }
    if refusal_head
        .lines()
        .any(|line| line.eq_ignore_ascii_case("connection: close"))
    {
        return if closed_by(&mut stream, Instant::now() + Duration::from_secs(5)).await {
            Ok(Afterwards::CloseAnnounced)
        } else {
            Err("`Connection: close` was announced but the connection stayed open".into())
        };
    }
    let filler = if case.content_type.starts_with("application/json") {
        b' '
    } else {
        b'a'
    };
    stream
        .write_all(&vec![filler; case.length])
        .await
        .map_err(|e| format!("the body could not be sent after the refusal: {e}"))?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .map_err(|e| format!("the next request could not be sent: {e}"))?;
    let next = read_head_and_body(&mut stream)
        .await
        .map_err(|e| format!("the next request, on the same connection: {e}"))?;
    if next.starts_with("HTTP/1.1 200") {
        Ok(Afterwards::NextAnswered)
    } else {
        Err(format!("the next request was answered {next}"))
    }
}

/// One response off `stream`, its body delimited by `content-length` or chunked; an error
/// with what arrived if it is not complete within 10 s.
async fn read_head_and_body(stream: &mut TcpStream) -> Result<String, String> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_ascii_lowercase();
            let length = head.lines().find_map(|line| {
                line.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            let complete = match length {
                Some(length) => received.len() >= end + 4 + length,
                None if head.contains("transfer-encoding: chunked") => text.ends_with("0\r\n\r\n"),
                None => true,
            };
            if complete {
                return Ok(text);
            }
        }
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return Err(format!("no complete response within 10 s: {text:?}")),
            Ok(Ok(0) | Err(_)) => {
                return Err(format!("the connection closed mid-response: {text:?}"));
            }
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_before_its_body_arrived_never_costs_the_client_its_next_request() {
    const SMALL: usize = 300;
    const MCP_LIMIT: usize = 1024 * 1024;
    const CONSOLE_LIMIT: usize = 8 * 1024 * 1024;
    const JSON: &str = "application/json";
    const FORM: &str = "application/x-www-form-urlencoded";
    let server = Server::start();
    // Small bodies and bodies at the route's limit. Up to the drain limit (/mcp's body
    // limit) an unread body is read and discarded; past it the client is told to reconnect.
    let kept = |length: usize| (length, Afterwards::NextAnswered);
    let cases = [
        (
            "/mcp without a key",
            "POST /mcp HTTP/1.1\r\naccept: application/json, text/event-stream",
            JSON,
            "HTTP/1.1 401",
            vec![kept(SMALL), kept(MCP_LIMIT)],
        ),
        (
            "/api/v1 without a key",
            "POST /api/v1/skills/refund-policy/candidates HTTP/1.1",
            JSON,
            "HTTP/1.1 401",
            vec![kept(SMALL), kept(MCP_LIMIT)],
        ),
        (
            "a server function fetched from another site",
            "POST /console/api/revoke_grant HTTP/1.1\r\nsec-fetch-site: cross-site\r\nsec-fetch-mode: cors",
            JSON,
            "HTTP/1.1 403",
            vec![kept(SMALL), (CONSOLE_LIMIT, Afterwards::CloseAnnounced)],
        ),
        (
            "a server function posted from another origin",
            "POST /console/api/revoke_grant HTTP/1.1\r\norigin: http://elsewhere.example",
            FORM,
            "HTTP/1.1 403",
            vec![kept(SMALL), (CONSOLE_LIMIT, Afterwards::CloseAnnounced)],
        ),
        (
            "a server function past the console's body limit",
            "POST /console/api/revoke_grant HTTP/1.1",
            JSON,
            "HTTP/1.1 413",
            vec![(CONSOLE_LIMIT + 1, Afterwards::CloseAnnounced)],
        ),
        (
            "the login form from another origin",
            "POST /login HTTP/1.1\r\norigin: http://elsewhere.example",
            FORM,
            "HTTP/1.1 403",
            vec![kept(SMALL), (CONSOLE_LIMIT, Afterwards::CloseAnnounced)],
        ),
        (
            "the consent form from another origin",
            "POST /oauth/consent HTTP/1.1\r\norigin: http://elsewhere.example",
            FORM,
            "HTTP/1.1 403",
            vec![kept(SMALL), (CONSOLE_LIMIT, Afterwards::CloseAnnounced)],
        ),
    ];
    let mut failures = Vec::new();
    for (what, head, content_type, status, lengths) in cases {
        for (length, expected) in lengths {
            let case = EarlyRefusal {
                what,
                head,
                content_type,
                length,
                status,
            };
            match after_early_refusal(server.port, &case).await {
                Ok(seen) if seen == expected => {}
                Ok(seen) => failures.push(format!(
                    "{} ({length} bytes): expected {expected:?}, saw {seen:?}",
                    case.what
                )),
                Err(error) => failures.push(format!("{} ({length} bytes): {error}", case.what)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    healthz(server.port).await;
}
