//! Console pages, one module each.

mod catalog;
mod charts;
mod dashboard;
mod login;
mod not_found;
mod roles;
mod scopes;
mod section;
mod sessions;
mod skills;
mod tools;
mod users;

pub use dashboard::Dashboard;
pub use login::LoginPage;
pub use not_found::NotFound;
pub use roles::{RolePage, RolesPage};
pub use scopes::ScopesPage;
pub use section::{Section, SectionKind};
pub use sessions::{AuditPage, SessionPage, SessionsPage};
pub use skills::{SkillPage, SkillsPage};
pub use tools::{ToolPage, ToolsPage};
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
    view! {
        <div class="notice error" role="alert">
            <strong>{heading}</strong>
            <p>{error.to_string()}</p>
        </div>
    }
}
