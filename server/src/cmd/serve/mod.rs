//! `skillgate serve`: opens the database, wires the services and background tasks, builds
//! the router ([`crate::http::router`]) and listens ([`listen`]) until Ctrl-C or SIGTERM.

mod admission;
pub mod catalog_watch;
pub mod listen;
mod shares;
pub mod telemetry;
mod unread_body;
pub mod upstream_sync;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use leptos::prelude::*;
use skillgate_app::login::{Passwords, SignInOptions};
use skillgate_app::preload::ssr::SplitManifest;
use skillgate_app::shared::ssr::ConsoleContext;
use skillgate_core::admin::AdminService;
use skillgate_core::api_tokens::ApiTokens;
use skillgate_core::audit::checkpoint;
use skillgate_core::audit::{AuditLog, CheckpointSigner};
use skillgate_core::console_sso::{ConsoleSso, PasswordSignIn};
use skillgate_core::gateway::{Gateway, GatewayOptions};
use skillgate_core::holds::Holds;
use skillgate_core::holds::notify::{HoldNotifier, RetryPolicy};
use skillgate_core::keys::AgentKeys;
use skillgate_core::metrics::Metrics;
use skillgate_core::oauth::OAuthService;
use skillgate_core::policy::CatalogHandle;
use skillgate_core::revisions::Revisions;
use skillgate_core::revisions::curator::{CURATION_UPSTREAM, in_process_config};
use skillgate_core::slug::Slug;
use skillgate_core::store::{Store, StoreError};
use skillgate_core::upstream::UpstreamPool;
use skillgate_core::users::Users;
use tower_sessions::cookie::SameSite;
use tower_sessions::session_store::ExpiredDeletion;
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::cmd::cli::ServeArgs;
use crate::cmd::{key, signing_key};
use crate::http::console_guard::ConsoleGuard;
use crate::http::{self, api, compliance, console_auth, oauth};
use crate::mcp;
use crate::mcp::workspaces::Served;
use crate::state::AppState;

/// What signs the audit chains' tips: periodically while serving, and once more at a clean
/// shutdown, after the last request's events: the platform's chain and every workspace's
/// this process served.
pub struct AuditCheckpoints {
    stores: Arc<Mutex<Vec<Store>>>,
    signer: Arc<CheckpointSigner>,
}

impl AuditCheckpoints {
    pub async fn sign_final(&self) {
        let stores = self
            .stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for store in stores {
            if let Err(error) =
                checkpoint::checkpoint_tip(&store, &self.signer, chrono::Utc::now()).await
            {
                tracing::error!(%error, workspace = store.workspace_slug(), "cannot sign the final audit checkpoint");
            }
        }
    }
}

/// What the services of every workspace share.
#[derive(Clone)]
struct Shared {
    signer: Arc<CheckpointSigner>,
    metrics: Arc<Metrics>,
    checkpoint_interval: Duration,
    catalog_poll: Duration,
    /// How each workspace's holds are announced: the console's address for their links,
    /// how often the worker looks, and how it retries.
    console_url: Arc<str>,
    notify_poll: Duration,
    notify_retry: RetryPolicy,
    /// The store of every workspace served, for the final checkpoints.
    served: Arc<Mutex<Vec<Store>>>,
}

/// A workspace's authoring side: its store, its one audit writer, its live catalog and the
/// one door for its admin changes.
struct Authoring {
    store: Store,
    audit: AuditLog,
    catalog: Arc<CatalogHandle>,
    admin: Arc<AdminService>,
}

impl Authoring {
    async fn open(store: Store, catalog_file: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let audit = AuditLog::new(store.clone());
        let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await?));
        let mut admin = AdminService::new(store.clone(), audit.clone(), catalog.clone());
        if let Some(file) = catalog_file {
            admin = admin.managed_by(file.display().to_string());
        }
        Ok(Self {
            store,
            audit,
            catalog,
            admin: Arc::new(admin),
        })
    }
}

/// Everything that serves one workspace, its background work running: checkpoints and
/// retention of its chain, its upstreams' connections and sync, its holds' expiry, and
/// following catalog changes made by other processes.
struct WorkspaceServices {
    console_upstreams: Arc<upstream_sync::ConsoleUpstreams>,
    revisions: Revisions,
    holds: Holds,
    gateway: Gateway,
}

