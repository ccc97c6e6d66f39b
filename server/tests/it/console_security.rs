//! The console refuses requests from other origins and form posts without the session's
//! form token, and a burst of sign-ins cannot exhaust the host: through the real binary.

use crate::common;

use common::Server;
use common::console::{self, Browser, FORM, encode, form_token, http, mcp_status, session_cookie};
use futures::future::join_all;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderMap, HeaderValue, LOCATION, SET_COOKIE};

/// What a browser page of another port on the same host sends with its requests.
const FOREIGN_ORIGIN: &str = "http://127.0.0.1:1";

/// What Chromium sends with a form it submits from the console's scopes page.
fn navigation(server: &Server, cookie: &str) -> HeaderMap {
    console::navigation(server, cookie, "/scopes")
}

/// Headers of a background `fetch` by the hydrated console page, from `origin`.
fn background_fetch(origin: &str, site: &str, cookie: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("origin", HeaderValue::from_str(origin).unwrap());
    headers.insert("sec-fetch-site", HeaderValue::from_str(site).unwrap());
    headers.insert("sec-fetch-mode", HeaderValue::from_static("cors"));
    headers.insert("accept", HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(FORM));
    headers.insert(COOKIE, HeaderValue::from_str(cookie).unwrap());
    headers
}

/// Opens the sign-in page: the pre-login session's cookie and the form's token.
async fn open_sign_in(server: &Server) -> Browser {
    let response = http()
        .get(format!("{}/login", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = session_cookie(response.headers()).expect("the sign-in page starts a session");
    let html = response.text().await.unwrap();
    Browser {
        token: form_token(&html),
        cookie,
    }
}

fn post_sign_in(
    server: &Server,
    browser: &Browser,
    headers: HeaderMap,
    password: &str,
) -> impl Future<Output = reqwest::Response> + use<> {
    let request = http()
        .post(format!("{}/login", server.base))
        .headers(headers)
        .body(encode(&[
            ("name", "admin"),
            ("password", password),
            ("csrf_token", &browser.token),
        ]));
    async move { request.send().await.unwrap() }
}

fn admin_password(server: &Server) -> String {
    server
        .admin_password
        .clone()
        .expect("the first start prints the admin password")
}

/// Signs the admin in as Chromium would, and opens a console page.
async fn sign_in(server: &Server) -> Browser {
    let anonymous = open_sign_in(server).await;
    let response = post_sign_in(
        server,
        &anonymous,
        navigation(server, &anonymous.cookie),
        &admin_password(server),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/");
    let cookie = session_cookie(response.headers()).expect("sign-in sets a new session cookie");
    assert_ne!(cookie, anonymous.cookie, "sign-in cycles the session id");
    let set_cookie = response.headers()[SET_COOKIE].to_str().unwrap();
    // The pre-login session's one hour does not carry over: a console session lasts 8 h.
    assert!(set_cookie.contains("Max-Age=28800"), "{set_cookie}");
    let page = page(server, &cookie).await;
    assert_eq!(page.status(), StatusCode::OK);
    let token = form_token(&page.text().await.unwrap());
    assert_ne!(
        token, anonymous.token,
        "the sign-in page's token does not carry over"
    );
    Browser { cookie, token }
}

/// A console page that has forms, as the given cookie sees it.
async fn page(server: &Server, cookie: &str) -> reqwest::Response {
    http()
        .get(format!("{}/users", server.base))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap()
}

async fn revoke(server: &Server, headers: HeaderMap, body: String) -> reqwest::Response {
    http()
        .post(format!("{}/console/api/revoke_key", server.base))
        .headers(headers)
        .body(body)
        .send()
        .await
        .unwrap()
}

fn server_log(server: &Server) -> String {
    std::fs::read_to_string(server.dir().join("server.log")).unwrap_or_default()
}

#[tokio::test]
async fn a_cross_origin_server_function_call_is_refused_and_the_key_keeps_working() {
    let server = Server::start();
    let admin = sign_in(&server).await;
    let key = server.create_key("victim", "support");
    assert_eq!(mcp_status(&server, &key).await, StatusCode::OK);

    // The attack of issue 15: a page on another port posts with the admin's cookie, even
    // carrying a valid form token.
    let body = encode(&[("name", "victim"), ("csrf_token", &admin.token)]);
    for site in ["same-site", "cross-site"] {
        let refused = revoke(
            &server,
            background_fetch(FOREIGN_ORIGIN, site, &admin.cookie),
            body.clone(),
        )
        .await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(refused.text().await.unwrap().starts_with("Refused: "));
    }
    // An older browser that sends Origin but no Fetch Metadata.
    let mut old_browser = HeaderMap::new();
    old_browser.insert("origin", HeaderValue::from_static(FOREIGN_ORIGIN));
    old_browser.insert(CONTENT_TYPE, HeaderValue::from_static(FORM));
    old_browser.insert(COOKIE, HeaderValue::from_str(&admin.cookie).unwrap());
    let refused = revoke(&server, old_browser, body.clone()).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains(&format!("came from {FOREIGN_ORIGIN}, not from the console"))
    );
    assert_eq!(mcp_status(&server, &key).await, StatusCode::OK);
    assert!(server_log(&server).contains("refused a console request"));

    // The console's own hydrated page calls the same function in the background: no token
    // travels (ActionForm rebuilds the body), the origin is what admits it.
    let done = revoke(
        &server,
        background_fetch(&server.base, "same-origin", &admin.cookie),
        encode(&[("name", "victim")]),
    )
    .await;
    assert_eq!(
        done.status(),
        StatusCode::OK,
        "{}",
        done.text().await.unwrap()
    );
    assert_eq!(mcp_status(&server, &key).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_form_post_without_the_sessions_form_token_is_refused() {
    let server = Server::start();
    let admin = sign_in(&server).await;
    let key = server.create_key("victim", "support");

    let missing = revoke(
        &server,
        navigation(&server, &admin.cookie),
        encode(&[("name", "victim")]),
    )
    .await;
    assert_eq!(missing.status(), StatusCode::FORBIDDEN);
    assert!(missing.text().await.unwrap().contains("form token"));
    let wrong = revoke(
        &server,
        navigation(&server, &admin.cookie),
        encode(&[("name", "victim"), ("csrf_token", "0123abcd")]),
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    // Another session's token is not this session's.
    let other = sign_in(&server).await;
    let foreign_token = revoke(
        &server,
        navigation(&server, &admin.cookie),
        encode(&[("name", "victim"), ("csrf_token", &other.token)]),
    )
    .await;
    assert_eq!(foreign_token.status(), StatusCode::FORBIDDEN);
    // No Origin and no Fetch Metadata at all (a browser that strips them, or a program):
    // a form body still needs the token.
    let mut bare = HeaderMap::new();
    bare.insert(CONTENT_TYPE, HeaderValue::from_static(FORM));
    bare.insert(COOKIE, HeaderValue::from_str(&admin.cookie).unwrap());
    let stripped = revoke(&server, bare, encode(&[("name", "victim")])).await;
    assert_eq!(stripped.status(), StatusCode::FORBIDDEN);
    assert_eq!(mcp_status(&server, &key).await, StatusCode::OK);

    // The console's own form, as rendered, with its token: revoked, and the browser is sent
    // back to the page it came from.
    let done = revoke(
        &server,
        navigation(&server, &admin.cookie),
        encode(&[("name", "victim"), ("csrf_token", &admin.token)]),
    )
    .await;
    assert!(
        done.status().is_redirection(),
        "{}: {}",
        done.status(),
        done.text().await.unwrap()
    );
    assert_eq!(mcp_status(&server, &key).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn server_functions_ignore_the_form_token_field() {
    let server = Server::start();
    let admin = sign_in(&server).await;
    // A function without arguments, posted by a form navigation with only the token.
    let mut headers = navigation(&server, &admin.cookie);
    headers.insert("accept", HeaderValue::from_static("application/json"));
    let response = http()
        .post(format!("{}/console/api/role_choices", server.base))
        .headers(headers)
        .body(encode(&[("csrf_token", &admin.token)]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.text().await.unwrap().contains("tier-1-support"));
}

#[tokio::test]
async fn a_sign_in_from_another_origin_is_refused_and_grants_no_session() {
    let server = Server::start();
    let password = admin_password(&server);
    let anonymous = open_sign_in(&server).await;

    let mut foreign = navigation(&server, &anonymous.cookie);
    foreign.insert("origin", HeaderValue::from_static(FOREIGN_ORIGIN));
    foreign.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
    let refused = post_sign_in(&server, &anonymous, foreign, &password).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(session_cookie(refused.headers()).is_none());
    let mut no_origin = navigation(&server, &anonymous.cookie);
    no_origin.remove("origin");
    no_origin.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
    let refused = post_sign_in(&server, &anonymous, no_origin, &password).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    // Still anonymous: console pages send the browser to sign in.
    let still_out = page(&server, &anonymous.cookie).await;
    assert_eq!(still_out.status(), StatusCode::SEE_OTHER);
    assert_eq!(still_out.headers()[LOCATION], "/login?next=%2Fusers");

    // From the console's own sign-in page the same request signs in.
    let accepted = post_sign_in(
        &server,
        &anonymous,
        navigation(&server, &anonymous.cookie),
        &password,
    )
    .await;
    assert_eq!(accepted.status(), StatusCode::SEE_OTHER);
    assert_eq!(accepted.headers()[LOCATION], "/");
}

#[tokio::test]
async fn a_sign_in_form_without_its_token_is_sent_back_to_sign_in() {
    let server = Server::start();
    let anonymous = open_sign_in(&server).await;
    let stale = Browser {
        cookie: anonymous.cookie.clone(),
        token: "expired".to_owned(),
    };
    let response = post_sign_in(
        &server,
        &stale,
        navigation(&server, &anonymous.cookie),
        &admin_password(&server),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/login?error=expired");
    assert!(session_cookie(response.headers()).is_none());
}

#[tokio::test]
async fn sign_out_and_retention_from_another_origin_are_refused() {
    let server = Server::start();
    let admin = sign_in(&server).await;
    for (path, body) in [
        ("/logout", encode(&[("csrf_token", &admin.token)])),
        (
            "/console/retention",
            encode(&[
                ("days", "1"),
                ("prune_now", "1"),
                ("csrf_token", &admin.token),
            ]),
        ),
    ] {
        let mut headers = navigation(&server, &admin.cookie);
        headers.insert("origin", HeaderValue::from_static(FOREIGN_ORIGIN));
        headers.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
        let response = http()
            .post(format!("{}{path}", server.base))
            .headers(headers)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let retention = http()
        .get(format!("{}/audit", server.base))
        .header(COOKIE, &admin.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(retention.status(), StatusCode::OK, "still signed in");
    let text = retention.text().await.unwrap();
    assert!(text.contains("Every event is kept"), "retention unchanged");

    let signed_out = http()
        .post(format!("{}/logout", server.base))
        .headers(navigation(&server, &admin.cookie))
        .body(encode(&[("csrf_token", &admin.token)]))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed_out.headers()[LOCATION], "/login?signed_out=1");
}

#[tokio::test]
async fn a_configured_public_origin_may_change_the_console() {
    let server = Server::start_with(&["--public-origin", "https://skillgate.example"]);
    let admin = sign_in(&server).await;
    let key = server.create_key("victim", "support");
    let done = revoke(
        &server,
        background_fetch("https://skillgate.example", "same-origin", &admin.cookie),
        encode(&[("name", "victim")]),
    )
    .await;
    assert_eq!(done.status(), StatusCode::OK);
    assert_eq!(mcp_status(&server, &key).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_session_cookie_is_secure_when_asked_and_plain_on_loopback_by_default() {
    let plain = Server::start();
    let response = http()
        .get(format!("{}/login", plain.base))
        .send()
        .await
        .unwrap();
    let cookie = response.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("skillgate_session="), "{cookie}");
    assert!(!cookie.contains("Secure"), "{cookie}");
    assert!(
        cookie.contains("Max-Age=3600"),
        "a pre-login session lasts an hour: {cookie}"
    );
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));

    let secure = Server::start_with(&["--secure-cookies"]);
    let response = http()
        .get(format!("{}/login", secure.base))
        .send()
        .await
        .unwrap();
    let cookie = response.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("__Host-skillgate_session="), "{cookie}");
    assert!(cookie.contains("Secure"), "{cookie}");
    assert!(cookie.contains("Path=/"), "{cookie}");
}

/// Peak resident memory of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

async fn verifications(server: &Server) -> u64 {
    let text = http()
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("skillgate_password_verifications_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no verification counter in /metrics:\n{text}"))
}

#[tokio::test]
async fn a_burst_of_wrong_passwords_verifies_at_most_the_budget_and_keeps_memory_flat() {
    const BURST: usize = 120;
    const BUDGET: usize = 5; // core::users::MAX_FAILURES_PER_USER
    let server = Server::start();
    let browser = open_sign_in(&server).await;
    let before = verifications(&server).await;
    let peak_before = peak_kib(server.pid());

    let attempts = (0..BURST).map(|i| {
        let headers = navigation(&server, &browser.cookie);
        post_sign_in(&server, &browser, headers, &format!("wrong-{i}"))
    });
    let outcomes: Vec<String> = join_all(attempts)
        .await
        .into_iter()
        .map(|response| {
            assert_eq!(response.status(), StatusCode::SEE_OTHER);
            response.headers()[LOCATION].to_str().unwrap().to_owned()
        })
        .collect();
    let invalid = outcomes
        .iter()
        .filter(|l| *l == "/login?error=invalid")
        .count();
    let throttled = outcomes
        .iter()
        .filter(|l| *l == "/login?error=throttled")
        .count();
    let verified = verifications(&server).await - before;
    let grown_mib = peak_kib(server.pid()).saturating_sub(peak_before) / 1024;
    let summary = format!(
        "burst of {BURST}: {invalid} refused as wrong, {throttled} throttled, \
         {verified} verified, peak memory +{grown_mib} MiB"
    );
    eprintln!("{summary}");
    assert_eq!((invalid, throttled), (BUDGET, BURST - BUDGET), "{summary}");
    assert!(verified <= BUDGET as u64, "{summary}");
    assert!(grown_mib < 100, "{summary}");
}

#[tokio::test]
async fn the_sessions_list_answers_a_hydrated_page_that_sets_no_filter() {
    let server = Server::start();
    let admin = sign_in(&server).await;
    // What the hydrated page posts after a client-side navigation to /sessions: the
    // filter struct with every field empty, which form-encodes to nothing at all.
    let response = http()
        .post(format!("{}/console/api/list_sessions", server.base))
        .headers(background_fetch(&server.base, "same-origin", &admin.cookie))
        .header(CONTENT_TYPE, FORM)
        .body("")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"rows\""), "{body}");
}

#[tokio::test]
async fn a_console_session_ends_after_the_idle_timeout_counted_from_its_last_use() {
    use std::time::{Duration, Instant};
    const IDLE: Duration = Duration::from_secs(4);
    let server = Server::start_with(&["--console-idle-timeout", "4"]);
    let admin = console::sign_in_admin(&server).await;
    let signed_in = Instant::now();
    let home = |cookie: String| {
        let url = format!("{}/", server.base);
        async move { http().get(url).header(COOKIE, cookie).send().await.unwrap() }
    };

    // In use for three timeouts, as a hydrated console is: page loads and server functions.
    let mut uses = 0;
    while signed_in.elapsed() < IDLE * 3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let status = if uses % 2 == 0 {
            home(admin.cookie.clone()).await.status()
        } else {
            http()
                .post(format!("{}/console/api/list_sessions", server.base))
                .headers(background_fetch(&server.base, "same-origin", &admin.cookie))
                .body("")
                .send()
                .await
                .unwrap()
                .status()
        };
        assert_eq!(
            status,
            StatusCode::OK,
            "use {uses}, {:?} after sign-in",
            signed_in.elapsed()
        );
        uses += 1;
    }

    // Then left alone for longer than the timeout: the session is over.
    let last_use = Instant::now();
    tokio::time::sleep(IDLE + Duration::from_secs(1)).await;
    let response = home(admin.cookie.clone()).await;
    assert_eq!(
        response.status(),
        StatusCode::SEE_OTHER,
        "{:?} after the last use",
        last_use.elapsed()
    );
    assert_eq!(response.headers()[LOCATION], "/login");
}

#[tokio::test]
async fn malformed_server_function_arguments_are_a_400_with_a_clear_message_not_a_server_error() {
    let server = Server::start();
    let admin = sign_in(&server).await;
    let own = server.base.clone();
    for (body, says) in [
        ("", "missing field `key_id`"),
        ("{}", "missing field `key_id`"),
        ("key_id=twelve", "malformed"),
    ] {
        let response = http()
            .post(format!("{}/console/api/revoke_grant", server.base))
            .headers(background_fetch(&own, "same-origin", &admin.cookie))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "body {body:?}");
        let text = response.text().await.unwrap();
        assert!(text.contains(says), "body {body:?} answered {text}");
    }
    // The hydrated console still reads a refusal's message: a 4xx carries the same error.
    let log = server_log(&server);
    assert!(
        !log.lines()
            .any(|line| line.contains("revoke_grant") && line.contains("ERROR"))
            && !log.contains("response failed"),
        "bad input was logged as a server error:\n{log}"
    );
}
