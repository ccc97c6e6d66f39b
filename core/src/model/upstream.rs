//! Upstreams: the downstream MCP servers whose tools the gateway executes.

use serde::{Deserialize, Serialize};

use crate::slug::Slug;

/// How the gateway reaches an upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UpstreamKind {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
    },
    /// An MCP server reached over streamable HTTP.
    Http {
        url: String,
        /// PEM certificates trusted for this upstream in addition to the system's roots,
        /// for a server whose certificate an internal CA issued. Public, so part of the
        /// catalog (its credentials are not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_bundle: Option<String>,
    },
    /// An MCP server inside the skillgate process (the curation tools). Its tools are part
    /// of the binary: it is added to every loaded catalog and never stored.
    Builtin,
}

impl UpstreamKind {
    /// An HTTP upstream at `url` that trusts the system's roots only.
    pub fn http(url: impl Into<String>) -> Self {
        Self::Http {
            url: url.into(),
            ca_bundle: None,
        }
    }

    /// The short name stored in the `kind` column.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
            Self::Builtin => "builtin",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    pub name: Slug,
    #[serde(flatten)]
    pub kind: UpstreamKind,
}