impl WorkspaceServices {
    async fn start(authoring: &Authoring, shared: &Shared) -> anyhow::Result<Self> {
        let Authoring {
            store,
            audit,
            catalog,
            admin,
        } = authoring;
        // What can fail comes first: a workspace whose opening failed is opened again on its
        // next request, and must not have left background work running.
        let registered = store.list_upstreams().await?;
        let credentials = store.upstream_credentials().await?;
        shared
            .served
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(store.clone());
        tokio::spawn(checkpoint::checkpoint_every(
            store.clone(),
            shared.signer.clone(),
            shared.checkpoint_interval,
        ));
        compliance::spawn_retention(store.clone(), shared.signer.clone());
        let upstreams = Arc::new(
            UpstreamPool::default().with_identity_hook(upstream_sync::identity_hook(admin.clone())),
        );
        upstream_sync::register_upstreams(&upstreams, &registered, &credentials);
        upstream_sync::spawn_sync(admin.clone(), upstreams.clone());
        let console_upstreams = Arc::new(upstream_sync::ConsoleUpstreams {
            service: admin.clone(),
            pool: upstreams.clone(),
            last: Default::default(),
        });
        let revisions = Revisions::new(admin.clone());
        let holds = Holds::new(store.clone(), audit.clone(), catalog.clone());
        spawn_hold_expiry(holds.clone());
        HoldNotifier::new(
            store.clone(),
            audit.clone(),
            catalog.clone(),
            &shared.console_url,
            shared.notify_retry,
        )
        .with_metrics(shared.metrics.clone())
        .spawn(shared.notify_poll);
        upstreams.upsert(CURATION_UPSTREAM, in_process_config(revisions.clone()));
        upstream_sync::spawn_catalog_follow(admin.clone(), upstreams.clone(), shared.catalog_poll);
        let gateway = Gateway::new(
            store.clone(),
            catalog.clone(),
            audit.clone(),
            upstreams,
            GatewayOptions::default(),
        )
        .with_metrics(shared.metrics.clone());
        Ok(Self {
            console_upstreams,
            revisions,
            holds,
            gateway,
        })
    }
}

/// Opens a workspace other than `default` on its first request: its database, then its
/// services as `default`'s run (without a catalog file: `--catalog` is the default's).
fn workspace_opener(platform: Store, shared: Shared) -> mcp::workspaces::Opener {
    Arc::new(move |slug| {
        let (platform, shared) = (platform.clone(), shared.clone());
        Box::pin(async move {
            let store = match platform.workspace(&slug).await {
                Ok(store) => store,
                Err(StoreError::NotFound(_)) => return Ok(None),
                Err(error) => return Err(error.into()),
            };
            let authoring = Authoring::open(store, None).await?;
            let services = WorkspaceServices::start(&authoring, &shared).await?;
            Ok(Some(Served {
                keys: AgentKeys::new(authoring.store.clone()),
                gateway: Arc::new(services.gateway),
                admin: authoring.admin.clone(),
            }))
        })
    })
}

