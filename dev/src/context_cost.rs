//! `skillgate-dev context-cost`: how many bytes of JSON an agent receives for one lookup
//! task, (a) with every tool definition listed flat, and (b) through Skillgate's protocol:
//! the four platform tool definitions, `init_skilder`, one `learn /roles/<role>` and one
//! `call_tool`. Deterministic and model-free.
//!
//! (b) is measured on the wire: the real gateway and `/mcp` router run in-process against
//! a temporary SQLite catalog, and an rmcp client records what it receives. Synthetic
//! catalogs are built from the demo's fifteen tool definitions, renamed per domain, so
//! every tool is the size of a real one.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use chrono::{DateTime, SecondsFormat};
use clap::Args;
use rmcp::model::ListToolsResult;
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::audit::AuditLog;
use skillgate_core::demo::tools::tool_specs;
use skillgate_core::gateway::{Gateway, GatewayOptions};
use skillgate_core::keys::AgentKeys;
use skillgate_core::model::{Limit, Role, Scope, Skill, ToolSpec, Upstream, UpstreamKind};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::upstream::{UpstreamConfig, UpstreamPool};
use tokio::task::JoinHandle;

use super::harness::{self, ScratchDir};
use skillgate::mcp;
use skillgate_demo_upstream::{
    self as demo_upstream, DemoUpstream, DemoUpstreamOptions, to_mcp_tool,
};

/// Catalog sizes of the study, as in the Skilder paper.
pub const SIZES: [usize; 6] = [15, 30, 60, 105, 165, 225];
/// Tools per role (and per domain).
const ROLE_TOOLS: usize = 15;
/// Skills per role; the role's tools are split evenly between them.
const ROLE_SKILLS: usize = 3;
const SCOPE: &str = "all-desks";
/// The role the lookup task learns, and the tool it calls.
const LOOKUP_ROLE: &str = "tier-1-support";
const LOOKUP_TOOL: &str = "lookup_customer";

/// Tool-name prefix and title of each domain; the first serves the demo tools unrenamed.
const DOMAINS: [(&str, &str); 15] = [
    ("", "Customer support"),
    ("fleet", "Fleet management"),
    ("warehouse", "Warehouse"),
    ("payroll", "Payroll"),
    ("procurement", "Procurement"),
    ("claims", "Insurance claims"),
    ("lending", "Consumer lending"),
    ("travel", "Travel desk"),
    ("clinic", "Clinic front desk"),
    ("telecom", "Telecom care"),
    ("retail", "Retail stores"),
    ("energy", "Energy accounts"),
    ("tax", "Tax filing"),
    ("legal", "Legal intake"),
    ("realty", "Property management"),
];

/// What the agent says its task is when it starts the session: `init_skilder` uses it to
/// pick the roles it describes.
const TASK_SUMMARY: &str = "Look up the account of customer C-1001";

#[derive(Debug, Args)]
pub struct ContextCostArgs {
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

/// What an agent receives for one catalog size, in bytes of JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub tools: usize,
    pub roles: usize,
    /// (a) a `tools/list` result with every tool definition.
    pub flat: usize,
    /// (b) the `tools/list` result of `/mcp` (the platform tools) …
    pub platform_tools: usize,
    /// … how many tool definitions it held …
    pub platform_tool_count: usize,
    /// … and the `init_skilder` (with the task summary), `learn` and `call_tool` results.
    pub init: usize,
    /// `init_skilder` without a task summary: every role described.
    pub init_without_summary: usize,
    pub learn: usize,
    pub call: usize,
    /// The same three results without `structuredContent` (what a host that shows the
    /// model only `content` passes on).
    pub text_only: usize,
}

impl Row {
    pub fn protocol(&self) -> usize {
        self.platform_tools + self.init + self.learn + self.call
    }

    fn share_of_flat(&self) -> f64 {
        self.protocol() as f64 / self.flat as f64
    }

