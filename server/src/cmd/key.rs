//! `skillgate key …`: agent keys (the MCP endpoint's bearer credentials) from the command line.

use chrono::{Duration, Utc};
use clap::Subcommand;

use skillgate_core::admin::AdminService;
use skillgate_core::keys::{AgentKeyInfo, AgentKeys, NewAgentKey};
use skillgate_core::slug::Slug;

use crate::cmd::Target;
use crate::cmd::table::{table, when};

pub const DEFAULT_MCP_URL: &str = "http://127.0.0.1:3000/mcp";

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an agent key for a scope; the key is printed once and never again.
    Create {
        /// A name for the key: 1 to 64 letters, digits, `.`, `_` or `-`.
        #[arg(long)]
        name: String,
        /// The scope the key's agents may learn roles from.
        #[arg(long)]
        scope: String,
        /// Days until the key expires (default: never).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=36_500))]
        expires_in_days: Option<u32>,
        /// The MCP endpoint to put into the printed client configuration.
        #[arg(long, default_value = DEFAULT_MCP_URL)]
        mcp_url: String,
    },
    /// Revoke an agent key: it stops working at once.
    Revoke { name: String },
    /// List agent keys (never the keys themselves).
    List,
}

pub async fn run(target: &Target, command: KeyCommand) -> anyhow::Result<()> {
    let store = target.open().await?;
    let keys = AgentKeys::new(store.clone());
    match command {
        KeyCommand::Create {
            name,
            scope,
            expires_in_days,
            mcp_url,
        } => {
            let scope = Slug::parse(&scope)?;
            let expires_at = expires_in_days.map(|days| Utc::now() + Duration::days(days.into()));
            // The same door as the console: the key and its audit event commit together.
            let (info, key) = AdminService::open(store.clone())
                .await?
                .create_key(&crate::cmd::local_actor(), &name, &scope, expires_at)
                .await?;
            print!("{}", render_created(&info, &key, &mcp_url));
        }
        KeyCommand::Revoke { name } => {
            let info = AdminService::open(store.clone())
                .await?
                .revoke_key(&crate::cmd::local_actor(), &name)
                .await?;
            println!(
                "agent key `{}` ({}…, scope {}) revoked at {}; it no longer authenticates",
                info.name,
                info.prefix,
                info.scope,
                when(info.revoked_at, "-")
            );
        }
        KeyCommand::List => {
            let (agent_keys, external) = (keys.list().await?, keys.list_external().await?);
            if agent_keys.is_empty() {
                println!(
                    "no agent keys; create one with `skillgate key create --name NAME --scope SCOPE`"
                );
            } else {
                print!("{}", render_table(&agent_keys));
            }
            if !external.is_empty() {
                println!("\nagents with tokens of trusted identity providers (--trusted-issuers):");
                print!("{}", render_external(&external));
            }
        }
    }
    Ok(())
}

pub fn render_created(info: &AgentKeyInfo, key: &NewAgentKey, mcp_url: &str) -> String {
    let config = serde_json::json!({
        "mcpServers": {
            "skillgate": {
                "type": "http",
                "url": mcp_url,
                "headers": { "Authorization": format!("Bearer {}", key.expose()) },
            }
        }
    });
    let config = serde_json::to_string_pretty(&config).expect("JSON values serialize");
    let expiry = match info.expires_at {
        Some(at) => format!("It expires {}.", when(Some(at), "")),
        None => "It does not expire; revoke it with `skillgate key revoke NAME`.".to_owned(),
    };
    format!(
        "agent key for scope {scope}: {key}\n\n\
         This key is shown only once: Skillgate stores only its SHA-256 hash. Copy it now.\n\
         {expiry}\n\n\
         MCP client configuration (paste into your client's MCP servers file):\n{config}\n",
        scope = info.scope,
        key = key.expose(),
    )
}

fn render_table(keys: &[AgentKeyInfo]) -> String {
    let rows = keys
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.scope.to_string(),
                format!("{}…", k.prefix),
                when(Some(k.created_at), "-"),
                when(k.expires_at, "never"),
                when(k.revoked_at, "-"),
                when(k.last_used_at, "never"),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "SCOPE",
            "PREFIX",
            "CREATED",
            "EXPIRES",
            "REVOKED",
            "LAST USED",
        ],
        rows,
    )
}

/// The subjects of trusted issuers: no key to show a prefix of, and no expiry (their
/// tokens expire); revoke one with `key revoke 'SUBJECT@ISSUER'`.
fn render_external(subjects: &[AgentKeyInfo]) -> String {
    let rows = subjects
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.scope.to_string(),
                when(Some(k.created_at), "-"),
                when(k.revoked_at, "-"),
                when(k.last_used_at, "never"),
            ]
        })
        .collect();
    table(
        &["NAME", "SCOPE", "FIRST SEEN", "REVOKED", "LAST USED"],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn info(name: &str, revoked: bool) -> AgentKeyInfo {
        let at = DateTime::parse_from_rfc3339("2026-03-01T09:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        AgentKeyInfo {
            id: 1,
            name: name.to_owned(),
            scope: Slug::parse("support").unwrap(),
            prefix: "sgk_AbCd1234".to_owned(),
            created_at: at,
            created_by: Some("cli:alice".to_owned()),
            expires_at: None,
            revoked_at: revoked.then_some(at + Duration::days(1)),
            last_used_at: None,
        }
    }

    #[test]
    fn the_key_list_is_an_aligned_table_without_secrets() {
        let table = render_table(&[info("support-bot", false), info("old", true)]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].starts_with("NAME         SCOPE    PREFIX"),
            "{table}"
        );
        assert!(
            lines[1].contains("sgk_AbCd1234…  2026-03-01 09:30 UTC  never"),
            "{table}"
        );
        assert!(lines[2].contains("2026-03-02 09:30 UTC"), "{table}");
        let column = lines[0].find("SCOPE").unwrap();
        assert!(
            lines
                .iter()
                .all(|l| l[column..].starts_with("support") || l[column..].starts_with("SCOPE"))
        );
    }

    #[tokio::test]
    async fn create_prints_the_key_once_with_a_client_config_that_uses_it() {
        let store = skillgate_core::store::Store::open("sqlite::memory:")
            .await
            .unwrap();
        let support = Slug::parse("support").unwrap();
        let (info, key) = AgentKeys::new(store)
            .create("bot", &support, std::slice::from_ref(&support), None, None)
            .await
            .unwrap();
        let out = render_created(&info, &key, DEFAULT_MCP_URL);
        assert!(out.starts_with(&format!("agent key for scope support: {}\n", key.expose())));
        assert!(out.contains("shown only once"));
        let json = &out[out.find('{').unwrap()..];
        let config: serde_json::Value = serde_json::from_str(json).unwrap();
        let server = &config["mcpServers"]["skillgate"];
        assert_eq!(server["url"], "http://127.0.0.1:3000/mcp");
        assert_eq!(
            server["headers"]["Authorization"],
            format!("Bearer {}", key.expose())
        );
    }
}
