//! The console's lazy routes.
//!
//! Each page below is compiled into its own chunk of the browser bundle and fetched the first
//! time it is shown: the browser downloads the frame, the dashboard and the sign-in page
//! up front and nothing else. The server renders them exactly as before (a lazy route is
//! only an `async` view there), so pages without JavaScript are unchanged.
//!
//! A route carries no data of its own: each page loads its data through resources, which
//! hydration reads from the server's render, so splitting adds no request.

use leptos::prelude::*;
use leptos_router::{LazyRoute, lazy_route};

use crate::changes::ChangesPage;
use crate::compliance::{AuditPage, SessionPage, SessionsPage};
use crate::connect::ConnectPage;
use crate::holds::{HoldPage, HoldsPage};
use crate::inspection::InspectorsPage;
use crate::oauth::{ConnectedPage, ConsentPage};
use crate::revisions::{CandidatePage, CandidatesPage};
use crate::roles::{NewRolePage, RoleEditPage, RolePage, RolesPage};
use crate::scopes::{NewScopePage, ScopeEditPage, ScopesPage};
use crate::skills::{SkillEditPage, SkillPage, SkillVersionPage, SkillsPage};
use crate::tools::{ToolPage, ToolsPage};
use crate::upstreams::UpstreamsPage;
use crate::users::UsersPage;

macro_rules! lazy_pages {
    ($($route:ident => $page:ident),* $(,)?) => {
        $(
            pub struct $route;

            #[lazy_route]
            impl LazyRoute for $route {
                fn data() -> Self {
                    $route
                }

                fn view(_this: Self) -> AnyView {
                    view! { <$page /> }.into_any()
                }
            }
        )*
    };
}

lazy_pages! {
    RolesRoute => RolesPage,
    NewRoleRoute => NewRolePage,
    RoleRoute => RolePage,
    RoleEditRoute => RoleEditPage,
    SkillsRoute => SkillsPage,
    SkillRoute => SkillPage,
    SkillEditRoute => SkillEditPage,
    SkillVersionRoute => SkillVersionPage,
    ToolsRoute => ToolsPage,
    ToolRoute => ToolPage,
    ScopesRoute => ScopesPage,
    UpstreamsRoute => UpstreamsPage,
    InspectorsRoute => InspectorsPage,
    NewScopeRoute => NewScopePage,
    ScopeEditRoute => ScopeEditPage,
    SessionsRoute => SessionsPage,
    SessionRoute => SessionPage,
    AuditRoute => AuditPage,
    HoldsRoute => HoldsPage,
    HoldRoute => HoldPage,
    CandidatesRoute => CandidatesPage,
    CandidateRoute => CandidatePage,
    UsersRoute => UsersPage,
    ChangesRoute => ChangesPage,
    ConnectRoute => ConnectPage,
    ConnectedRoute => ConnectedPage,
    ConsentRoute => ConsentPage,
}
