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
    Http { url: String },
    /// An MCP server inside the skillgate process (the curation tools). Its tools are part
    /// of the binary: it is added to every loaded catalog and never stored.
    Builtin,
}

impl UpstreamKind {
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
