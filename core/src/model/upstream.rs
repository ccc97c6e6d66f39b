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
}

impl UpstreamKind {
    /// The short name stored in the `kind` column.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    pub name: Slug,
    #[serde(flatten)]
    pub kind: UpstreamKind,
}
