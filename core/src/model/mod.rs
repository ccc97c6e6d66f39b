//! Catalog domain types: tools, upstreams, skills, roles, limits and scopes.

mod catalog;
pub mod curation;
mod error;
mod hook;
mod inspection;
mod limit;
mod role;
mod scope;
mod skill;
mod tool;
mod upstream;

pub use catalog::{Catalog, CatalogDraft, CatalogTool};
pub use error::CatalogError;
pub use hook::{
    GuardrailHook, HOOK_TIMEOUT_MS, HOOK_TIMEOUT_RANGE, HookFailure, HookStage, hook_issues,
};
pub use inspection::{
    CallScope, DefinitionPolicy, EgressPolicy, FoundBy, InspectAction, InspectionPolicy,
    InspectionRule, Inspector, Resolved, SchemaPolicy, SecretSource, valid_field_pointer,
};
pub use limit::{
    ApprovalCondition, ArgCheck, CmpOp, DEFAULT_APPROVAL_MINUTES, Limit, MAX_APPROVAL_MINUTES,
    ResultCheck,
};
pub use role::{MAX_ROLE_DESCRIPTION, Role};
pub use scope::Scope;
pub use skill::{Resource, Skill, SkillVersion};
pub use tool::{ToolSpec, quarantine_reason};
pub use upstream::{Upstream, UpstreamIdentity, UpstreamKind, check_upstream_url};