/// Opens the database, creates the first admin if there is none, and builds the router.
pub async fn build(
    database_url: &str,
    args: &ServeArgs,
) -> anyhow::Result<(Router, AuditCheckpoints)> {
    let trusted_proxies = args.trusted_proxies()?;
    let store = Store::open_with(database_url, args.pool_settings()).await?;
    // One registry for the gateway's calls, the console's password checks and the store's
    // write lock.
    let metrics = Arc::new(Metrics::new().with_write_lock(store.write_lock_times()));
    let users = Users::new(store.clone()).with_metrics(metrics.clone());
    // The default workspace's one audit writer, and the one door every admin change goes
    // through.
    let default = Authoring::open(store.clone(), args.catalog.as_deref()).await?;
    let (catalog, authoring) = (default.catalog.clone(), default.admin.clone());
    if let Some(password) = authoring.bootstrap_admin().await? {
        println!("Created the console user `admin` (first start of an empty database).");
        println!("  password: {}", password.expose());
        println!("  It is shown only this once; change it with `skillgate user passwd admin`.");
    }

    let mut oauth_settings = args.oauth_settings()?;
    let issuers = args.trusted_issuers(&oauth_settings.resource())?;
    if let Some(issuers) = &issuers {
        oauth_settings.external_issuers = issuers.issuer_urls().map(str::to_owned).collect();
        tracing::info!(issuers = ?issuers, "accepting access tokens of trusted issuers at /mcp");
    }
    let oauth = OAuthService::new(store.clone(), authoring.clone(), oauth_settings);
    let sso = args
        .console_sso()?
        .map(|config| ConsoleSso::new(config, store.clone()));
    if let Some(sso) = &sso {
        let config = sso.config();
        tracing::info!(
            issuer = %config.issuer.issuer,
            redirect_uri = %config.redirect_uri,
            password_sign_in = ?config.password_sign_in,
            "console single sign-on"
        );
    }
    let oauth_limits = oauth::RateLimits::new(
        store.clone(),
        args.oauth_register_limit,
        args.oauth_request_limit,
    );

    // What a printed key's client configuration names.
    let mcp_url = format!("http://{}/mcp", args.bind);
    if args.demo {
        seed_demo(&authoring, &mcp_url).await?;
    }
    let catalog_file = match &args.catalog {
        Some(file) => {
            let source = catalog_watch::CatalogSource::new(file, args.max_catalog_bytes)?;
            let started = source.apply_at_start(&authoring, &mcp_url).await?;
            Some((source, started))
        }
        None => None,
    };

    let sessions = store.console_sessions();
    sessions
        .migrate()
        .await
        .context("creating the console session table")?;
    tokio::spawn(
        sessions
            .clone()
            .continuously_delete_expired(Duration::from_secs(600)),
    );
    let secure = args.secure_cookies();
    if secure {
        tracing::info!(
            "console cookies are Secure: browsers send them over HTTPS only \
             (--secure-cookies=false serves the console over plain HTTP)"
        );
    }
    let session_layer = SessionManagerLayer::new(sessions)
        // `__Host-` makes browsers refuse the cookie from a sibling subdomain, which could
        // otherwise plant a session; browsers accept the prefix only on Secure cookies.
        .with_name(if secure {
            "__Host-skillgate_session"
        } else {
            "skillgate_session"
        })
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(time::Duration::seconds(
            i64::try_from(args.console_idle_timeout).unwrap_or(i64::MAX),
        )));
    let session_limits =
        console_auth::SessionLimits::new(Duration::from_secs(args.console_idle_timeout))
            .with_max_age(sso.as_ref().map(|sso| sso.config().max_session_age));
    let origin_guard = ConsoleGuard::new(&args.public_origins)?;

    let signer = Arc::new(signing_key::load_signer(
        database_url,
        args.audit_signing_key.as_deref(),
        signing_key::MissingKey::Create,
    )?);
    let trusted_keys = signer.trusted();
    let shared = Shared {
        signer: signer.clone(),
        metrics: metrics.clone(),
        checkpoint_interval: Duration::from_secs(args.audit_checkpoint_interval),
        catalog_poll: Duration::from_millis(args.catalog_poll_ms),
        console_url: args.public_url()?.into(),
        notify_poll: Duration::from_millis(args.hold_notify_poll_ms),
        notify_retry: RetryPolicy {
            base: Duration::from_millis(args.hold_notify_retry_ms),
            ..RetryPolicy::default()
        },
        served: Arc::default(),
    };
    let checkpoints = AuditCheckpoints {
        stores: shared.served.clone(),
        signer: signer.clone(),
    };
    let WorkspaceServices {
        console_upstreams,
        revisions,
        holds,
        gateway,
    } = WorkspaceServices::start(&default, &shared).await?;
    shares::spawn_share_projection(authoring.clone(), shared.catalog_poll);
    if let Some((source, started)) = catalog_file {
        catalog_watch::watch(
            authoring.clone(),
            console_upstreams.clone(),
            source,
            started,
            mcp_url,
        )?;
    }
    let anonymous_scope = args
        .anonymous_scope
        .as_deref()
        .map(Slug::parse)
        .transpose()
        .context("--anonymous-scope")?;
    if let Some(scope) = &anonymous_scope {
        anyhow::ensure!(
            gateway.catalog().load().scope(scope.as_str()).is_some(),
            "--anonymous-scope names `{scope}`, which is not a scope of the catalog"
        );
    }
    let mcp_options = mcp::McpOptions {
        bind: args.bind,
        anonymous_scope,
        allowed_origins: args.allowed_origins.clone(),
        max_body_bytes: mcp::DEFAULT_MAX_BODY_BYTES,
        oauth: args.oauth.then(|| oauth.clone()),
        issuers: issuers.clone(),
        resource_metadata_url: (args.oauth || issuers.is_some())
            .then(|| oauth.settings().resource_metadata_url()),
    };
    mcp_options.validate()?;
    // Agents of the default workspace are served by `gateway`; those of the others by
    // their own, opened on their first request.
    let workspaces = Arc::new(mcp::workspaces::Workspaces::with_opener(
        Served {
            keys: AgentKeys::new(store.clone()),
            gateway: Arc::new(gateway.clone()),
            admin: authoring.clone(),
        },
        workspace_opener(store.clone(), shared),
    ));
    let api_router = api::router(
        workspaces.clone(),
        &mcp_options,
        metrics.clone(),
        holds.clone(),
        ApiTokens::new(store.clone()),
    );
    // The Connect page's try-it drives this same gateway as a console user.
    let connect = skillgate_app::connect::api::ssr::ConnectContext {
        gateway: gateway.clone(),
        public_origins: args.public_origins.clone(),
        bind: args.bind,
        oauth: args.oauth,
    };
    let mcp_router = mcp::router(workspaces, mcp_options);

    let leptos_options = LeptosOptions::builder()
        .output_name("skillgate")
        .site_root(args.site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .site_addr(args.bind)
        .build();
    // The console pages name the bundle modules they need in their <head> (app's preload).
    let split_manifest = SplitManifest::load(
        std::path::Path::new(&*leptos_options.site_root),
        &leptos_options.site_pkg_dir,
    )?;
    let console = ConsoleContext {
        oauth: oauth.clone(),
        store: store.clone(),
        users: users.clone(),
        keys: AgentKeys::new(store.clone()),
        authoring: authoring.clone(),
        upstreams: console_upstreams,
        catalog,
        sign_in: sign_in_options(sso.as_ref()),
        version: env!("CARGO_PKG_VERSION"),
    };
    let state = AppState {
        leptos_options: leptos_options.clone(),
        store,
        users,
        revisions: revisions.clone(),
        admin: authoring,
        oauth: oauth.clone(),
        sso: sso.clone(),
        secure_cookies: secure,
    };

    let router = http::router(http::Parts {
        state,
        console,
        revisions,
        holds,
        trusted_keys,
        connect,
        split_manifest,
        sessions: session_layer,
        session_limits,
        origin_guard,
        signer,
        mcp: mcp_router,
        oauth: args.oauth.then_some((oauth.clone(), oauth_limits)),
        // Without the authorization server, the resource metadata still names the
        // trusted issuers, so a standard MCP client finds where to sign in.
        resource_metadata: (args.oauth || issuers.is_some()).then(|| (oauth.clone(), args.oauth)),
        api: api_router,
        metrics,
        trusted_proxies,
    });
    Ok((router, checkpoints))
}

