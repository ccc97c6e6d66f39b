//! The command line. Every flag is also an environment variable `SKILLGATE_…`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/skillgate.db";

#[derive(Debug, Parser)]
#[command(
    name = "skillgate",
    version,
    about = "A governed MCP gateway with an admin console"
)]
pub struct Cli {
    /// Database to use: sqlite://PATH (created and migrated on start) or
    /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (an existing database, migrated on
    /// start; several replicas may share it).
    #[arg(
        long,
        global = true,
        env = "SKILLGATE_DATABASE_URL",
        default_value = DEFAULT_DATABASE_URL
    )]
    pub database_url: String,

    /// The workspace the key, catalog, skill, holds, notifier and audit commands work in: its own catalog,
    /// keys, sessions and audit chain. `default` is the platform database's own.
    #[arg(
        long,
        global = true,
        env = "SKILLGATE_WORKSPACE",
        default_value = "default",
        value_name = "NAME"
    )]
    pub workspace: String,

    #[command(subcommand)]
    pub command: Option<Command>,
}

// Parsed once at start: the size of the serve flags costs nothing.
#[expect(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the console and the MCP endpoint (the default command).
    Serve(ServeArgs),
    /// Manage console users.
    #[command(subcommand)]
    User(UserCommand),
    /// Create and list workspaces: each team's own catalog, keys, sessions and audit.
    #[command(subcommand)]
    Workspace(crate::cmd::workspace::WorkspaceCommand),
    /// Manage agent keys (the MCP endpoint's bearer credentials).
    #[command(subcommand)]
    Key(crate::cmd::key::KeyCommand),
    /// The catalog as code: export it as YAML, print its JSON Schema, apply a file.
    #[command(subcommand)]
    Catalog(crate::cmd::catalog::CatalogCommand),
    /// Import a skill bundle as a candidate, or export a skill version as a bundle.
    #[command(subcommand)]
    Skill(crate::cmd::skill::SkillCommand),
    /// List, show, approve or deny approval holds (calls waiting for a person).
    #[command(subcommand)]
    Holds(crate::cmd::holds::HoldsCommand),
    /// Where approvers hear of holds: webhooks, and their delivery log.
    #[command(subcommand)]
    Notifier(crate::cmd::notifier::NotifierCommand),
    /// Verify, export, checkpoint or prune the tamper-evident audit log.
    Audit(crate::cmd::audit::AuditArgs),
    /// Copy a SQLite deployment into an empty PostgreSQL database (--from, --to), then
    /// verify that the copy's audit chain ends with the same tip.
    Migrate(crate::cmd::migrate::MigrateArgs),
    /// Serve the demo company's 15 tools as an MCP server over stdio (or HTTP with --http).
    DemoUpstream(DemoUpstreamArgs),
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "SKILLGATE_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,

    /// Seed the demo catalog into an empty database.
    #[arg(long, env = "SKILLGATE_DEMO", conflicts_with = "catalog")]
    pub demo: bool,
    /// Serve the catalog from this file (GitOps): it is applied at start and whenever it
    /// changes, entities it does not list are removed, and the console shows the catalog
    /// read-only. See `skillgate catalog export`.
    #[arg(long, env = "SKILLGATE_CATALOG", value_name = "FILE")]
    pub catalog: Option<std::path::PathBuf>,
    /// The largest `--catalog` file read; a bigger one is refused (at start: the start
    /// fails; later: the catalog stays as it was).
    #[arg(
        long,
        env = "SKILLGATE_MAX_CATALOG_BYTES",
        value_name = "BYTES",
        default_value_t = skillgate_core::catalog_code::DEFAULT_MAX_CATALOG_BYTES,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_catalog_bytes: u64,

    /// Admit MCP requests without a key into this scope (loopback binds only; off by default).
    #[arg(long, env = "SKILLGATE_ANONYMOUS_SCOPE")]
    pub anonymous_scope: Option<String>,

    /// A browser origin allowed to call /mcp besides loopback origins; repeatable.
    #[arg(
        long = "allowed-origin",
        env = "SKILLGATE_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// Mark the console's session cookie `Secure`, so browsers send it over HTTPS only.
    /// On unless --bind is a loopback address; set it explicitly behind a TLS-terminating
    /// proxy (`--secure-cookies`), or turn it off to serve the console over plain HTTP on a
    /// network (`--secure-cookies=false`).
    #[arg(
        long,
        env = "SKILLGATE_SECURE_COOKIES",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub secure_cookies: Option<bool>,

    /// The address browsers reach the console at, when it is not `http://` and the Host
    /// header the server receives (a TLS-terminating proxy: https://skillgate.example.com).
    /// Console changes are accepted only from the console's own origin or these; repeatable.
    #[arg(
        long = "public-origin",
        env = "SKILLGATE_PUBLIC_ORIGINS",
        value_delimiter = ','
    )]
    pub public_origins: Vec<String>,

    /// The address MCP clients reach this server at, without a path: the OAuth issuer, and
    /// `{it}/mcp` the one resource its tokens are for. Default: the first --public-origin,
    /// else `http://` and --bind.
    #[arg(long, env = "SKILLGATE_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// Skillgate's own OAuth 2.1 authorization server for /mcp (discovery, sign-in and
    /// consent in the console). Agent keys work either way.
    #[arg(
        long,
        env = "SKILLGATE_OAUTH",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub oauth: bool,

    /// The company's identity providers whose access tokens (JWTs) /mcp accepts, and how
    /// their claims map to scopes: a YAML file (docs/operations.md, "Agents with the
    /// company's identity provider"). Read at start.
    #[arg(long, env = "SKILLGATE_TRUSTED_ISSUERS", value_name = "FILE")]
    pub trusted_issuers: Option<std::path::PathBuf>,

    /// Single sign-on to the console through the company's OpenID provider, and how its
    /// groups map to console roles: a YAML file (docs/operations.md, "People with the
    /// company's identity provider"). Read at start.
    #[arg(long, env = "SKILLGATE_CONSOLE_SSO", value_name = "FILE")]
    pub console_sso: Option<std::path::PathBuf>,

    /// OAuth dynamic client registration (RFC 7591) at /oauth/register.
    #[arg(
        long,
        env = "SKILLGATE_OAUTH_DYNAMIC_REGISTRATION",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub oauth_dynamic_registration: bool,

    /// OAuth clients identified by a Client ID Metadata Document URL.
    #[arg(
        long,
        env = "SKILLGATE_OAUTH_METADATA_DOCUMENTS",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub oauth_metadata_documents: bool,

    /// Also fetch Client ID Metadata Documents from http:// loopback URLs (development and
    /// tests only: a document must be https).
    #[arg(long, env = "SKILLGATE_OAUTH_LOOPBACK_METADATA_DOCUMENTS", hide = true)]
    pub oauth_loopback_metadata_documents: bool,

    /// How often this process checks whether another replica (or another process on the
    /// same SQLite file) changed the catalog; a change is in force here at most this long
    /// after it was saved, plus one recompile.
    #[arg(
        long,
        env = "SKILLGATE_CATALOG_POLL_MS",
        value_name = "MILLISECONDS",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(20..=60_000)
    )]
    pub catalog_poll_ms: u64,

    /// How often each replica looks for holds to announce to their notifiers (webhooks) and
    /// for announcements due: a hold is announced within about this long of being raised.
    #[arg(
        long,
        env = "SKILLGATE_HOLD_NOTIFY_POLL_MS",
        value_name = "MILLISECONDS",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(20..=60_000)
    )]
    pub hold_notify_poll_ms: u64,

    /// The wait before a failed hold announcement is sent again; each later retry waits
    /// three times longer, six attempts in all.
    #[arg(
        long,
        env = "SKILLGATE_HOLD_NOTIFY_RETRY_MS",
        value_name = "MILLISECONDS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(10..=3_600_000)
    )]
    pub hold_notify_retry_ms: u64,

    /// Lifetime of an OAuth access token.
    #[arg(
        long,
        env = "SKILLGATE_OAUTH_ACCESS_TOKEN_TTL",
        value_name = "SECONDS",
        default_value_t = 900,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub oauth_access_token_ttl: u64,

    /// Lifetime of an OAuth refresh token (each use rotates it).
    #[arg(
        long,
        env = "SKILLGATE_OAUTH_REFRESH_TOKEN_TTL",
        value_name = "SECONDS",
        default_value_t = 2_592_000,
        value_parser = clap::value_parser!(u64).range(60..)
    )]
    pub oauth_refresh_token_ttl: u64,

    /// OAuth client registrations (/oauth/register) allowed per client address per hour,
    /// across replicas; more are answered 429 with Retry-After.
    #[arg(
        long,
        env = "SKILLGATE_OAUTH_REGISTER_LIMIT",
        value_name = "COUNT",
        default_value_t = crate::http::oauth::DEFAULT_REGISTER_LIMIT,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub oauth_register_limit: u32,

    /// OAuth authorization, token and revocation requests allowed per client address per
    /// minute, across replicas; more are answered 429 with Retry-After.
    #[arg(
        long,
        env = "SKILLGATE_OAUTH_REQUEST_LIMIT",
        value_name = "COUNT",
        default_value_t = crate::http::oauth::DEFAULT_REQUEST_LIMIT,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub oauth_request_limit: u32,

    /// Proxies whose X-Forwarded-For is believed: addresses or CIDR networks, repeatable or
    /// comma-separated. A request from one of them is the client's at the rightmost
    /// forwarded address that is not a trusted proxy; from anyone else, the peer's. Default:
    /// none (the header is ignored).
    #[arg(
        long = "trusted-proxies",
        env = "SKILLGATE_TRUSTED_PROXIES",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<String>,

    /// A console session ends after this long without a request (counted from the last
    /// one, not from sign-in).
    #[arg(
        long,
        env = "SKILLGATE_CONSOLE_IDLE_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 28_800,
        value_parser = clap::value_parser!(u64).range(1..=2_592_000)
    )]
    pub console_idle_timeout: u64,

    /// Directory holding the built console assets (`pkg/` with wasm, JS and CSS).
    #[arg(long, env = "SKILLGATE_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,

    /// The Ed25519 key that signs audit checkpoints and prunes (64 hex digits); created,
    /// mode 0600, when missing. Default: `audit-signing.key` beside the database file.
    #[arg(long, env = "SKILLGATE_AUDIT_SIGNING_KEY", value_name = "FILE")]
    pub audit_signing_key: Option<PathBuf>,

    /// Seconds between signed checkpoints of the audit chain tip (only when it moved).
    #[arg(
        long,
        env = "SKILLGATE_AUDIT_CHECKPOINT_INTERVAL",
        value_name = "SECONDS",
        default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub audit_checkpoint_interval: u64,

    /// How long a client has to send a request's headers, counted from their first byte; a
    /// slower client is disconnected.
    #[arg(
        long,
        env = "SKILLGATE_HEADER_READ_TIMEOUT_MS",
        value_name = "MILLISECONDS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(10..=600_000)
    )]
    pub header_read_timeout_ms: u64,

    /// How long a connection may stay open with no request in progress (just opened, or
    /// between keep-alive requests) before it is closed. A response being written is never
    /// cut (an SSE stream of /mcp runs as long as it needs).
    #[arg(
        long,
        env = "SKILLGATE_IDLE_TIMEOUT_MS",
        value_name = "MILLISECONDS",
        default_value_t = 60_000,
        value_parser = clap::value_parser!(u64).range(10..=3_600_000)
    )]
    pub idle_timeout_ms: u64,

    /// Most client connections open at once; lowered at start to keep file descriptors free
    /// below the process's file limit (which is raised to its hard limit). A connection
    /// past the cap is answered 503 and closed.
    #[arg(
        long,
        env = "SKILLGATE_MAX_CONNECTIONS",
        value_name = "COUNT",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub max_connections: u64,

    /// Most client connections open at once from one address (default: a tenth of
    /// --max-connections). A trusted proxy's (--trusted-proxies) are not held to it. Past
    /// it, a connection from that address may ask only for /healthz.
    #[arg(
        long,
        env = "SKILLGATE_MAX_CONNECTIONS_PER_ADDRESS",
        value_name = "COUNT",
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub max_connections_per_address: Option<u64>,

    /// Most connections to the database this process keeps open (default: 16 on
    /// PostgreSQL, 8 on SQLite). The replicas' pools together must stay under the
    /// PostgreSQL server's `max_connections`.
    #[arg(
        long,
        env = "SKILLGATE_DATABASE_POOL_SIZE",
        value_name = "COUNT",
        value_parser = clap::value_parser!(u32).range(1..=10_000)
    )]
    pub database_pool_size: Option<u32>,

    /// How long a request waits for a free database connection before it is answered as
    /// unavailable: 503 with Retry-After at admission, a retryable JSON-RPC error within a
    /// call. Nothing runs without its audit event either way.
    #[arg(
        long,
        env = "SKILLGATE_DATABASE_ACQUIRE_TIMEOUT_MS",
        value_name = "MILLISECONDS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(10..=600_000)
    )]
    pub database_acquire_timeout_ms: u64,
}

