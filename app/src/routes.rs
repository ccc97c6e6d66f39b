//! The console's lazy pages.
//!
//! Each page below, the dashboard and the sign-in page included, is compiled into its own
//! chunk of the browser bundle and fetched the first time it is shown: the browser downloads
//! the frame up front and nothing else. The server renders them exactly as before (a lazy
//! page is only an `async` view there), so pages without JavaScript are unchanged.
//!
//! Every route's view is a [`Page`], one type, so the router's generic code is compiled once
//! for all of them rather than once per page in the main module (16 KB of it).
//!
//! A page carries no data of its own: each loads its data through resources, which
//! hydration reads from the server's render, so splitting adds no request for data.

use std::future::Future;
use std::pin::Pin;

use leptos::lazy;
use leptos::prelude::*;
use leptos_router::ChooseView;

use crate::changes::ChangesPage;
use crate::compliance::{AuditPage, SessionPage, SessionsPage};
use crate::connect::ConnectPage;
use crate::dashboard::Dashboard;
use crate::holds::{HoldPage, HoldsPage};
use crate::inspection::InspectorsPage;
use crate::login::LoginPage;
use crate::notifiers::NotifiersPage;
use crate::oauth::{ConnectedPage, ConsentPage};
use crate::revisions::{CandidatePage, CandidatesPage};
use crate::roles::{NewRolePage, RoleEditPage, RolePage, RolesPage};
use crate::scopes::{NewScopePage, ScopeEditPage, ScopesPage};
use crate::skills::{SkillEditPage, SkillPage, SkillVersionPage, SkillsPage};
use crate::tokens::TokensPage;
use crate::tools::{ToolPage, ToolsPage};
use crate::upstreams::UpstreamsPage;
use crate::users::UsersPage;

/// The view of a lazy route: renders its page after fetching the page's chunk.
#[derive(Clone, Copy)]
pub struct Page {
    view: fn() -> Pin<Box<dyn Future<Output = AnyView>>>,
    preload: fn() -> Pin<Box<dyn Future<Output = ()>>>,
}

impl ChooseView for Page {
    async fn choose(self) -> AnyView {
        (self.view)().await
    }

    // The router awaits this before it hydrates or shows the page: the chunk is there by then.
    async fn preload(&self) {
        (self.preload)().await;
    }
}

/// Declares each page: the lazy function that renders it (its chunk), and the `Page` the
/// route in `lib.rs` shows.
macro_rules! lazy_pages {
    ($($route:ident, $render:ident, $preload:ident => $page:ident),* $(,)?) => {
        $(
            #[lazy]
            fn $render() -> AnyView {
                view! { <$page /> }.into_any()
            }

            pub const $route: Page = Page {
                view: || {
                    // The server names the page's modules in its <head> (crate::preload).
                    #[cfg(feature = "ssr")]
                    crate::preload::ssr::announce(stringify!($render));
                    Box::pin($render())
                },
                preload: || Box::pin(async {
                    // Only the browser fetches chunks; the server has every page.
                    #[cfg(target_arch = "wasm32")]
                    $preload().await;
                }),
            };
        )*
    };
}

lazy_pages! {
    DASHBOARD, dashboard_page, __preload_dashboard_page => Dashboard,
    LOGIN, login_page, __preload_login_page => LoginPage,
    ROLES, roles_page, __preload_roles_page => RolesPage,
    NEW_ROLE, new_role_page, __preload_new_role_page => NewRolePage,
    ROLE, role_page, __preload_role_page => RolePage,
    ROLE_EDIT, role_edit_page, __preload_role_edit_page => RoleEditPage,
    SKILLS, skills_page, __preload_skills_page => SkillsPage,
    SKILL, skill_page, __preload_skill_page => SkillPage,
    SKILL_EDIT, skill_edit_page, __preload_skill_edit_page => SkillEditPage,
    SKILL_VERSION, skill_version_page, __preload_skill_version_page => SkillVersionPage,
    TOOLS, tools_page, __preload_tools_page => ToolsPage,
    TOOL, tool_page, __preload_tool_page => ToolPage,
    SCOPES, scopes_page, __preload_scopes_page => ScopesPage,
    UPSTREAMS, upstreams_page, __preload_upstreams_page => UpstreamsPage,
    INSPECTORS, inspectors_page, __preload_inspectors_page => InspectorsPage,
    NEW_SCOPE, new_scope_page, __preload_new_scope_page => NewScopePage,
    SCOPE_EDIT, scope_edit_page, __preload_scope_edit_page => ScopeEditPage,
    SESSIONS, sessions_page, __preload_sessions_page => SessionsPage,
    SESSION, session_page, __preload_session_page => SessionPage,
    AUDIT, audit_page, __preload_audit_page => AuditPage,
    HOLDS, holds_page, __preload_holds_page => HoldsPage,
    HOLD, hold_page, __preload_hold_page => HoldPage,
    CANDIDATES, candidates_page, __preload_candidates_page => CandidatesPage,
    CANDIDATE, candidate_page, __preload_candidate_page => CandidatePage,
    USERS, users_page, __preload_users_page => UsersPage,
    CHANGES, changes_page, __preload_changes_page => ChangesPage,
    CONNECT, connect_page, __preload_connect_page => ConnectPage,
    CONNECTED, connected_page, __preload_connected_page => ConnectedPage,
    TOKENS, tokens_page, __preload_tokens_page => TokensPage,
    NOTIFICATIONS, notifications_page, __preload_notifications_page => NotifiersPage,
    CONSENT, consent_page, __preload_consent_page => ConsentPage,
}
