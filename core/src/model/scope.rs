//! Scopes: the set of roles an agent key may learn.

use serde::{Deserialize, Serialize};

use crate::slug::Slug;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub slug: Slug,
    #[serde(default)]
    pub description: String,
    pub roles: Vec<Slug>,
}
