//! The console's static files leave gzipped for a browser that accepts it; pages do not.
//! A page names in its head the bundle modules it needs, so the browser fetches them at once.

use std::io::Write as _;

use crate::common;

use common::Server;
use common::console::{page, sign_in_admin};
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

    let body = gzipped_then_plain(&url, &wasm).await;
    assert_eq!(&body[..2], &[0x1f, 0x8b], "a gzip stream");
    assert!(
        body.len() * 4 < wasm.len(),
        "{} of {} bytes",
        body.len(),
        wasm.len()
    );
}

/// Fetches the wasm file `url` as a browser that accepts gzip (returns that body, checked
/// to be sent gzipped), then as one that does not (checked to be `raw`).
async fn gzipped_then_plain(url: &str, raw: &[u8]) -> Vec<u8> {
    let http = reqwest::Client::new();
    let gzipped = http
        .get(url)
        .header(ACCEPT_ENCODING, "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.status(), 200);
    assert_eq!(gzipped.headers()[CONTENT_ENCODING], "gzip");
    assert_eq!(gzipped.headers()["content-type"], "application/wasm");
    let body = gzipped.bytes().await.unwrap().to_vec();

    let plain = http.get(url).send().await.unwrap();
    assert!(plain.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(plain.bytes().await.unwrap(), raw);
    body
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

#[tokio::test]
async fn a_gzip_file_the_build_wrote_beside_an_asset_is_sent_as_it_is() {
    let server = Server::start();
    let pkg = server.dir().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let wasm = fake_wasm();
    std::fs::write(pkg.join("chunk_7.wasm"), &wasm).unwrap();
    // Level 1, which the server's own compression never uses: these exact bytes come back
    // only if the file is sent as it is.
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&wasm).unwrap();
    let gz = encoder.finish().unwrap();
    std::fs::write(pkg.join("chunk_7.wasm.gz"), &gz).unwrap();

    let url = format!("{}/pkg/chunk_7.wasm", server.base);
    assert_eq!(gzipped_then_plain(&url, &wasm).await, gz);
}

/// The `<head>` of a page: where the preload hints must be.
fn head(html: &str) -> &str {
    &html[..html.find("</head>").expect("a head")]
}

#[tokio::test]
async fn a_lazy_page_names_each_module_it_needs_once_in_its_head() {
    let server = Server::start();
    let admin = sign_in_admin(&server).await;
    let (_, without) = page(&server, &admin.cookie, "/roles").await;
    assert!(
        !without.contains("chunk_"),
        "no manifest, no hints: {}",
        head(&without)
    );

    // The splitter's manifest: each lazy function's name with a hash, and its modules. The
    // server reads it when it starts.
    let pkg = server.dir().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("__wasm_split_manifest.json"),
        r#"{"roles_page_123": ["chunk_3", "chunk_5", "split_roles_page_123"],
            "tools_page_123": ["chunk_3", "chunk_9", "split_tools_page_123"],
            "dashboard_page_123": ["chunk_3", "chunk_7", "split_dashboard_page_123"],
            "login_page_123": ["chunk_8", "split_login_page_123"]}"#,
    )
    .unwrap();
    let replica = server.replica();

    let (status, html) = page(&replica, &admin.cookie, "/roles").await;
    assert_eq!(status, 200);
    let head = head(&html);
    for module in ["chunk_3", "chunk_5", "split_roles_page_123"] {
        let href = format!(r#"href="/pkg/{module}.wasm""#);
        assert_eq!(head.matches(&href).count(), 1, "{module} once in {head}");
    }
    assert!(!head.contains("chunk_9"), "another page's module: {head}");
    assert!(
        head.contains(r#"rel="modulepreload" href="/pkg/__wasm_split.______________________.js""#),
        "the split loader: {head}"
    );
    let hint = head
        .split("<link")
        .find(|l| l.contains("chunk_5"))
        .expect("the hint");
    for attribute in [
        r#"rel="preload""#,
        r#"as="fetch""#,
        r#"crossorigin="anonymous""#,
    ] {
        assert!(hint.contains(attribute), "{attribute} in {hint}");
    }
    assert!(
        !html[html.find("</head>").unwrap()..].contains("chunk_3"),
        "hints stay out of the body, which the browser hydrates"
    );

    // The dashboard and the sign-in page are lazy pages too: the first page a person sees.
    for (path, cookie, modules) in [
        (
            "/",
            admin.cookie.as_str(),
            ["chunk_7", "split_dashboard_page_123"],
        ),
        ("/login", "", ["chunk_8", "split_login_page_123"]),
    ] {
        let (status, html) = page(&replica, cookie, path).await;
        assert_eq!(status, 200, "{path}");
        let its_head = self::head(&html);
        for module in modules {
            let href = format!(r#"href="/pkg/{module}.wasm""#);
            let times = its_head.matches(&href).count();
            assert_eq!(times, 1, "{module} once in {path}: {its_head}");
        }
    }
}
