//! Startup sync of the catalog's upstreams: register each in the upstream pool, discover its
//! tools with `tools/list`, save them to the catalog against the pins (what no admin has
//! reviewed is quarantined, audited) and swap in a recompiled snapshot.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use skillgate_app::shared::SyncSummary;
use skillgate_app::shared::ssr::UpstreamOps;

use skillgate_core::admin::AdminService;
use skillgate_core::model::{Upstream, UpstreamIdentity, UpstreamKind};
use skillgate_core::store::catalog::ToolSync;
use skillgate_core::upstream::{IdentityHook, UpstreamConfig, UpstreamCredentials, UpstreamPool};

/// Upper bound of one upstream's discovery (start, handshake and `tools/list`).
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(45);

/// What the sync did for one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    pub upstream: String,
    /// Tools the upstream listed (0 when discovery failed).
    pub tools: usize,
    /// Tools the catalog has for this upstream that it no longer lists. They are kept, with
    /// their last known definition, until an admin removes them.
    pub missing: Vec<String>,
    /// Tools this sync quarantined: new ones, and pinned ones whose definition changed.
    pub quarantined: Vec<String>,
    /// Tools released from quarantine: the upstream offers their pinned definition again.
    pub released: Vec<String>,
    /// Why discovery or saving failed; the upstream's catalog entries are then unchanged.
    pub error: Option<String>,
}

impl SyncReport {
    fn failed(upstream: &str, error: impl ToString) -> Self {
        Self {
            upstream: upstream.to_owned(),
            tools: 0,
            missing: Vec::new(),
            quarantined: Vec::new(),
            released: Vec::new(),
            error: Some(error.to_string()),
        }
    }

    fn saved(upstream: &str, sync: ToolSync) -> Self {
        let named = |action: &str| {
            sync.changes
                .iter()
                .filter(|c| c.action == action)
                .map(|c| c.tool.clone())
                .collect()
        };
        Self {
            upstream: upstream.to_owned(),
            tools: sync.listed,
            quarantined: named("tool.quarantine"),
            released: named("tool.unquarantine"),
            missing: sync.missing,
            error: None,
        }
    }
}

/// How the pool reaches an upstream of the catalog, with its stored credentials (a stdio
/// child's environment, an HTTP bearer token and extra headers); `None` for a built-in upstream, which the
/// server registers itself.
pub fn upstream_config(
    kind: &UpstreamKind,
    credentials: Option<&UpstreamCredentials>,
) -> Option<UpstreamConfig> {
    let credentials = credentials.cloned().unwrap_or_default();
    match kind {
        UpstreamKind::Stdio { command, args } => Some(UpstreamConfig::Stdio {
            command: command.clone(),
            args: args.clone(),
            env: credentials
                .env
                .into_iter()
                .map(|(key, value)| (key, value.expose().to_owned()))
                .collect(),
        }),
        UpstreamKind::Http {
            url,
            ca_bundle,
            allow_plaintext,
        } => Some(UpstreamConfig::Http {
            url: url.clone(),
            bearer: credentials.bearer,
            ca_bundle: ca_bundle.clone(),
            headers: credentials.headers,
            allow_plaintext: *allow_plaintext,
        }),
        UpstreamKind::Builtin => None,
    }
}

/// Adds every upstream to the pool (an unchanged one keeps its running session; a changed
/// command, URL or credential restarts it).
/// Keeps this process in step with catalog changes saved elsewhere (another replica, or
/// another process on the same SQLite file): every `every`, when the stored catalog moved,
/// recompiles the live snapshot and registers the stored upstreams again (a config that did
/// not change keeps its running session; an upstream deleted elsewhere is dropped).
pub fn spawn_catalog_follow(service: Arc<AdminService>, pool: Arc<UpstreamPool>, every: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match follow_once(&service, &pool).await {
                Ok(true) => tracing::info!(
                    revision = %service.live().revision(),
                    "the stored catalog changed elsewhere: reloaded"
                ),
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "could not check the stored catalog"),
            }
        }
    });
}

async fn follow_once(service: &AdminService, pool: &UpstreamPool) -> anyhow::Result<bool> {
    if !service.reload_if_moved().await? {
        return Ok(false);
    }
    let store = service.store();
    let stored = store.list_upstreams().await?;
    register_upstreams(pool, &stored, &store.upstream_credentials().await?);
    for name in pool.names() {
        let builtin = name == skillgate_core::revisions::curator::CURATION_UPSTREAM;
        if !builtin && !stored.iter().any(|u| u.name.as_str() == name) {
            pool.remove(&name);
        }
    }
    Ok(true)
}

