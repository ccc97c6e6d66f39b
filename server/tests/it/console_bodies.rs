//! Console bodies past their limit answer 413 with the limit named, on the real binary and
//! a raw socket: the answer comes before the client has sent the body, so the server never
//! held it (a server function used to read all of it and answer 500).

use crate::common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use common::Server;
use common::console::{Browser, sign_in_admin};

const LIMIT: usize = 8 * 1024 * 1024;
const FIFTY_MB: usize = 50 * 1024 * 1024;

/// How a request's body is framed.
enum Framing {
    /// `content-length: 50 MB`, of which only the first megabyte is sent.
    Declared,
    /// Chunked, 9 chunks of 1 MiB (past the limit) and no last chunk.
    Chunked,
}

/// Posts to `path` with `headers` and a body that is never finished; the status line and
/// text of the answer, which must come while the body is still unsent.
async fn post_unfinished(port: u16, path: &str, headers: &str, framing: Framing) -> String {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let framing_header = match framing {
        Framing::Declared => format!("content-length: {FIFTY_MB}\r\n"),
        Framing::Chunked => "transfer-encoding: chunked\r\n".to_owned(),
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\
         content-type: application/x-www-form-urlencoded\r\n{headers}{framing_header}\r\n"
    );
    // The writer runs on its own: a server that stops reading must not block the test.
    let sender = tokio::spawn(async move {
        writer.write_all(head.as_bytes()).await?;
        let megabyte = format!("text={}", "a".repeat(1024 * 1024 - 5));
        match framing {
            Framing::Declared => writer.write_all(megabyte.as_bytes()).await?,
            Framing::Chunked => {
                for _ in 0..9 {
                    writer
                        .write_all(format!("{:x}\r\n{megabyte}\r\n", megabyte.len()).as_bytes())
                        .await?;
                }
            }
        }
        // Hold the connection open with the body unfinished.
        std::future::pending::<()>().await;
        Ok::<_, std::io::Error>(writer)
    });
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let read = timeout(Duration::from_secs(20), async {
        loop {
            // The server closes the connection after refusing it: read to the end.
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    sender.abort();
    assert!(
        read.is_ok(),
        "no answer within 20 s while the body was unfinished (the server waited for all of \
         it); read so far: {}",
        String::from_utf8_lossy(&answer)
    );
    String::from_utf8_lossy(&answer).into_owned()
}

fn assert_too_large(answer: &str, what: &str) {
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{what} answered: {answer}"
    );
    assert!(
        answer.contains(&LIMIT.to_string()),
        "{what}: the answer names the limit: {answer}"
    );
}

fn background_fetch(browser: Option<&Browser>) -> String {
    let cookie = browser.map_or(String::new(), |b| format!("cookie: {}\r\n", b.cookie));
    format!("sec-fetch-site: same-origin\r\nsec-fetch-mode: cors\r\n{cookie}")
}

#[tokio::test]
async fn a_server_function_body_past_the_limit_answers_413_signed_in_or_not_declared_or_chunked() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let path = "/console/api/preview_markdown";
    for (who, browser) in [("signed in", Some(&admin)), ("signed out", None)] {
        for (framing, name) in [
            (Framing::Declared, "a declared 50 MB body"),
            (Framing::Chunked, "a chunked 9 MiB body"),
        ] {
            let answer =
                post_unfinished(server.port, path, &background_fetch(browser), framing).await;
            assert_too_large(&answer, &format!("{name} to a server function, {who}"));
        }
    }

    // Within the limit the same call is served.
    let response = common::console::http()
        .post(format!("{}{path}", server.base))
        .headers(common::console::background_fetch(&server, &admin.cookie))
        .body("text=%2A%2Ahello%2A%2A")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("<strong>hello</strong>")
    );
}

#[tokio::test]
async fn a_form_post_past_the_limit_answers_413_before_its_body_is_read() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    // A form navigation (JavaScript off) is read by the console guard for its form token.
    let navigation = format!(
        "sec-fetch-site: same-origin\r\nsec-fetch-mode: navigate\r\ncookie: {}\r\n",
        admin.cookie
    );
    let answer = post_unfinished(
        server.port,
        "/console/api/preview_markdown",
        &navigation,
        Framing::Declared,
    )
    .await;
    assert_too_large(&answer, "a 50 MB form navigation");
}
