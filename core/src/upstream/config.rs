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
/// their API keys), an HTTP server's bearer token and the extra headers sent beside it
/// (an API key header, a tenant id). Stored apart from the catalog's
/// [`crate::model::UpstreamKind`], which the console, the audit and the API show; these are
/// only ever described by [`UpstreamCredentials::describe`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UpstreamCredentials {
    pub env: BTreeMap<String, Secret>,
    pub bearer: Option<Secret>,
    /// By lower-case header name, each checked by [`check_extra_header`].
    pub headers: BTreeMap<String, Secret>,
}

/// What may be shown about stored credentials: the environment's keys, the extra headers'
/// names and whether a token is set, never a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialSummary {
    pub env_keys: Vec<String>,
    pub bearer: bool,
    #[serde(default)]
    pub header_names: Vec<String>,
}

/// Headers an admin may not set on an upstream: the credential the gateway sends itself
/// (`Authorization`), what addresses and frames the request (`Host`, the hop-by-hop
/// headers of RFC 9110 §7.6.1, the body's length and type), what the MCP transport sends
/// (`Accept`, `Last-Event-Id`, every `Mcp-*`) and the trace context the gateway propagates.
const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-type",
    "accept",
    "last-event-id",
    "traceparent",
    "tracestate",
];

/// Checks one extra header for an HTTP upstream: a valid name that is not reserved (see
/// [`RESERVED_HEADERS`]) and a valid value. Returns the name in lower case, as HTTP/2 sends
/// it, or what is wrong, for the admin.
pub fn check_extra_header(name: &str, value: &str) -> Result<String, String> {
    let name = name.trim();
    let parsed = reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("`{name}` is not an HTTP header name"))?;
    let lower = parsed.as_str();
    if lower == "authorization" {
        return Err(
            "`Authorization` is the bearer token's header: set the token in its own field"
                .to_owned(),
        );
    }
    if RESERVED_HEADERS.contains(&lower) || lower.starts_with("mcp-") {
        return Err(format!(
            "`{name}` is set by the gateway or the MCP transport and cannot be overridden"
        ));
    }
    reqwest::header::HeaderValue::from_str(value)
        .map_err(|_| format!("the value of `{name}` is not a valid HTTP header value"))?;
    Ok(lower.to_owned())
}

impl UpstreamCredentials {
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.bearer.is_none() && self.headers.is_empty()
    }

    pub fn describe(&self) -> CredentialSummary {
        CredentialSummary {
            env_keys: self.env.keys().cloned().collect(),
            bearer: self.bearer.is_some(),
            header_names: self.headers.keys().cloned().collect(),
        }
    }

    /// The JSON the store keeps (the one place values are written out).
    pub fn to_stored_json(&self) -> String {
        let env: BTreeMap<&str, &str> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose()))
            .collect();
        let headers: BTreeMap<&str, &str> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose()))
            .collect();
        serde_json::json!({
            "env": env,
            "bearer": self.bearer.as_ref().map(Secret::expose),
            "headers": headers,
        })
        .to_string()
    }

    pub fn from_stored_json(text: &str) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct Stored {
            #[serde(default)]
            env: BTreeMap<String, Secret>,
            #[serde(default)]
            bearer: Option<Secret>,
            #[serde(default)]
            headers: BTreeMap<String, Secret>,
        }
        let stored: Stored = serde_json::from_str(text)?;
        Ok(Self {
            env: stored.env,
            bearer: stored.bearer,
            headers: stored.headers,
        })
    }
}

