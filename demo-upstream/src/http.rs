//! The demo upstream over MCP streamable HTTP, for benchmarks and for gateways that reach
//! their upstreams over the network.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::serve::ListenerExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::{DemoUpstream, DemoUpstreamOptions};

pub const MCP_PATH: &str = "/mcp";

/// The `/mcp` route serving `upstream`. Every MCP session shares the one handler, so all
/// clients see the same books, as they do through the single stdio connection.
pub fn router(upstream: Arc<DemoUpstream>) -> Router {
    let service = StreamableHttpService::new(
        move || Ok(upstream.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    Router::new().route_service(MCP_PATH, service)
}

/// Serves the demo upstream on `addr` until Ctrl-C; prints the endpoint URL to stdout.
pub async fn serve_http(options: DemoUpstreamOptions, addr: SocketAddr) -> anyhow::Result<()> {
    let upstream = Arc::new(DemoUpstream::new(options.with_env_defaults())?);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    // Small MCP responses must not wait on Nagle's algorithm behind a delayed ACK.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
    });
    tracing::info!(address = %local, tools = upstream.specs.len(), "demo upstream serving over streamable HTTP");
    println!("demo upstream listening on http://{local}{MCP_PATH}");
    axum::serve(listener, router(upstream))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