impl ServeArgs {
    /// The database pool `--database-pool-size` and `--database-acquire-timeout-ms` ask for.
    pub fn pool_settings(&self) -> skillgate_core::store::PoolSettings {
        skillgate_core::store::PoolSettings {
            max_connections: self.database_pool_size,
            acquire_timeout: Duration::from_millis(self.database_acquire_timeout_ms),
        }
    }

    /// `--trusted-proxies`, parsed: the router's client addresses and the listener's
    /// per-address shares both read it.
    pub fn trusted_proxies(&self) -> anyhow::Result<crate::client_addr::TrustedProxies> {
        crate::client_addr::TrustedProxies::parse(&self.trusted_proxies).map_err(anyhow::Error::msg)
    }

    /// The OAuth issuer: --public-url, else the first --public-origin, else `http://` and
    /// --bind.
    pub fn public_url(&self) -> anyhow::Result<String> {
        let text = match (&self.public_url, self.public_origins.first()) {
            (Some(url), _) => url.clone(),
            (None, Some(origin)) => origin.clone(),
            (None, None) => format!("http://{}", self.bind),
        };
        let url = url::Url::parse(text.trim())
            .map_err(|e| anyhow::anyhow!("--public-url `{text}` is not a URL: {e}"))?;
        anyhow::ensure!(
            matches!(url.scheme(), "http" | "https")
                && url.has_host()
                && url.path() == "/"
                && url.query().is_none()
                && url.fragment().is_none()
                && url.username().is_empty(),
            "--public-url `{text}` must be a scheme and host without a path, such as https://skillgate.example.com"
        );
        Ok(url.as_str().trim_end_matches('/').to_owned())
    }

