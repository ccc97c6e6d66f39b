//! `skillgate-dev seed-catalog`: adds a large synthetic catalog (an upstream with many
//! tools, one skill and one role per ten tools, one scope) to a database, to measure the
//! console's list pages at scale. The upstream is never started: its tools only need to
//! exist in the catalog for the pages to render them.

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use skillgate_core::model::{
    ArgCheck, CmpOp, Limit, Role, Scope, Skill, ToolSpec, Upstream, UpstreamKind,
};
use skillgate_core::slug::Slug;

use crate::database::DatabaseArg;

#[derive(Debug, Args)]
pub struct SeedCatalogArgs {
    #[command(flatten)]
    pub database: DatabaseArg,
    /// Tools to add (one skill and one role per ten tools).
    #[arg(long, default_value_t = 1000)]
    pub tools: usize,
}

fn slug(text: &str) -> anyhow::Result<Slug> {
    Slug::parse(text).with_context(|| format!("`{text}` is not a slug"))
}

pub async fn run(args: SeedCatalogArgs) -> anyhow::Result<()> {
    let store = args.database.open().await?;
    let upstream = Upstream {
        name: slug("bulk")?,
        kind: UpstreamKind::Http {
            url: "http://127.0.0.1:9/mcp".to_owned(),
            ca_bundle: None,
            allow_plaintext: false,
        },
    };
    store.upsert_upstream(&upstream).await?;
    let specs: Vec<ToolSpec> = (0..args.tools)
        .map(|i| ToolSpec {
            name: format!("bulk_tool_{i:04}"),
            description: format!("Synthetic tool number {i}, for measuring the console at scale."),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "account": {"type": "string", "description": "Which account."},
                    "amount": {"type": "number", "description": "How much."},
                },
                "required": ["account", "amount"],
            }),
            output_schema: None,
            annotations: None,
            sensitive_args: Vec::new(),
        })
        .collect();
    store.seed_tools(&upstream.name, &specs).await?;
    let mut roles = Vec::new();
    for (n, chunk) in specs.chunks(10).enumerate() {
        let skill = Skill {
            slug: slug(&format!("bulk-skill-{n:03}"))?,
            description: format!("Synthetic skill {n}."),
            instructions: format!("# Skill {n}\n\nUse these tools carefully."),
            tools: chunk.iter().map(|t| t.name.clone()).collect(),
            resources: Vec::new(),
            frontmatter_extra: Default::default(),
        };
        store.create_skill(&skill).await?;
        let role = Role {
            slug: slug(&format!("bulk-role-{n:03}"))?,
            title: format!("Bulk role {n}"),
            description: format!("Synthetic role {n} with one skill and one limit."),
            instructions: "Stay within the limits.".to_owned(),
            skills: vec![skill.slug.clone()],
            limits: vec![Limit::ArgBound {
                tool: chunk[0].name.clone(),
                arg: "amount".to_owned(),
                check: ArgCheck::Compare {
                    op: CmpOp::Le,
                    value: 500.into(),
                },
            }],
        };
        store.create_role(&role).await?;
        roles.push(role.slug);
    }
    let scope = Scope {
        slug: slug("bulk")?,
        description: "Every synthetic role.".to_owned(),
        roles,
        guardrails: Vec::new(),
    };
    store.create_scope(&scope).await?;
    println!(
        "added {} tools, {} skills, {} roles and scope `bulk`",
        specs.len(),
        scope.roles.len(),
        scope.roles.len()
    );
    Ok(())
}