    pub fn protocol_text_only(&self) -> usize {
        self.platform_tools + self.text_only
    }
}

/// Approximate tokens: bytes / 4.
fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(4)
}

pub async fn run(args: ContextCostArgs) -> anyhow::Result<()> {
    let rows = measure(&SIZES).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&rows))?);
    } else {
        print!("{}", markdown(&rows));
    }
    Ok(())
}

/// Measures every size in `sizes` (multiples of 15).
pub async fn measure(sizes: &[usize]) -> anyhow::Result<Vec<Row>> {
    // One demo upstream serves `lookup_customer` for every size.
    let upstream = Arc::new(DemoUpstream::new(DemoUpstreamOptions::default())?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let (upstream_url, upstream_task) = serve(listener, demo_upstream::http_router(upstream))?;
    let upstream_url = format!("{upstream_url}{}", mcp::MCP_PATH);
    let mut rows = Vec::with_capacity(sizes.len());
    for &size in sizes {
        rows.push(measure_one(size, &upstream_url).await?);
    }
    upstream_task.abort();
    Ok(rows)
}

fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
) -> anyhow::Result<(String, JoinHandle<()>)> {
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    Ok((format!("http://{addr}"), task))
}

async fn measure_one(size: usize, upstream_url: &str) -> anyhow::Result<Row> {
    anyhow::ensure!(
        size > 0 && size.is_multiple_of(ROLE_TOOLS) && size / ROLE_TOOLS <= DOMAINS.len(),
        "catalog sizes are multiples of {ROLE_TOOLS} up to {}",
        ROLE_TOOLS * DOMAINS.len()
    );
    let catalog = SyntheticCatalog::new(size / ROLE_TOOLS);
    let flat_list =
        ListToolsResult::with_all_items(catalog.tools.iter().map(to_mcp_tool).collect());
    let flat = serde_json::to_string(&flat_list)?.len();

    let dir = ScratchDir::new("context-cost")?;
    let store = Store::open(&dir.database_url()).await?;
    let key = catalog.seed(&store, upstream_url).await?;
    let upstreams = Arc::new(UpstreamPool::default());
    upstreams.upsert(
        demo_upstream_slug().as_str(),
        UpstreamConfig::http(upstream_url, None),
    );
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await?));
    let audit = AuditLog::new(store.clone());
    let admin = Arc::new(AdminService::new(
        store.clone(),
        audit.clone(),
        catalog.clone(),
    ));
    let gateway = Gateway::new(
        store.clone(),
        catalog,
        audit,
        upstreams,
        GatewayOptions::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let bind = listener.local_addr()?;
    let served = mcp::workspaces::Served {
        keys: AgentKeys::new(store.clone()),
        gateway: Arc::new(gateway),
        admin,
    };
    let router = mcp::router(
        Arc::new(mcp::workspaces::Workspaces::default_only(served)),
        mcp::McpOptions {
            bind,
            anonymous_scope: None,
            allowed_origins: Vec::new(),
            max_body_bytes: mcp::DEFAULT_MAX_BODY_BYTES,
            oauth: None,
            issuers: None,
            resource_metadata_url: None,
        },
    );
    let (base, task) = serve(listener, router)?;
    let url = format!("{base}{}", mcp::MCP_PATH);
    let client = harness::connect(&url, Some(&key)).await?;

    let listed = client
        .list_tools(None)
        .await
        .context("tools/list on /mcp")?;
    let platform_tool_count = listed.tools.len();
    let platform_tools = serde_json::to_string(&listed)?.len();
    let bare_init = harness::call(&client, "init_skilder", json!({})).await?;
    let init = harness::call(
        &client,
        "init_skilder",
        json!({"task_summary": TASK_SUMMARY}),
    )
    .await?;
    let session = init
        .structured_content
        .as_ref()
        .and_then(|s| s["session_id"].as_str())
        .map(str::to_owned)
        .context("init_skilder returned no session_id")?;
    let learn = harness::call(
        &client,
        "learn",
        json!({"path": format!("/roles/{LOOKUP_ROLE}"), "session_id": session}),
    )
    .await?;
    let call = harness::call(
        &client,
        "call_tool",
        json!({"tool": LOOKUP_TOOL, "arguments": {"customer_id": "C-1001"}, "session_id": session}),
    )
    .await?;
    for (name, result) in [
        ("init_skilder", &init),
        ("learn", &learn),
        ("call_tool", &call),
    ] {
        anyhow::ensure!(
            result.is_error != Some(true),
            "{name} failed at {size} tools: {}",
            harness::text_of(result)
        );
    }
    let _ = client.cancel().await;
    task.abort();
    store.close().await;
    Ok(Row {
        tools: size,
        roles: size / ROLE_TOOLS,
        flat,
        platform_tools,
        platform_tool_count,
        init: wire_bytes(&serde_json::to_value(&init)?),
        init_without_summary: wire_bytes(&serde_json::to_value(&bare_init)?),
        learn: wire_bytes(&serde_json::to_value(&learn)?),
        call: wire_bytes(&serde_json::to_value(&call)?),
        text_only: [&init, &learn, &call]
            .into_iter()
            .map(|result| {
                let mut value = serde_json::to_value(result)?;
                if let Some(object) = value.as_object_mut() {
                    object.remove("structuredContent");
                }
                Ok(value.to_string().len())
            })
            .sum::<anyhow::Result<usize>>()?,
    })
}

