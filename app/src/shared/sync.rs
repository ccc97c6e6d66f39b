//! What one upstream's tool sync did: shared by the upstreams page and the server binary,
//! which runs the sync.

use serde::{Deserialize, Serialize};

/// What one upstream's tool sync did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncSummary {
    pub upstream: String,
    pub tools: usize,
    /// Catalog tools the upstream no longer lists: kept and flagged, not dropped.
    pub missing: Vec<String>,
    pub error: Option<String>,
}