    /// The authorization server's settings.
    /// The trusted issuers of `--trusted-issuers`, whose tokens must name `audience` (this
    /// server's `/mcp`) unless the file says otherwise.
    pub fn trusted_issuers(
        &self,
        audience: &str,
    ) -> anyhow::Result<Option<skillgate_core::issuers::TrustedIssuers>> {
        let Some(file) = &self.trusted_issuers else {
            return Ok(None);
        };
        let configs = skillgate_core::issuers::load(file, audience)?;
        Ok(Some(skillgate_core::issuers::TrustedIssuers::new(configs)))
    }

    /// The console's single sign-on settings of `--console-sso`. The client secret comes
    /// from the file's `client_secret_file`, else `SKILLGATE_CONSOLE_SSO_SECRET`.
    pub fn console_sso(&self) -> anyhow::Result<Option<skillgate_core::console_sso::SsoConfig>> {
        let Some(file) = &self.console_sso else {
            return Ok(None);
        };
        let public_url = url::Url::parse(&self.public_url()?)?;
        let secret = std::env::var("SKILLGATE_CONSOLE_SSO_SECRET").ok();
        Ok(Some(skillgate_core::console_sso::load(
            file,
            &public_url,
            secret,
        )?))
    }

    pub fn oauth_settings(&self) -> anyhow::Result<skillgate_core::oauth::OAuthSettings> {
        let mut settings = skillgate_core::oauth::OAuthSettings::new(&self.public_url()?);
        settings.dynamic_registration = self.oauth_dynamic_registration;
        settings.metadata_documents = self.oauth_metadata_documents;
        settings.loopback_metadata_documents = self.oauth_loopback_metadata_documents;
        settings.access_token_ttl = Duration::from_secs(self.oauth_access_token_ttl);
        settings.refresh_token_ttl = Duration::from_secs(self.oauth_refresh_token_ttl);
        Ok(settings)
    }