/// Bytes of a result as JSON, with the session's expiry written at a fixed precision (its
/// fractional seconds otherwise vary in length from run to run).
fn wire_bytes(result: &Value) -> usize {
    let mut result = result.clone();
    if let Some(expires) = result.pointer_mut("/structuredContent/expires_at")
        && let Some(parsed) = expires
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    {
        *expires = json!(parsed.to_utc().to_rfc3339_opts(SecondsFormat::Nanos, true));
    }
    result.to_string().len()
}

fn demo_upstream_slug() -> Slug {
    Slug::parse(skillgate_core::demo::catalog::DEMO_UPSTREAM).expect("a slug")
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap_or_else(|e| panic!("`{text}` is not a slug: {e}"))
}

/// A catalog of `roles` domains with fifteen tools, three skills and one role each, all in
/// one scope.
struct SyntheticCatalog {
    tools: Vec<ToolSpec>,
    skills: Vec<Skill>,
    roles: Vec<Role>,
    scope: Scope,
}

impl SyntheticCatalog {
    fn new(roles: usize) -> Self {
        let demo = tool_specs();
        let mut catalog = Self {
            tools: Vec::new(),
            skills: Vec::new(),
            roles: Vec::new(),
            scope: Scope {
                slug: slug(SCOPE),
                description: "Agents that may work at every desk.".to_owned(),
                roles: Vec::new(),
                guardrails: Vec::new(),
            },
        };
        for &(prefix, title) in DOMAINS.iter().take(roles) {
            let name = |tool: &str| {
                if prefix.is_empty() {
                    tool.to_owned()
                } else {
                    format!("{prefix}_{tool}")
                }
            };
            let tools: Vec<ToolSpec> = demo
                .iter()
                .map(|spec| ToolSpec {
                    name: name(&spec.name),
                    description: if prefix.is_empty() {
                        spec.description.clone()
                    } else {
                        format!("{title}: {}", spec.description)
                    },
                    input_schema: spec.input_schema.clone(),
                    output_schema: None,
                    annotations: None,
                    sensitive_args: spec.sensitive_args.clone(),
                })
                .collect();
            let role_slug = if prefix.is_empty() {
                LOOKUP_ROLE.to_owned()
            } else {
                format!("{prefix}-operations")
            };
            let skill_prefix = if prefix.is_empty() { "support" } else { prefix };
            let per_skill = ROLE_TOOLS / ROLE_SKILLS;
            let mut skill_slugs = Vec::new();
            for (index, (kind, purpose)) in [
                ("intake", "identify who is asking, read their records and decide what they are entitled to"),
                ("resolution", "resolve the case: tickets, extensions, credits and escalations"),
                ("follow-up", "follow up on billing, security and account changes after the case"),
            ]
            .into_iter()
            .enumerate()
            {
                let skill_tools: Vec<String> = tools[index * per_skill..(index + 1) * per_skill]
                    .iter()
                    .map(|t| t.name.clone())
                    .collect();
                let skill = Skill {
                    slug: slug(&format!("{skill_prefix}-{kind}")),
                    description: format!("{title}: {purpose}."),
                    instructions: skill_instructions(title, purpose, &skill_tools),
                    tools: skill_tools,
                    resources: Vec::new(),
                    frontmatter_extra: Default::default(),
                };
                skill_slugs.push(skill.slug.clone());
                catalog.skills.push(skill);
            }
            let refund = name("process_refund");
            let limits = serde_json::from_value::<Vec<Limit>>(json!([
                {"kind": "arg_bound", "tool": refund, "arg": "amount", "check": "compare", "op": "<=", "value": "500"},
                {"kind": "requires", "tool": refund, "after": [name("check_refund_eligibility")]},
            ]))
            .expect("the synthetic limits deserialize");
            catalog.roles.push(Role {
                slug: slug(&role_slug),
                title: format!("{title} agent"),
                description: format!(
                    "{title}: look up the people and records of the desk, read their history, open and escalate cases, and refund eligible charges up to 500 per refund."
                ),
                instructions: format!(
                    "You work the {title} desk. Identify who you are talking to before anything else and keep one case per request. Read the history before you change anything, answer from the desk's policy rather than from memory, and hand anything outside your limits to a human through the escalation tool. Never repeat payment details back."
                ),
                skills: skill_slugs,
                limits,
            });
            catalog.scope.roles.push(slug(&role_slug));
            catalog.tools.extend(tools);
        }
        catalog
    }

