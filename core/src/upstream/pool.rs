//! [`UpstreamPool`]: the configured upstreams by name.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use super::{IdentityHook, UpstreamClient, UpstreamConfig, UpstreamError, UpstreamOptions};

/// Upstream clients by name, shared by every request.
///
/// Lookups take a short read lock and hand out an `Arc`, so callers never wait on each
/// other here; a client's session is shared by all its callers. Replacing or removing an
/// upstream drops the pool's handle: the old session ends (its child is killed) once the
/// calls still using it have finished.
#[derive(Default)]
pub struct UpstreamPool {
    clients: RwLock<HashMap<String, Arc<UpstreamClient>>>,
    options: UpstreamOptions,
    /// Given to every client: told when an upstream presents another identity.
    on_identity_change: Option<IdentityHook>,
}

impl std::fmt::Debug for UpstreamPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamPool")
            .field("clients", &self.clients)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl UpstreamPool {
    pub fn new(options: UpstreamOptions) -> Self {
        Self {
            clients: RwLock::default(),
            options,
            on_identity_change: None,
        }
    }

    /// With `hook` told whenever an upstream presents an identity other than its pin.
    pub fn with_identity_hook(mut self, hook: IdentityHook) -> Self {
        self.on_identity_change = Some(hook);
        self
    }

    /// Adds or reconfigures `name`. An unchanged config keeps the running session.
    pub fn upsert(&self, name: &str, config: UpstreamConfig) {
        let mut clients = self.clients.write().unwrap_or_else(PoisonError::into_inner);
        if clients.get(name).is_some_and(|c| *c.config() == config) {
            return;
        }
        let client = UpstreamClient::with_options(name, config, self.options.clone())
            .with_identity_hook(self.on_identity_change.clone());
        clients.insert(name.to_owned(), Arc::new(client));
    }

    /// Removes `name`; returns whether it was configured.
    pub fn remove(&self, name: &str) -> bool {
        let mut clients = self.clients.write().unwrap_or_else(PoisonError::into_inner);
        clients.remove(name).is_some()
    }

    pub fn get(&self, name: &str) -> Result<Arc<UpstreamClient>, UpstreamError> {
        let clients = self.clients.read().unwrap_or_else(PoisonError::into_inner);
        clients
            .get(name)
            .cloned()
            .ok_or_else(|| UpstreamError::Unknown {
                upstream: name.to_owned(),
            })
    }

    /// Configured names, sorted.
    pub fn names(&self) -> Vec<String> {
        let clients = self.clients.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<_> = clients.keys().cloned().collect();
        names.sort();
        names
    }

    /// Pings `name` (starting it if needed) and returns the round-trip time.
    pub async fn health(&self, name: &str, timeout: Duration) -> Result<Duration, UpstreamError> {
        self.get(name)?.ping(timeout).await
    }
}