    /// Whether the console cookie is `Secure`: as configured, else off on loopback only.
    pub fn secure_cookies(&self) -> bool {
        self.secure_cookies
            .unwrap_or_else(|| !self.bind.ip().is_loopback())
    }
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a console user; the password is read from standard input.
    Add {
        name: String,
        #[arg(long, value_parser = ["admin", "reviewer", "viewer"])]
        role: String,
    },
    /// Set a console user's password, read from standard input.
    Passwd { name: String },
    /// Show, or with --allow set, the scopes a console user may consent to when an OAuth
    /// client asks to act for them (comma-separated; --allow '' allows none).
    Scopes {
        name: String,
        #[arg(long, value_delimiter = ',', num_args = 0..)]
        allow: Option<Vec<String>>,
    },
}

#[derive(Debug, Args, Clone)]
pub struct DemoUpstreamArgs {
    /// Append one JSON line per executed tool call to this file (for tests and demos).
    #[arg(long, env = "SKILLGATE_DEMO_EXECUTIONS_LOG")]
    pub executions_log: Option<PathBuf>,

    /// Serve MCP streamable HTTP on this address (path /mcp) instead of stdio.
    #[arg(long)]
    pub http: Option<SocketAddr>,

    /// Also serve `bench_payload`, a tool that answers as many bytes of text as asked
    /// (`make bench-peers` weighs result sizes and limits with it).
    #[arg(long)]
    pub bench_tools: bool,
}