    /// Writes the catalog with its upstream at `upstream_url`; returns a key for its scope.
    async fn seed(&self, store: &Store, upstream_url: &str) -> anyhow::Result<String> {
        let upstream = demo_upstream_slug();
        store
            .upsert_upstream(&Upstream {
                name: upstream.clone(),
                kind: UpstreamKind::Http {
                    url: upstream_url.to_owned(),
                    ca_bundle: None,
                    allow_plaintext: false,
                },
            })
            .await?;
        store.seed_tools(&upstream, &self.tools).await?;
        for skill in &self.skills {
            store.create_skill(skill).await?;
        }
        for role in &self.roles {
            store.create_role(role).await?;
        }
        store.create_scope(&self.scope).await?;
        let (_, key) = AgentKeys::new(store.clone())
            .create(
                "context-cost",
                &self.scope.slug,
                std::slice::from_ref(&self.scope.slug),
                None,
                None,
            )
            .await?;
        Ok(key.expose().to_owned())
    }
}

/// About 1 KB of instructions naming the skill's tools.
fn skill_instructions(title: &str, purpose: &str, tools: &[String]) -> String {
    let listed: Vec<String> = tools.iter().map(|t| format!("`{t}`")).collect();
    let mut text = format!(
        "Use this skill at the {title} desk to {purpose}. Its tools are {}.\n\n",
        listed.join(", ")
    );
    let steps = [
        "Confirm the identity of the person you are helping with the lookup tool before you read or change anything; ask for an id or an email if you have neither.",
        "Read the history that belongs to the request and quote the record you rely on, with its id, in every answer.",
        "Check eligibility with the checking tool before you act on money; its answer, not the customer's account of events, decides.",
        "Keep one ticket per case and write down what you did and why, so the next person can pick it up without asking again.",
        "When a request is outside your limits, say so plainly, escalate it with the case id, and do not promise an outcome.",
        "Close the case with a short summary: what was asked, what you found, what you did, and what happens next.",
    ];
    for (number, step) in steps.iter().enumerate() {
        text.push_str(&format!("{}. {step}\n", number + 1));
    }
    text
}

