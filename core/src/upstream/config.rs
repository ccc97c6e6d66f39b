//! How to reach an upstream: a stdio command or a streamable HTTP URL.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use tokio::io::DuplexStream;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

/// A credential that never leaves the process by accident: its `Debug` is redacted and it
/// does not implement `Serialize`. Reading it is an explicit [`Secret::expose`].
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

/// The secrets an upstream needs: a stdio server's environment (where such servers take
/// their API keys) and an HTTP server's bearer token. Stored apart from the catalog's
/// [`crate::model::UpstreamKind`], which the console, the audit and the API show; these are
/// only ever described by [`UpstreamCredentials::describe`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UpstreamCredentials {
    pub env: BTreeMap<String, Secret>,
    pub bearer: Option<Secret>,
}

/// What may be shown about stored credentials: the environment's keys and whether a
/// token is set, never a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialSummary {
    pub env_keys: Vec<String>,
    pub bearer: bool,
}

impl UpstreamCredentials {
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.bearer.is_none()
    }

    pub fn describe(&self) -> CredentialSummary {
        CredentialSummary {
            env_keys: self.env.keys().cloned().collect(),
            bearer: self.bearer.is_some(),
        }
    }

    /// The JSON the store keeps (the one place values are written out).
    pub fn to_stored_json(&self) -> String {
        let env: BTreeMap<&str, &str> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose()))
            .collect();
        serde_json::json!({ "env": env, "bearer": self.bearer.as_ref().map(Secret::expose) })
            .to_string()
    }

    pub fn from_stored_json(text: &str) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct Stored {
            #[serde(default)]
            env: BTreeMap<String, Secret>,
            #[serde(default)]
            bearer: Option<Secret>,
        }
        let stored: Stored = serde_json::from_str(text)?;
        Ok(Self {
            env: stored.env,
            bearer: stored.bearer,
        })
    }
}

impl fmt::Debug for UpstreamCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamCredentials")
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("bearer", &self.bearer.is_some())
            .finish()
    }
}

/// Where an upstream MCP server lives.
///
/// Deserializes from `{"transport": "stdio", "command": …, "args": […], "env": {…}}` or
/// `{"transport": "http", "url": …, "bearer": …}`. It is deliberately not `Serialize`: the
/// bearer token and the child's environment (where stdio servers take their API keys) are
/// credentials. The store writes its row through [`StoredUpstreamConfig`]; everything else
/// (logs, console, API) gets `Debug`, which shows env keys but never their values.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case", deny_unknown_fields)]
pub enum UpstreamConfig {
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        #[serde(default)]
        bearer: Option<Secret>,
    },
    /// An rmcp server in this process, reached over an in-memory duplex stream.
    #[serde(skip)]
    InProcess(InProcessServer),
}

/// Starts an in-process MCP server on the server end of an in-memory duplex stream. The
/// closure spawns the server task and returns at once; the pool connects its client end.
#[derive(Clone)]
pub struct InProcessServer {
    name: &'static str,
    start: Arc<dyn Fn(DuplexStream) + Send + Sync>,
}

impl InProcessServer {
    pub fn new(name: &'static str, start: impl Fn(DuplexStream) + Send + Sync + 'static) -> Self {
        Self {
            name,
            start: Arc::new(start),
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(super) fn start(&self, io: DuplexStream) {
        (self.start)(io)
    }
}

/// Two handles are the same server only when they share the start closure.
impl PartialEq for InProcessServer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.start, &other.start)
    }
}

impl Eq for InProcessServer {}

impl fmt::Debug for InProcessServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessServer")
            .field("name", &self.name)
            .finish()
    }
}

impl UpstreamConfig {
    pub fn stdio(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
        }
    }

    pub fn http(url: impl Into<String>, bearer: Option<Secret>) -> Self {
        Self::Http {
            url: url.into(),
            bearer,
        }
    }

    /// The command or URL, for messages.
    pub fn target(&self) -> &str {
        match self {
            Self::Stdio { command, .. } => command,
            Self::Http { url, .. } => url,
            Self::InProcess(server) => server.name(),
        }
    }
}

impl fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env_keys", &env.keys().collect::<Vec<_>>())
                .finish(),
            Self::Http { url, bearer } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer", bearer)
                .finish(),
            Self::InProcess(server) => server.fmt(f),
        }
    }
}

/// The one serialization of an [`UpstreamConfig`] that includes its credentials, for the
/// database row it is loaded from again. Nothing else should wrap a config in this.
pub struct StoredUpstreamConfig<'a>(pub &'a UpstreamConfig);

impl Serialize for StoredUpstreamConfig<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            UpstreamConfig::Stdio { command, args, env } => {
                map.serialize_entry("transport", "stdio")?;
                map.serialize_entry("command", command)?;
                map.serialize_entry("args", args)?;
                map.serialize_entry("env", env)?;
            }
            UpstreamConfig::Http { url, bearer } => {
                map.serialize_entry("transport", "http")?;
                map.serialize_entry("url", url)?;
                map.serialize_entry("bearer", &bearer.as_ref().map(Secret::expose))?;
            }
            UpstreamConfig::InProcess(_) => {
                return Err(serde::ser::Error::custom(
                    "an in-process upstream lives in code and is never stored",
                ));
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_bearer_or_env_values() {
        let http = UpstreamConfig::http("http://x/mcp", Some(Secret::new("s3cr3t-token")));
        let mut stdio = UpstreamConfig::stdio("srv", ["--flag"]);
        if let UpstreamConfig::Stdio { env, .. } = &mut stdio {
            env.insert("API_KEY".into(), "s3cr3t-env".into());
        }
        let shown = format!("{http:?} {stdio:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("API_KEY"), "{shown}");
    }

    #[test]
    fn the_stored_form_round_trips_with_its_credentials() {
        let mut env = BTreeMap::new();
        env.insert("API_KEY".to_owned(), "k".to_owned());
        for config in [
            UpstreamConfig::http("https://example.invalid/mcp", Some(Secret::new("t"))),
            UpstreamConfig::http("https://example.invalid/mcp", None),
            UpstreamConfig::Stdio {
                command: "srv".into(),
                args: vec!["a".into()],
                env,
            },
        ] {
            let json = serde_json::to_string(&StoredUpstreamConfig(&config)).unwrap();
            let back: UpstreamConfig = serde_json::from_str(&json).unwrap();
            assert_eq!(back, config);
        }
    }

    #[test]
    fn a_minimal_stdio_config_deserializes_with_defaults() {
        let config: UpstreamConfig =
            serde_json::from_str(r#"{"transport":"stdio","command":"srv"}"#).unwrap();
        assert_eq!(config, UpstreamConfig::stdio("srv", Vec::<String>::new()));
    }
}