pub fn register_upstreams(
    pool: &UpstreamPool,
    upstreams: &[Upstream],
    credentials: &BTreeMap<String, UpstreamCredentials>,
) {
    for upstream in upstreams {
        let stored = credentials.get(upstream.name.as_str());
        if let Some(config) = upstream_config(&upstream.kind, stored) {
            pool.upsert(upstream.name.as_str(), config);
        }
    }
}

/// Registers the catalog's upstreams, discovers their tools concurrently and saves what
/// each listed against the pins, through the admin door (quarantines and releases are
/// audited with the change, and the live catalog is swapped after each upstream). One
/// report per upstream; a failing upstream neither blocks the others nor changes its own
/// catalog entries.
pub async fn sync_all(service: &AdminService, pool: &UpstreamPool) -> Vec<SyncReport> {
    sync_all_within(service, pool, DISCOVERY_TIMEOUT).await
}

pub async fn sync_all_within(
    service: &AdminService,
    pool: &UpstreamPool,
    timeout: Duration,
) -> Vec<SyncReport> {
    let store = service.store();
    let upstreams = match store.list_upstreams().await {
        Ok(upstreams) => upstreams,
        Err(error) => {
            tracing::error!(%error, "upstream sync: cannot read the catalog's upstreams");
            return Vec::new();
        }
    };
    let credentials = match store.upstream_credentials().await {
        Ok(credentials) => credentials,
        Err(error) => {
            tracing::error!(%error, "upstream sync: cannot read upstream credentials");
            return upstreams
                .iter()
                .map(|u| SyncReport::failed(u.name.as_str(), &error))
                .collect();
        }
    };
    register_upstreams(pool, &upstreams, &credentials);
    // Each connection must present the pinned identity (taken at this endpoint).
    let pins = match store.upstream_identities().await {
        Ok(pins) => pins,
        Err(error) => {
            tracing::error!(%error, "upstream sync: cannot read the pinned upstream identities");
            return upstreams
                .iter()
                .map(|u| SyncReport::failed(u.name.as_str(), &error))
                .collect();
        }
    };
    let pins = &pins;

    let discovered = futures::future::join_all(upstreams.iter().map(|upstream| async move {
        let name = upstream.name.as_str();
        let client = pool.get(name).map_err(|e| e.to_string())?;
        let endpoint = endpoint(&upstream.kind);
        client.pin_identity(
            pins.iter()
                .find(|p| p.upstream == name && p.endpoint == endpoint)
                .map(|p| p.pinned.clone()),
        );
        match tokio::time::timeout(timeout, client.list_tools()).await {
            Ok(listed) => listed.map_err(|e| e.to_string()),
            Err(_) => Err(format!("tools/list did not finish within {timeout:?}")),
        }
    }))
    .await;

    let mut reports = Vec::with_capacity(upstreams.len());
    // Saved one after another: SQLite has one writer, and each save is its own transaction.
    for (upstream, listed) in upstreams.iter().zip(discovered) {
        let name = upstream.name.as_str();
        // The identity first: a changed one quarantines the upstream whatever it listed.
        if let Ok(client) = pool.get(name)
            && let Some(seen) = client.seen_identity()
        {
            match service
                .sync_identity(&upstream.name, &endpoint(&upstream.kind), &seen)
                .await
            {
                Ok(Some(change))
                    if change.action == "upstream.identity_pin"
                        || change.action == "upstream.identity_version" =>
                {
                    client.pin_identity(Some(seen));
                }
                Ok(_) => {}
                Err(error) => {
                    let report = SyncReport::failed(name, error);
                    log(&report);
                    reports.push(report);
                    continue;
                }
            }
        }
        let report = match listed {
            Err(error) => SyncReport::failed(name, error),
            Ok(listed) => match service.sync_tools(&upstream.name, listed).await {
                Ok(sync) => SyncReport::saved(name, sync),
                Err(error) => SyncReport::failed(name, error),
            },
        };
        log(&report);
        reports.push(report);
    }
    reports
}

/// What an upstream's identity is pinned against: its config as stored (an admin who
/// points it elsewhere gets a new pin at the next sync, not a quarantine).
pub fn endpoint(kind: &UpstreamKind) -> String {
    serde_json::to_string(kind).unwrap_or_default()
}

