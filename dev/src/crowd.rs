//! `skillgate-dev crowd`: what clients see of the listener's connection bounds, in one run.
//!
//! - **Kept-alive after an early refusal.** `ROUNDS` connections each send a `POST /mcp`
//!   without a key, headers and body in two writes a moment apart (as httpx does), then a
//!   second request on the same connection. Counted: connections lost before that second
//!   request was answered. A baseline sends headers and body in one write.
//! - **One address crowding the rest.** A baseline of probes (a governed `tools/list` and a
//!   `/healthz`, each on a fresh connection from 127.0.1.1) on an idle gateway; then one
//!   address (127.0.0.2) holds twice its share of connections trickling headers while
//!   others (127.0.2.1…) fill the rest of the cap, and the same probes run again. Reported:
//!   p50 and p99 of both, their ratio to the baseline, and what became of the crowding
//!   address's connections.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::timeout;

use super::harness::{self, Stack};

#[derive(Debug, Args)]
pub struct CrowdArgs {
    /// The gateway's `--max-connections`.
    #[arg(long, default_value_t = 1000)]
    pub cap: usize,
    /// The gateway's `--max-connections-per-address`.
    #[arg(long, default_value_t = 100)]
    pub share: usize,
    /// Probes per phase, and connections of the kept-alive measurement.
    #[arg(long, default_value_t = 200)]
    pub rounds: usize,
}

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
/// Where the probes come from: no crowding connection does.
const PROBE: [u8; 4] = [127, 0, 1, 1];
/// A client that sends its body "a moment" after its headers.
const BODY_DELAY: Duration = Duration::from_millis(2);

pub async fn run(args: CrowdArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.share >= 1 && args.share * 3 <= args.cap && args.rounds >= 1,
        "--share must be at least 1 and at most a third of --cap, --rounds at least 1"
    );
    let needed = (args.cap + 3 * args.share + 256) as u64;
    let soft = rlimit::increase_nofile_limit(u64::MAX).context("raising the open file limit")?;
    anyhow::ensure!(
        soft >= needed,
        "the test needs {needed} open files; the hard limit allows {soft}"
    );
    let cap = args.cap.to_string();
    let share = args.share.to_string();
    let stack = Stack::start_with(&[
        "--max-connections",
        &cap,
        "--max-connections-per-address",
        &share,
        "--header-read-timeout-ms",
        "120000",
        "--idle-timeout-ms",
        "120000",
    ])
    .await?;
    let port: u16 = stack
        .gateway_url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches(skillgate::MCP_PATH)
        .parse()
        .context("the gateway's port")?;
    println!(
        "# skillgate-dev crowd (cap {}, share {}, {} rounds)\n",
        args.cap, args.share, args.rounds
    );

    println!("| kept-alive after a 401 | connections lost before their next request |");
    println!("| --- | --- |");
    let one_write = lost_after_refusal(port, args.rounds, false).await?;
    let two_writes = lost_after_refusal(port, args.rounds, true).await?;
    println!(
        "| headers and body in one write (baseline) | {one_write} of {} |",
        args.rounds
    );
    println!(
        "| body {} ms after the headers | {two_writes} of {} |",
        BODY_DELAY.as_millis(),
        args.rounds
    );

    let quiet = probes(&stack, port, args.rounds).await?;
    let attacker = trickle([127, 0, 0, 2], port, 2 * args.share).await?;
    let mut others = Vec::new();
    for index in 0.. {
        let left = args.cap - args.share - others.len();
        if left == 0 {
            break;
        }
        let address = [127, 0, 2 + (index / 250) as u8, 1 + (index % 250) as u8];
        others.extend(trickle(address, port, args.share.min(left)).await?);
    }
    let crowded = probes(&stack, port, args.rounds).await?;
    let (served, health_only, closed) = finish(attacker).await;
    drop(others);

    println!(
        "\n| probe from another address | p50 quiet | p99 quiet | p50 crowded | p99 crowded | p99 ratio |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, quiet, crowded) in [
        ("governed `tools/list`", &quiet.0, &crowded.0),
        ("`/healthz`", &quiet.1, &crowded.1),
    ] {
        println!(
            "| {name} | {} | {} | {} | {} | {:.2} |",
            ms(harness::percentile(quiet, 0.5)),
            ms(harness::percentile(quiet, 0.99)),
            ms(harness::percentile(crowded, 0.5)),
            ms(harness::percentile(crowded, 0.99)),
            harness::percentile(crowded, 0.99).as_secs_f64()
                / harness::percentile(quiet, 0.99).as_secs_f64(),
        );
    }
    println!(
        "\nThe crowding address's {} connections (share {}): {served} served, {health_only} held to /healthz, {closed} closed.",
        2 * args.share,
        args.share
    );
    Ok(())
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

