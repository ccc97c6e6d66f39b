//! The Skillgate server: the console, the enforcing MCP endpoint and the command line.
//!
//! Layers, each importing only the ones below it: [`cmd`] (the command line; `serve` wires
//! the services and listens) → `http` (one router per area, merged by `http::router`) →
//! [`mcp`] (the `/mcp` endpoint) → `state` and `client_addr` (what every handler reads) →
//! skillgate-core. The `skillgate` binary (src/main.rs) parses the command line and calls
//! [`run`]; skillgate-dev serves [`mcp::router`] in process for its context-cost study.

mod client_addr;
pub mod cmd;
mod http;
pub mod mcp;
mod state;

pub use crate::cmd::run;
pub use crate::http::metrics::METRICS_PATH;
pub use crate::mcp::MCP_PATH;