/// Records an identity change a connection met (a reconnect that presented another
/// certificate key or `serverInfo`) as the sync would, without waiting for the next sync:
/// another party is quarantined and its tools' calls refused from the next decision on; an
/// upgrade (a new version alone) is pinned and audited.
pub fn identity_hook(service: Arc<AdminService>) -> IdentityHook {
    Arc::new(move |upstream: &str, offered: UpstreamIdentity| {
        let (service, upstream) = (service.clone(), upstream.to_owned());
        tokio::spawn(async move {
            let stored = match service.store().list_upstreams().await {
                Ok(stored) => stored,
                Err(error) => {
                    tracing::error!(upstream, %error, "cannot record an upstream identity change");
                    return;
                }
            };
            let Some(found) = stored.iter().find(|u| u.name.as_str() == upstream) else {
                return;
            };
            if let Err(error) = service
                .sync_identity(&found.name, &endpoint(&found.kind), &offered)
                .await
            {
                tracing::error!(upstream, %error, "cannot record an upstream identity change");
            }
        });
    })
}

/// Runs [`sync_all`] in the background, so a slow or broken upstream never delays startup.
pub fn spawn_sync(
    service: Arc<AdminService>,
    pool: Arc<UpstreamPool>,
) -> tokio::task::JoinHandle<Vec<SyncReport>> {
    tokio::spawn(async move { sync_all(&service, &pool).await })
}

/// The console's handle on the upstream pool: health pings and on-demand syncs, the same
/// sync the server runs at startup.
pub struct ConsoleUpstreams {
    pub service: Arc<AdminService>,
    pub pool: Arc<UpstreamPool>,
    /// The last on-demand sync's reports, for the page after a form post's redirect. A
    /// display cache only: losing it (restart, another replica) loses nothing saved.
    pub last: Arc<std::sync::Mutex<Vec<SyncSummary>>>,
}

/// How long the console waits for a health ping.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

impl UpstreamOps for ConsoleUpstreams {
    fn health(
        &self,
        upstream: String,
    ) -> Pin<Box<dyn Future<Output = Result<u64, String>> + Send>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            pool.health(&upstream, HEALTH_TIMEOUT)
                .await
                .map(|rtt| u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX))
                .map_err(|e| e.to_string())
        })
    }

    fn last_sync(&self) -> Vec<SyncSummary> {
        self.last.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn sync(&self) -> Pin<Box<dyn Future<Output = Vec<SyncSummary>> + Send>> {
        let (service, pool) = (self.service.clone(), self.pool.clone());
        let last = self.last.clone();
        Box::pin(async move {
            let reports: Vec<SyncSummary> = sync_all(&service, &pool)
                .await
                .into_iter()
                .map(|r| SyncSummary {
                    upstream: r.upstream,
                    tools: r.tools,
                    missing: r.missing,
                    error: r.error,
                })
                .collect();
            if let Ok(mut kept) = last.lock() {
                kept.clone_from(&reports);
            }
            reports
        })
    }
}

