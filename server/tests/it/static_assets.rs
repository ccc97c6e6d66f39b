//! The console's static files leave gzipped for a browser that accepts it; pages do not.

use crate::common;

use common::Server;
use reqwest::header::{ACCEPT_ENCODING, CONTENT_ENCODING};

/// A stand-in for the hydrate bundle: the wasm magic number and repetitive code, which
/// compresses as the real one does.
fn fake_wasm() -> Vec<u8> {
    let mut bytes = b"\0asm\x01\0\0\0".to_vec();
    for i in 0..20_000u32 {
        bytes.extend_from_slice(&(i % 97).to_le_bytes());
    }
    bytes
}

#[tokio::test]
async fn the_wasm_bundle_is_sent_gzipped_to_a_browser_that_accepts_it() {
    let server = Server::start();
    let pkg = server.dir().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let wasm = fake_wasm();
    std::fs::write(pkg.join("skillgate_bg.wasm"), &wasm).unwrap();
    let url = format!("{}/pkg/skillgate_bg.wasm", server.base);
    let http = reqwest::Client::new();

    let gzipped = http
        .get(&url)
        .header(ACCEPT_ENCODING, "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.status(), 200);
    assert_eq!(gzipped.headers()[CONTENT_ENCODING], "gzip");
    let body = gzipped.bytes().await.unwrap();
    assert_eq!(&body[..2], &[0x1f, 0x8b], "a gzip stream");
    assert!(
        body.len() * 4 < wasm.len(),
        "{} of {} bytes",
        body.len(),
        wasm.len()
    );

    let plain = http.get(&url).send().await.unwrap();
    assert!(plain.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(plain.bytes().await.unwrap(), wasm);
}

#[tokio::test]
async fn pages_are_sent_as_they_are() {
    let server = Server::start();
    let page = reqwest::Client::new()
        .get(format!("{}/login", server.base))
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers().get(CONTENT_ENCODING).is_none());
    assert!(page.text().await.unwrap().contains("<form"));
}