async fn connect_from(ip: [u8; 4], port: u16) -> anyhow::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind((Ipv4Addr::from(ip), 0).into())?;
    Ok(socket.connect(([127, 0, 0, 1], port).into()).await?)
}

/// Of `rounds` connections refused with a 401 at `/mcp`, how many could not serve a next
/// request.
async fn lost_after_refusal(port: u16, rounds: usize, split: bool) -> anyhow::Result<usize> {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n",
        BODY.len()
    );
    let mut lost = 0;
    for _ in 0..rounds {
        let mut stream = connect_from([127, 0, 0, 1], port).await?;
        if split {
            stream.write_all(head.as_bytes()).await?;
            tokio::time::sleep(BODY_DELAY).await;
            let _ = stream.write_all(BODY.as_bytes()).await;
        } else {
            stream.write_all(format!("{head}{BODY}").as_bytes()).await?;
        }
        let first = read_one(&mut stream).await;
        let next = match first {
            Some(answer) if answer.starts_with("HTTP/1.1 401") => {
                let sent = stream
                    .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
                    .await;
                match sent {
                    Ok(()) => read_one(&mut stream).await,
                    Err(_) => None,
                }
            }
            other => bail!("the refusal was not a 401: {other:?}"),
        };
        if !next.is_some_and(|answer| answer.starts_with("HTTP/1.1 200")) {
            lost += 1;
        }
    }
    Ok(lost)
}

/// One response with a `content-length` body, or `None` if the connection closed first.
async fn read_one(stream: &mut TcpStream) -> Option<String> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                return Some(text);
            }
        }
        match timeout(Duration::from_secs(10), stream.read(&mut buffer)).await {
            Ok(Ok(read)) if read > 0 => received.extend_from_slice(&buffer[..read]),
            _ => return None,
        }
    }
}

/// `rounds` probes from [`PROBE`], each on a fresh connection: the latencies of a governed
/// `tools/list` and of `/healthz`.
async fn probes(
    stack: &Stack,
    port: u16,
    rounds: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let call = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2025-06-18\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{BODY}",
        stack.key,
        BODY.len()
    );
    let health = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    let (mut calls, mut healths) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (samples, request) in [(&mut calls, call.as_str()), (&mut healths, health)] {
            let started = Instant::now();
            let mut stream = connect_from(PROBE, port).await?;
            stream.write_all(request.as_bytes()).await?;
            let mut answer = Vec::new();
            timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
                .await
                .context("a probe was not answered within 10 s")??;
            if !answer.starts_with(b"HTTP/1.1 200") {
                let log =
                    std::fs::read_to_string(stack.dir().join("gateway.log")).unwrap_or_default();
                bail!(
                    "a probe was answered {}\nthe gateway's log:\n{log}",
                    String::from_utf8_lossy(&answer[..answer.len().min(200)])
                );
            }
            samples.push(started.elapsed());
        }
    }
    Ok((calls, healths))
}

/// `count` connections from `ip`, each with a partial header.
async fn trickle(ip: [u8; 4], port: u16, count: usize) -> anyhow::Result<Vec<TcpStream>> {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = connect_from(ip, port).await?;
        let _ = stream
            .write_all(b"GET /login HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
            .await;
        streams.push(stream);
    }
    Ok(streams)
}

/// Completes each trickled request: how many were served, held to `/healthz` (503), or
/// found closed.
async fn finish(streams: Vec<TcpStream>) -> (usize, usize, usize) {
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