fn log(report: &SyncReport) {
    let upstream = report.upstream.as_str();
    if let Some(error) = &report.error {
        tracing::warn!(upstream, %error, "upstream sync failed; its catalog tools are unchanged");
        return;
    }
    tracing::info!(upstream, tools = report.tools, "upstream tools synced");
    if !report.quarantined.is_empty() {
        tracing::warn!(
            upstream,
            quarantined = ?report.quarantined,
            "tools are quarantined until an admin admits them: new, or their definition differs from the pin"
        );
    }
    if !report.released.is_empty() {
        tracing::info!(
            upstream,
            released = ?report.released,
            "tools left quarantine: their upstream offers the pinned definition again"
        );
    }
    if !report.missing.is_empty() {
        tracing::warn!(
            upstream,
            missing = ?report.missing,
            "tools in the catalog are no longer listed by their upstream; kept until an admin removes them"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use skillgate_core::audit::AuditLog;
    use skillgate_core::model::ToolSpec;
    use skillgate_core::policy::CatalogHandle;
    use skillgate_core::slug::Slug;
    use skillgate_core::store::Store;
    use skillgate_core::upstream::Secret;

    fn upstream(name: &str, kind: UpstreamKind) -> Upstream {
        Upstream {
            name: Slug::parse(name).unwrap(),
            kind,
        }
    }

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            sensitive_args: Vec::new(),
        }
    }

    async fn temp_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("sync.db").display());
        (dir, Store::open(&url).await.unwrap())
    }

    /// The admin service over `store`, and the live catalog it swaps.
    async fn service(store: &Store) -> (Arc<AdminService>, Arc<CatalogHandle>) {
        let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
        let audit = AuditLog::new(store.clone());
        let service = AdminService::new(store.clone(), audit, catalog.clone());
        (Arc::new(service), catalog)
    }

    #[test]
    fn catalog_upstreams_map_to_stdio_and_http_pool_configs() {
        let stdio = UpstreamKind::Stdio {
            command: "/usr/bin/skillgate".into(),
            args: vec!["demo-upstream".into()],
        };
        let http = UpstreamKind::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            ca_bundle: None,
            allow_plaintext: false,
        };
        assert_eq!(
            upstream_config(&stdio, None),
            Some(UpstreamConfig::stdio(
                "/usr/bin/skillgate",
                ["demo-upstream"]
            ))
        );
        assert_eq!(
            upstream_config(&http, None),
            Some(UpstreamConfig::http("http://127.0.0.1:9/mcp", None))
        );
        assert_eq!(upstream_config(&UpstreamKind::Builtin, None), None);

        let pool = UpstreamPool::default();
        register_upstreams(
            &pool,
            &[upstream("demo", stdio), upstream("billing", http.clone())],
            &BTreeMap::new(),
        );
        assert_eq!(pool.names(), ["billing", "demo"]);
        assert_eq!(
            *pool.get("billing").unwrap().config(),
            upstream_config(&http, None).unwrap()
        );
    }

    #[test]
    fn stored_credentials_reach_the_stdio_environment_and_the_http_bearer_and_headers() {
        let credentials = UpstreamCredentials {
            env: [("API_KEY".to_owned(), Secret::new("k-123"))].into(),
            bearer: Some(Secret::new("t-456")),
            headers: [("x-tenant".to_owned(), Secret::new("acme"))].into(),
        };
        let stdio = UpstreamKind::Stdio {
            command: "srv".into(),
            args: vec![],
        };
        let Some(UpstreamConfig::Stdio { env, .. }) = upstream_config(&stdio, Some(&credentials))
        else {
            panic!("a stdio config");
        };
        assert_eq!(env.get("API_KEY").map(String::as_str), Some("k-123"));
        let http = UpstreamKind::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            ca_bundle: Some("PEM".into()),
            allow_plaintext: false,
        };
        assert_eq!(
            upstream_config(&http, Some(&credentials)),
            Some(UpstreamConfig::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                bearer: Some(Secret::new("t-456")),
                ca_bundle: Some("PEM".into()),
                headers: [("x-tenant".to_owned(), Secret::new("acme"))].into(),
                allow_plaintext: false,
            })
        );
        // A changed credential is a changed config: the pool restarts the upstream.
        let pool = UpstreamPool::default();
        let upstreams = [upstream("demo", stdio)];
        register_upstreams(&pool, &upstreams, &BTreeMap::new());
        let before = pool.get("demo").unwrap();
        let stored = BTreeMap::from([("demo".to_owned(), credentials.clone())]);
        register_upstreams(&pool, &upstreams, &stored);
        assert!(!Arc::ptr_eq(&before, &pool.get("demo").unwrap()));
    }

    #[test]
    fn registering_an_unchanged_upstream_keeps_its_client() {
        let pool = UpstreamPool::default();
        let upstreams = [upstream(
            "demo",
            UpstreamKind::Stdio {
                command: "srv".into(),
                args: vec![],
            },
        )];
        register_upstreams(&pool, &upstreams, &BTreeMap::new());
        let first = pool.get("demo").unwrap();
        register_upstreams(&pool, &upstreams, &BTreeMap::new());
        assert!(Arc::ptr_eq(&first, &pool.get("demo").unwrap()));
    }

    #[tokio::test]
    async fn an_upstream_that_cannot_start_yields_an_error_report_and_leaves_the_catalog_alone() {
        let (_dir, store) = temp_store().await;
        let broken = upstream(
            "broken",
            UpstreamKind::Stdio {
                command: "/nonexistent/skillgate-test-upstream".into(),
                args: vec![],
            },
        );
        store.upsert_upstream(&broken).await.unwrap();
        store
            .seed_tools(&broken.name, &[spec("lookup", "look up")])
            .await
            .unwrap();
        let (service, catalog) = service(&store).await;
        let before = catalog.load();
        let pool = UpstreamPool::default();

        let reports = sync_all_within(&service, &pool, Duration::from_secs(10)).await;

        assert_eq!(reports.len(), 1);
        let report = &reports[0];
        assert_eq!((report.upstream.as_str(), report.tools), ("broken", 0));
        let error = report.error.as_deref().expect("an error");
        assert!(error.contains("skillgate-test-upstream"), "{error}");
        assert_eq!(pool.names(), ["broken"]);
        let tools = store.list_tools().await.unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].spec.description, "look up");
        assert!(Arc::ptr_eq(&before, &catalog.load()), "catalog was swapped");
    }

    /// The demo upstream served over streamable HTTP on a loopback port of this process.
    async fn demo_upstream_url() -> String {
        use skillgate_demo_upstream::{DemoUpstream, DemoUpstreamOptions, http_router};
        let demo = Arc::new(DemoUpstream::new(DemoUpstreamOptions::default()).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(axum::serve(listener, http_router(demo)).into_future());
        url
    }

    #[tokio::test]
    async fn the_demo_upstreams_tools_are_saved_and_compiled_while_a_broken_one_fails_alone() {
        let (_dir, store) = temp_store().await;
        let demo = upstream(
            "demo",
            UpstreamKind::Http {
                url: demo_upstream_url().await,
                ca_bundle: None,
                allow_plaintext: false,
            },
        );
        let broken = upstream(
            "broken",
            UpstreamKind::Stdio {
                command: "/nonexistent/skillgate-test-upstream".into(),
                args: vec![],
            },
        );
        store.upsert_upstream(&demo).await.unwrap();
        store.upsert_upstream(&broken).await.unwrap();
        store
            .seed_tools(&demo.name, &[spec("retired_tool", "no longer served")])
            .await
            .unwrap();
        let (service, catalog) = service(&store).await;
        // The built-in curation tools are in every catalog; count the stored ones.
        let stored = |catalog: &CatalogHandle| {
            catalog
                .load()
                .catalog()
                .tools
                .iter()
                .filter(|t| t.upstream.as_str() != "curation")
                .count()
        };
        assert_eq!(stored(&catalog), 1);
        let pool = Arc::new(UpstreamPool::default());

        let reports = spawn_sync(service.clone(), pool.clone()).await.unwrap();

        let by_name: BTreeMap<_, _> = reports.iter().map(|r| (r.upstream.as_str(), r)).collect();
        assert!(by_name["broken"].error.is_some());
        let synced = by_name["demo"];
        assert_eq!(synced.error, None);
        assert_eq!(
            synced.tools,
            skillgate_core::demo::tools::tool_specs().len()
        );
        assert_eq!(synced.missing, ["retired_tool"]);
        let tools = store.list_tools().await.unwrap();
        assert_eq!(tools.len(), synced.tools + 1);
        assert!(tools.iter().all(|t| t.upstream.as_str() == "demo"));
        assert!(tools.iter().any(|t| t.spec.name == "retired_tool"));
        assert_eq!(stored(&catalog), synced.tools + 1);
        // Nobody admitted the demo's tools in this database: each arrived quarantined.
        assert_eq!(synced.quarantined.len(), synced.tools);
        let live = catalog.load();
        assert!(
            live.catalog()
                .tools
                .iter()
                .filter(|t| t.upstream.as_str() == "demo" && t.spec.name != "retired_tool")
                .all(|t| t
                    .quarantine
                    .as_deref()
                    .is_some_and(|r| r.starts_with("it is new"))),
            "every new demo tool is quarantined as new"
        );
        assert_eq!(live.tool("retired_tool").unwrap().quarantine, None);
        // Flagged for the console, with the time it was first missed, and only it.
        let missing = store.missing_tools().await.unwrap();
        assert_eq!(missing.keys().collect::<Vec<_>>(), ["retired_tool"]);
        let first_missed = missing["retired_tool"].clone();
        let again = sync_all(&service, &pool).await;
        assert!(
            again.iter().all(|r| r.quarantined.is_empty()),
            "an unchanged offer is not quarantined twice: {again:?}"
        );
        assert_eq!(
            store.missing_tools().await.unwrap()["retired_tool"],
            first_missed
        );
        // Served again, it is no longer flagged.
        store.mark_missing_tools(&demo.name, &[]).await.unwrap();
        assert!(store.missing_tools().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn no_upstreams_means_no_reports() {
        let (_dir, store) = temp_store().await;
        let (service, _) = service(&store).await;
        let pool = UpstreamPool::default();
        assert!(sync_all(&service, &pool).await.is_empty());
        assert!(pool.names().is_empty());
    }
}
