//! Wire types shared by the catalog editors (roles, scopes, skills, tools, limits).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Checkbox groups post as `name[item]=on`, which arrives as a map; absent when none ticked.
pub type Checked = Option<BTreeMap<String, String>>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub name: String,
    pub note: String,
}

/// One argument a limit may name, with what kinds of limit make sense for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgChoice {
    pub name: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChoice {
    pub name: String,
    pub args: Vec<ArgChoice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitView {
    pub index: usize,
    /// What an agent reads.
    pub sentence: String,
    /// The compact notation, e.g. `process_refund.amount <= 500`.
    pub rule: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceEdit {
    pub name: String,
    pub title: String,
    pub content: String,
    /// Ticked in the form: leave this resource out of the new version.
    pub remove: Option<String>,
}

/// One line of a text diff (a candidate's instructions, a pinned tool's schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffLine {
    /// `equal`, `insert` or `delete`.
    pub tag: String,
    pub text: String,
}