/// What the sign-in page offers, given the console's single sign-on.
fn sign_in_options(sso: Option<&ConsoleSso>) -> SignInOptions {
    let Some(sso) = sso else {
        return SignInOptions::default();
    };
    let config = sso.config();
    SignInOptions {
        sso_label: Some(config.label.clone()),
        passwords: match config.password_sign_in {
            PasswordSignIn::All => Passwords::All,
            PasswordSignIn::Admins => Passwords::Admins,
            PasswordSignIn::Off => Passwords::Off,
        },
    }
}

/// How often holds whose time ran out are expired (their usage released, audited), and
/// tasks past their lifetime removed. A hold an agent or reviewer touches after its expiry
/// is expired at that moment anyway; a task past its lifetime is never answered.
const HOLD_SWEEP: Duration = Duration::from_secs(30);

fn spawn_hold_expiry(holds: Holds) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(HOLD_SWEEP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match holds.expire_due(chrono::Utc::now()).await {
                Ok(0) => {}
                Ok(expired) => tracing::info!(expired, "expired approval holds"),
                Err(error) => tracing::warn!(%error, "could not expire approval holds"),
            }
            if let Err(error) = holds.prune_tasks(chrono::Utc::now()).await {
                tracing::warn!(%error, "could not remove ended tasks");
            }
        }
    });
}

/// Seeds the demo catalog into an empty database and prints a key for its `support` scope.
/// On a database that already has a catalog it does nothing, so no key is printed twice.
async fn seed_demo(admin: &AdminService, mcp_url: &str) -> anyhow::Result<()> {
    let exe =
        std::env::current_exe().context("locating the skillgate binary for the demo upstream")?;
    if !admin.store().seed_demo(&exe.to_string_lossy()).await? {
        return Ok(());
    }
    admin.reload().await?;
    println!("Seeded the demo catalog (customer support: roles, skills, 15 tools, scopes).");
    let support = Slug::parse("support").expect("`support` is a slug");
    let (info, key) = admin
        .create_key(
            &skillgate_core::names::Actor::DemoSeed.to_string(),
            "demo-support",
            &support,
            None,
        )
        .await?;
    print!("{}", key::render_created(&info, &key, mcp_url));
    Ok(())
}

pub async fn run(database_url: &str, mut args: ServeArgs) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let local = listener.local_addr()?;
    // With port 0 the system picks one: what the server tells clients (the OAuth issuer,
    // a printed key's URL) is the address it really listens on.
    args.bind = local;
    let (router, checkpoints) = build(database_url, &args).await?;
    let trusted_proxies = args.trusted_proxies()?;
    let max_connections = listen::connection_cap(args.max_connections);
    let limits = listen::Limits {
        header_read_timeout: Duration::from_millis(args.header_read_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        max_connections,
        per_address: listen::address_share(max_connections, args.max_connections_per_address),
    };
    tracing::info!(
        address = %local,
        max_connections = limits.max_connections,
        per_address = limits.per_address,
        "serving the console and /mcp"
    );
    println!("Skillgate is listening on http://{local}");
    listen::serve(listener, router, limits, trusted_proxies, shutdown_signal()).await;
    checkpoints.sign_final().await;
    Ok(())
}

/// Ctrl-C, or the SIGTERM a service manager or container runtime stops a server with: both
/// end it cleanly (final audit checkpoint, last trace spans flushed).
async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler can be installed");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