fn growth(rows: &[Row], value: impl Fn(&Row) -> usize) -> Option<f64> {
    let first = rows.first()?;
    let last = rows.last()?;
    Some(value(last) as f64 / value(first) as f64)
}

fn to_json(rows: &[Row]) -> Value {
    let sizes: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({
                "tools": row.tools,
                "roles": row.roles,
                "flat_bytes": row.flat,
                "flat_tokens_approx": tokens(row.flat),
                "protocol": {
                    "platform_tools_bytes": row.platform_tools,
                    "platform_tool_count": row.platform_tool_count,
                    "init_bytes": row.init,
                    "init_without_task_summary_bytes": row.init_without_summary,
                    "learn_bytes": row.learn,
                    "call_bytes": row.call,
                    "total_bytes": row.protocol(),
                    "total_tokens_approx": tokens(row.protocol()),
                    "text_only_total_bytes": row.protocol_text_only(),
                },
                "protocol_share_of_flat": (row.share_of_flat() * 1000.0).round() / 1000.0,
            })
        })
        .collect();
    json!({
        "tokens": "approximate: bytes / 4",
        "sizes": sizes,
        "growth_flat": growth(rows, |r| r.flat),
        "growth_protocol": growth(rows, Row::protocol),
        "growth_protocol_text_only": growth(rows, Row::protocol_text_only),
    })
}

fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| tools | roles | flat bytes | flat ≈tokens | platform tools | init | learn | call | protocol bytes | protocol ≈tokens | protocol / flat | text-only protocol bytes | init without task summary |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1}% | {} | {} |\n",
            row.tools,
            row.roles,
            row.flat,
            tokens(row.flat),
            row.platform_tools,
            row.init,
            row.learn,
            row.call,
            row.protocol(),
            tokens(row.protocol()),
            row.share_of_flat() * 100.0,
            row.protocol_text_only(),
            row.init_without_summary,
        ));
    }
    if let (Some(flat), Some(protocol), Some(text), Some(last)) = (
        growth(rows, |r| r.flat),
        growth(rows, Row::protocol),
        growth(rows, Row::protocol_text_only),
        rows.last(),
    ) {
        let first = &rows[0];
        out.push_str(&format!(
            "\nTokens are approximate (bytes / 4). Growth {} / {} tools: flat {flat:.2}x, protocol {protocol:.2}x \
             (text only {text:.2}x; target <= 1.15x). Protocol at {} tools: {:.1}% of flat (text only {:.1}%; target <= 15%).\n",
            last.tools,
            first.tools,
            last.tools,
            last.share_of_flat() * 100.0,
            last.protocol_text_only() as f64 / last.flat as f64 * 100.0,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_study_gives_the_same_bytes_twice_and_shows_four_platform_tools() {
        let first = measure(&[15, 30]).await.unwrap();
        let second = measure(&[15, 30]).await.unwrap();
        assert_eq!(first, second);
        for row in &first {
            assert_eq!(row.platform_tool_count, 4, "{row:?}");
            assert!(row.flat > row.platform_tools, "{row:?}");
        }
        assert!(first[1].flat > first[0].flat);
    }

    #[test]
    fn synthetic_roles_have_fifteen_tools_and_about_a_kilobyte_per_skill() {
        let catalog = SyntheticCatalog::new(15);
        assert_eq!(catalog.tools.len(), 225);
        assert_eq!(catalog.roles.len(), 15);
        assert_eq!(catalog.scope.roles.len(), 15);
        for skill in &catalog.skills {
            let bytes = skill.instructions.len();
            assert!((800..=1400).contains(&bytes), "{}: {bytes}", skill.slug);
        }
    }
}
