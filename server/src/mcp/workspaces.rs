//! Which workspace an agent's request is served by (issue #55): its key names it
//! (`sgk_….finance`; no name is the `default` workspace), and that workspace's own keys,
//! gateway, catalog and audit serve the request, so nothing of another workspace is within
//! reach. A workspace is opened on its first request in this process and kept open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use skillgate_core::admin::AdminService;
use skillgate_core::gateway::Gateway;
use skillgate_core::keys::AgentKeys;
use skillgate_core::slug::Slug;
use skillgate_core::store::workspaces::DEFAULT_WORKSPACE;

/// What admission needs of one workspace: its keys, the gateway its calls go through, and
/// its door (the credentials of external subjects are made through it, and refusals of
/// external tokens are audited through `default`'s).
#[derive(Clone)]
pub struct Served {
    pub keys: AgentKeys,
    pub gateway: Arc<Gateway>,
    pub admin: Arc<AdminService>,
}

/// The gateway of the workspace a request was admitted into, in the request's extensions:
/// the one every handler behind admission uses.
#[derive(Clone)]
pub struct CallerGateway(pub Arc<Gateway>);

/// Opens workspace `slug` for serving: `Ok(None)` when there is no such workspace (not
/// registered, or archived).
pub type Opener =
    Arc<dyn Fn(Slug) -> BoxFuture<'static, anyhow::Result<Option<Served>>> + Send + Sync>;

/// The workspaces this process serves: `default` from the start, the others as their first
/// request arrives.
pub struct Workspaces {
    default: Served,
    opener: Option<Opener>,
    opened: Mutex<HashMap<Slug, Served>>,
    /// One opening at a time, so two first requests of a workspace open it once.
    opening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Workspaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspaces").finish_non_exhaustive()
    }
}

impl Workspaces {
    /// Only the `default` workspace (an in-process server, the tests of admission).
    pub fn default_only(default: Served) -> Self {
        Self {
            default,
            opener: None,
            opened: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// The `default` workspace, and the others through `opener`.
    pub fn with_opener(default: Served, opener: Opener) -> Self {
        Self {
            opener: Some(opener),
            ..Self::default_only(default)
        }
    }

    pub fn default_workspace(&self) -> &Served {
        &self.default
    }

    /// The workspace named `name`, opened if it is not yet; `Ok(None)` when there is no such
    /// workspace (a name that is not a slug included). An error is the database's.
    pub async fn get(&self, name: &str) -> anyhow::Result<Option<Served>> {
        if name == DEFAULT_WORKSPACE {
            return Ok(Some(self.default.clone()));
        }
        let Some(opener) = &self.opener else {
            return Ok(None);
        };
        let Ok(slug) = Slug::parse(name) else {
            return Ok(None);
        };
        if let Some(served) = self.cached(&slug) {
            return Ok(Some(served));
        }
        let _one_at_a_time = self.opening.lock().await;
        if let Some(served) = self.cached(&slug) {
            return Ok(Some(served));
        }
        let Some(served) = opener(slug.clone()).await? else {
            return Ok(None);
        };
        tracing::info!(workspace = %slug, "serving a workspace");
        self.opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(slug, served.clone());
        Ok(Some(served))
    }

    fn cached(&self, slug: &Slug) -> Option<Served> {
        self.opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(slug)
            .cloned()
    }
}