impl fmt::Debug for UpstreamCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamCredentials")
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("bearer", &self.bearer.is_some())
            .field("header_names", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Where an upstream MCP server lives.
///
/// Deserializes from `{"transport": "stdio", "command": …, "args": […], "env": {…}}` or
/// `{"transport": "http", "url": …, "bearer": …, "ca_bundle": …, "headers": {…}}`. It is
/// deliberately not `Serialize`: the bearer token, the extra headers and the child's
/// environment (where stdio servers take their API keys) are credentials. The store writes its row through [`StoredUpstreamConfig`]; everything else
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
        /// PEM certificates trusted for this upstream in addition to the system's roots
        /// (an internal CA); checked by [`super::parse_ca_bundle`].
        #[serde(default)]
        ca_bundle: Option<String>,
        /// Sent on every request beside the bearer, each checked by [`check_extra_header`].
        #[serde(default)]
        headers: BTreeMap<String, Secret>,
        /// Dial a plain `http://` URL on a remote host (see
        /// [`crate::model::check_upstream_url`], checked again before connecting).
        #[serde(default)]
        allow_plaintext: bool,
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
            ca_bundle: None,
            headers: BTreeMap::new(),
            allow_plaintext: false,
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
            Self::Http {
                url,
                bearer,
                ca_bundle,
                headers,
                allow_plaintext,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer", bearer)
                .field("ca_bundle", &ca_bundle.is_some())
                .field("header_names", &headers.keys().collect::<Vec<_>>())
                .field("allow_plaintext", allow_plaintext)
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
            UpstreamConfig::Http {
                url,
                bearer,
                ca_bundle,
                headers,
                allow_plaintext,
            } => {
                map.serialize_entry("transport", "http")?;
                map.serialize_entry("allow_plaintext", allow_plaintext)?;
                map.serialize_entry("url", url)?;
                map.serialize_entry("bearer", &bearer.as_ref().map(Secret::expose))?;
                map.serialize_entry("ca_bundle", ca_bundle)?;
                let headers: BTreeMap<&str, &str> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.expose()))
                    .collect();
                map.serialize_entry("headers", &headers)?;
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
    fn debug_output_never_shows_the_bearer_headers_or_env_values() {
        let mut http = UpstreamConfig::http("http://x/mcp", Some(Secret::new("s3cr3t-token")));
        if let UpstreamConfig::Http { headers, .. } = &mut http {
            headers.insert("x-api-key".into(), Secret::new("s3cr3t-header"));
        }
        let credentials = UpstreamCredentials {
            headers: BTreeMap::from([("x-api-key".to_owned(), Secret::new("s3cr3t-stored"))]),
            ..UpstreamCredentials::default()
        };
        let mut stdio = UpstreamConfig::stdio("srv", ["--flag"]);
        if let UpstreamConfig::Stdio { env, .. } = &mut stdio {
            env.insert("API_KEY".into(), "s3cr3t-env".into());
        }
        let shown = format!("{http:?} {stdio:?} {credentials:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(
            shown.contains("API_KEY") && shown.contains("x-api-key"),
            "{shown}"
        );
    }

    #[test]
    fn the_stored_form_round_trips_with_its_credentials() {
        let mut env = BTreeMap::new();
        env.insert("API_KEY".to_owned(), "k".to_owned());
        let with_extras = UpstreamConfig::Http {
            url: "https://example.invalid/mcp".into(),
            bearer: None,
            ca_bundle: Some("-----BEGIN CERTIFICATE-----\n…".into()),
            headers: BTreeMap::from([("x-tenant".to_owned(), Secret::new("acme"))]),
            allow_plaintext: true,
        };
        for config in [
            with_extras,
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
    fn stored_credentials_round_trip_with_their_headers_and_older_rows_still_load() {
        let credentials = UpstreamCredentials {
            bearer: Some(Secret::new("t")),
            headers: BTreeMap::from([("x-api-key".to_owned(), Secret::new("k"))]),
            ..UpstreamCredentials::default()
        };
        let back = UpstreamCredentials::from_stored_json(&credentials.to_stored_json()).unwrap();
        assert_eq!(back, credentials);
        assert_eq!(back.describe().header_names, ["x-api-key"]);
        let older = UpstreamCredentials::from_stored_json(r#"{"env":{},"bearer":"t"}"#).unwrap();
        assert!(older.headers.is_empty());
    }

    #[test]
    fn an_extra_header_is_refused_where_the_gateway_or_the_transport_sets_it() {
        assert_eq!(check_extra_header("X-Api-Key", "k-1").unwrap(), "x-api-key");
        for name in [
            "Authorization",
            "host",
            "Connection",
            "Transfer-Encoding",
            "Upgrade",
            "Mcp-Session-Id",
            "MCP-Protocol-Version",
            "mcp-anything",
            "Accept",
            "traceparent",
        ] {
            let refused = check_extra_header(name, "v").unwrap_err();
            assert!(refused.contains(&format!("`{name}`")), "{refused}");
        }
        assert!(
            check_extra_header("Authorization", "Bearer x")
                .unwrap_err()
                .contains("bearer token")
        );
        assert!(
            check_extra_header("bad header", "v")
                .unwrap_err()
                .contains("not an HTTP header name")
        );
        assert!(
            check_extra_header("X-Ok", "line\nbreak")
                .unwrap_err()
                .contains("not a valid HTTP header value")
        );
    }

    #[test]
    fn a_minimal_stdio_config_deserializes_with_defaults() {
        let config: UpstreamConfig =
            serde_json::from_str(r#"{"transport":"stdio","command":"srv"}"#).unwrap();
        assert_eq!(config, UpstreamConfig::stdio("srv", Vec::<String>::new()));
    }
}
