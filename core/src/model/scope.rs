//! Scopes: the set of roles an agent key may learn, and the guardrails that bind them all.

use serde::{Deserialize, Serialize};

use super::Limit;
use crate::slug::Slug;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    pub slug: Slug,
    #[serde(default)]
    pub description: String,
    pub roles: Vec<Slug>,
    /// Limits that bind every call of the scope's sessions, under every role: a role the
    /// scope allows can never lift them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrails: Vec<Limit>,
}

impl Scope {
    /// One readable sentence per guardrail, in declaration order.
    pub fn guardrail_sentences(&self) -> Vec<String> {
        self.guardrails.iter().map(Limit::sentence).collect()
    }
}
