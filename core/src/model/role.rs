//! Roles: a capacity an agent learns, made of skills and bounded by limits.

use serde::{Deserialize, Serialize};

use super::Limit;
use crate::slug::Slug;

/// Longest role description, in characters: it is what `init_skilder` lists, so it stays short.
pub const MAX_ROLE_DESCRIPTION: usize = 500;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Role {
    pub slug: Slug,
    pub title: String,
    pub description: String,
    /// Markdown the agent reads when it learns the role.
    pub instructions: String,
    pub skills: Vec<Slug>,
    #[serde(default)]
    pub limits: Vec<Limit>,
}

impl Role {
    /// One readable sentence per limit, in declaration order: what an agent reads on learning.
    pub fn limit_sentences(&self) -> Vec<String> {
        self.limits.iter().map(Limit::sentence).collect()
    }
}