impl Cli {
    /// The serve arguments to use when no subcommand was given.
    pub fn default_serve() -> ServeArgs {
        match Cli::parse_from(["skillgate", "serve"]).command {
            Some(Command::Serve(args)) => args,
            _ => unreachable!("`skillgate serve` parses as the serve command"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_defaults_to_loopback_port_3000_and_the_data_directory() {
        let cli = Cli::parse_from(["skillgate", "serve"]);
        assert_eq!(cli.database_url, DEFAULT_DATABASE_URL);
        let Some(Command::Serve(args)) = cli.command else {
            panic!("serve")
        };
        assert_eq!(args.bind.to_string(), "127.0.0.1:3000");
        assert_eq!(args.audit_checkpoint_interval, 60);
        assert_eq!(args.audit_signing_key, None);
    }

    #[test]
    fn a_zero_checkpoint_interval_is_refused_by_the_parser() {
        assert!(
            Cli::try_parse_from(["skillgate", "serve", "--audit-checkpoint-interval", "0"])
                .is_err()
        );
    }

    fn serve(args: &[&str]) -> ServeArgs {
        let mut all = vec!["skillgate", "serve"];
        all.extend_from_slice(args);
        match Cli::parse_from(all).command {
            Some(Command::Serve(args)) => args,
            _ => panic!("serve"),
        }
    }

    #[test]
    fn console_cookies_are_secure_off_loopback_unless_turned_off() {
        assert!(!serve(&[]).secure_cookies());
        assert!(!serve(&["--bind", "[::1]:3000"]).secure_cookies());
        assert!(serve(&["--bind", "0.0.0.0:3000"]).secure_cookies());
        assert!(serve(&["--bind", "10.1.2.3:3000"]).secure_cookies());
        assert!(serve(&["--secure-cookies"]).secure_cookies());
        assert!(serve(&["--secure-cookies=true"]).secure_cookies());
        assert!(!serve(&["--bind", "0.0.0.0:3000", "--secure-cookies=false"]).secure_cookies());
        assert!(Cli::try_parse_from(["skillgate", "serve", "--secure-cookies=maybe"]).is_err());
    }

    #[test]
    fn public_origins_are_repeatable() {
        let args = serve(&[
            "--public-origin",
            "https://a.example",
            "--public-origin",
            "https://b.example",
        ]);
        assert_eq!(
            args.public_origins,
            ["https://a.example", "https://b.example"]
        );
    }

    #[test]
    fn an_unknown_console_role_is_refused_by_the_parser() {
        assert!(Cli::try_parse_from(["skillgate", "user", "add", "x", "--role", "root"]).is_err());
    }
}
