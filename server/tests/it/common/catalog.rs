//! The one path to some tools most tests need before an agent key can call anything: a
//! skill listing the tools, a role with that skill and no limits, and a scope with that role.

use skillgate_core::model::{Role, Scope, Skill};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

/// The slugs of the skill, role and scope [`grant`] creates, and the tools they grant.
pub struct Grant<'a> {
    pub skill: &'a str,
    pub role: &'a str,
    pub scope: &'a str,
    pub tools: Vec<String>,
}

/// Creates the skill, the role and the scope of `grant` in `store`.
pub async fn grant(store: &Store, grant: Grant<'_>) {
    let slug = |s: &str| Slug::parse(s).unwrap();
    store
        .create_skill(&Skill {
            slug: slug(grant.skill),
            description: format!("The tools the {} role may call.", grant.role),
            instructions: "Use them.".to_owned(),
            tools: grant.tools,
            resources: Vec::new(),
            frontmatter_extra: Default::default(),
        })
        .await
        .unwrap();
    store
        .create_role(&Role {
            slug: slug(grant.role),
            title: grant.role.to_owned(),
            description: "A role of the test's catalog.".to_owned(),
            instructions: "Call the tools.".to_owned(),
            skills: vec![slug(grant.skill)],
            limits: Vec::new(),
        })
        .await
        .unwrap();
    store
        .create_scope(&Scope {
            slug: slug(grant.scope),
            description: String::new(),
            roles: vec![slug(grant.role)],
            guardrails: Vec::new(),
        })
        .await
        .unwrap();
}
