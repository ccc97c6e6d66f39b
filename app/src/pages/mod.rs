//! Console pages, one module each.

mod candidates;
mod catalog;
mod changes;
mod charts;
mod connect;
mod connected;
mod consent;
mod dashboard;
mod forms;
mod holds;
mod limit_editor;
mod login;
mod not_found;
mod role_edit;
mod roles;
mod scope_edit;
mod scopes;
mod sessions;
mod skill_edit;
mod skill_revisions;
mod skills;
mod tool_edit;
mod tools;
mod upstreams;
mod users;

pub use candidates::{CandidatePage, CandidatesPage};
pub use changes::ChangesPage;
pub use connect::ConnectPage;
pub use connected::ConnectedPage;
pub use consent::ConsentPage;
pub use dashboard::Dashboard;
pub use holds::{HoldPage, HoldsPage};
pub use login::LoginPage;
pub use not_found::NotFound;
pub use role_edit::{NewRolePage, RoleEditPage};
pub use roles::{RolePage, RolesPage};
pub use scope_edit::{NewScopePage, ScopeEditPage};
pub use scopes::ScopesPage;
pub use sessions::{AuditPage, SessionPage, SessionsPage};
pub use skill_edit::{SkillEditPage, SkillVersionPage};
pub use skill_revisions::SkillRevisions;
pub use skills::{SkillPage, SkillsPage};
pub use tools::{ToolPage, ToolsPage};
pub use upstreams::UpstreamsPage;
pub use users::UsersPage;

use leptos::prelude::*;

use crate::api::ConsoleError;

/// How a page shows a failed server function: a clear sentence, styled as an alert.
#[component]
pub fn ErrorNotice(error: ConsoleError) -> impl IntoView {
    let heading = match &error {
        ConsoleError::Forbidden { .. } => "Not allowed",
        ConsoleError::Unauthorized => "Signed out",
        _ => "Could not load this page",
    };
    // `error-panel` tells a page that failed to load from a finding it reports (a broken
    // hash chain is an alert too): the browser suite fails on the first, never the second.
    view! {
        <div class="notice error error-panel" role="alert">
            <strong>{heading}</strong>
            <p>{error.to_string()}</p>
        </div>
    }
}
