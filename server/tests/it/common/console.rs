//! A console user's side of the HTTP conversation, for tests that drive the console
//! without a browser: sign in, carry the session cookie and the form token, and post
//! forms the way a page without JavaScript does or server functions the way a hydrated
//! page does.

use std::io::Write;
use std::process::{Command, Stdio};

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderMap, HeaderValue, SET_COOKIE};

use super::{BIN, Server};

pub const FORM: &str = "application/x-www-form-urlencoded";
pub const VIEWER_PASSWORD: &str = "a long viewer password";
pub const REVIEWER_PASSWORD: &str = "a long reviewer password";

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client")
}

/// The HTTP status of an MCP `initialize` with `Authorization: Bearer CREDENTIAL` (an agent
/// key or an OAuth access token): 200 when the credential is admitted, 401 when not.
pub async fn mcp_status(server: &Server, credential: &str) -> StatusCode {
    http()
        .post(server.mcp_url())
        .bearer_auth(credential)
        .header(CONTENT_TYPE, "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "skillgate-test", "version": "1"}
                }
            })
            .to_string(),
        )
        .send()
        .await
        .expect("the server answers")
        .status()
}

/// A signed-in browser: its session cookie and its pages' form token.
pub struct Browser {
    pub cookie: String,
    pub token: String,
}

pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.contains("skillgate_session="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}

pub fn form_token(html: &str) -> String {
    let field = html
        .find(r#"name="csrf_token""#)
        .unwrap_or_else(|| panic!("the page has a form token field: {html}"));
    let rest = &html[field..];
    let value = rest.find(r#"value=""#).expect("the field has a value") + 7;
    let end = rest[value..].find('"').expect("the value ends");
    rest[value..value + end].to_owned()
}

pub fn encode(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(name, value)| {
            let value: String = value
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        (b as char).to_string()
                    }
                    other => format!("%{other:02X}"),
                })
                .collect();
            format!("{name}={value}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// What Chromium sends with a form it submits from the console page at `from`.
pub fn navigation(server: &Server, cookie: &str, from: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("origin", HeaderValue::from_str(&server.base).unwrap());
    headers.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
    headers.insert("sec-fetch-mode", HeaderValue::from_static("navigate"));
    headers.insert("accept", HeaderValue::from_static("text/html"));
    headers.insert(
        "referer",
        HeaderValue::from_str(&format!("{}{from}", server.base)).unwrap(),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(FORM));
    headers.insert(COOKIE, HeaderValue::from_str(cookie).unwrap());
    headers
}

/// What the hydrated page's `ActionForm` sends: a background fetch that wants JSON.
pub fn background_fetch(server: &Server, cookie: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("origin", HeaderValue::from_str(&server.base).unwrap());
    headers.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
    headers.insert("sec-fetch-mode", HeaderValue::from_static("cors"));
    headers.insert("accept", HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(FORM));
    headers.insert(COOKIE, HeaderValue::from_str(cookie).unwrap());
    headers
}

/// Posts `fields` to `path` as the hydrated page's background fetch (a server function
/// call): the status and the answer's text.
pub async fn fetch_post(
    server: &Server,
    browser: &Browser,
    path: &str,
    fields: &[(&str, &str)],
) -> (StatusCode, String) {
    let response = http()
        .post(format!("{}{path}", server.base))
        .headers(background_fetch(server, &browser.cookie))
        .body(encode(fields))
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

/// `skillgate user add NAME --role ROLE`, the password on standard input.
pub fn add_user(server: &Server, name: &str, role: &str, password: &str) {
    let mut child = Command::new(BIN)
        .args(["user", "add", name, "--role", role])
        .args(["--database-url", &server.database_url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the skillgate binary runs");
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "user add: {output:?}");
}

/// A password sign-in as the sign-in page posts it: the server's answer. A page without
/// the password form (single sign-on only) has no form token, and none is sent.
pub async fn post_sign_in(server: &Server, name: &str, password: &str) -> reqwest::Response {
    let login = http()
        .get(format!("{}/login", server.base))
        .send()
        .await
        .unwrap();
    let anonymous = session_cookie(login.headers()).expect("the sign-in page starts a session");
    let html = login.text().await.unwrap();
    let token = if html.contains(r#"name="csrf_token""#) {
        form_token(&html)
    } else {
        String::new()
    };
    http()
        .post(format!("{}/login", server.base))
        .headers(navigation(server, &anonymous, "/login"))
        .body(encode(&[
            ("name", name),
            ("password", password),
            ("csrf_token", &token),
        ]))
        .send()
        .await
        .unwrap()
}

pub async fn sign_in(server: &Server, name: &str, password: &str) -> Browser {
    let response = post_sign_in(server, name, password).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "{name} signs in");
    let cookie = session_cookie(response.headers()).expect("sign-in sets a session cookie");
    // The form token belongs to the console session: any page carries it.
    let (_, html) = page(server, &cookie, "/").await;
    Browser {
        token: form_token(&html),
        cookie,
    }
}

pub async fn sign_in_admin(server: &Server) -> Browser {
    let password = server
        .admin_password
        .clone()
        .expect("the first start prints it");
    sign_in(server, "admin", &password).await
}

/// A console page as `cookie` sees it: its status and HTML.
pub async fn page(server: &Server, cookie: &str, path: &str) -> (StatusCode, String) {
    let response = http()
        .get(format!("{}{path}", server.base))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap();
    // Leptos marks each dynamic text with an empty `<!>` comment (one list per view under
    // `erase_components`); the assertions are about what the page says.
    let status = response.status();
    (status, response.text().await.unwrap().replace("<!>", ""))
}
