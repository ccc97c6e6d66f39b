//! The Skillgate admin console: a Leptos app rendered on the server and hydrated in the
//! browser. Each feature (`roles/`, `skills/`, `holds/`, …) holds its pages beside the server
//! functions they call; server functions call core services taken from context. No SQL lives in this crate.

// Leptos views are nested generic types; the hydrate build in the size-optimised release
// profile computes layouts deeper than the default limit of 128 (the scopes page's key
// table overflowed it).
#![recursion_limit = "256"]

// Layers, top to bottom; imports point down only: `lib`/`routes` → features → `catalog`
// (what the catalog features share) → `components` → `shared`.
pub mod shared;

pub mod catalog;
pub mod components;

pub mod changes;
pub mod compliance;
pub mod connect;
pub mod dashboard;
pub mod holds;
pub mod inspection;
pub mod limits;
pub mod login;
pub mod oauth;
pub mod revisions;
pub mod roles;
pub mod scopes;
pub mod skills;
pub mod tools;
pub mod upstreams;
pub mod users;

mod routes;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{ParentRoute, Route, Router, Routes};
use leptos_router::{Lazy, SsrMode, path};

use crate::components::{ConsoleLayout, NotFound};
use crate::dashboard::Dashboard;
use crate::login::LoginPage;

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    components::csrf::provide_form_token();
    let (routing, set_routing) = signal(false);
    provide_context(components::Routing(routing));
    // Every route renders fully on the server before the first byte (SsrMode::Async), so a
    // browser without JavaScript gets complete pages, not Suspense fallbacks.
    view! {
        <Stylesheet id="leptos" href="/pkg/skillgate.css" />
        <Title formatter=|page: String| format!("{page} · Skillgate") />
        <Router set_is_routing=set_routing>
            <Routes fallback=|| view! { <NotFound /> }>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async />
                <ParentRoute path=path!("") view=ConsoleLayout ssr=SsrMode::Async>
                    <Route path=path!("") view=Dashboard ssr=SsrMode::Async />
                    <Route
                        path=path!("roles")
                        view={Lazy::<routes::RolesRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("roles/new")
                        view={Lazy::<routes::NewRoleRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("roles/:slug")
                        view={Lazy::<routes::RoleRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("roles/:slug/edit")
                        view={Lazy::<routes::RoleEditRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills")
                        view={Lazy::<routes::SkillsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills/:slug")
                        view={Lazy::<routes::SkillRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills/:slug/edit")
                        view={Lazy::<routes::SkillEditRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills/:slug/versions/:version")
                        view={Lazy::<routes::SkillVersionRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("tools")
                        view={Lazy::<routes::ToolsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("tools/:name")
                        view={Lazy::<routes::ToolRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("scopes")
                        view={Lazy::<routes::ScopesRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("upstreams")
                        view={Lazy::<routes::UpstreamsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("inspectors")
                        view={Lazy::<routes::InspectorsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("scopes/new")
                        view={Lazy::<routes::NewScopeRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("scopes/:slug")
                        view={Lazy::<routes::ScopeEditRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("sessions")
                        view={Lazy::<routes::SessionsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("sessions/:id")
                        view={Lazy::<routes::SessionRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("audit")
                        view={Lazy::<routes::AuditRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("holds")
                        view={Lazy::<routes::HoldsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("holds/:id")
                        view={Lazy::<routes::HoldRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("candidates")
                        view={Lazy::<routes::CandidatesRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("candidates/:id")
                        view={Lazy::<routes::CandidateRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("users")
                        view={Lazy::<routes::UsersRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("connect")
                        view={Lazy::<routes::ConnectRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("connected")
                        view={Lazy::<routes::ConnectedRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("oauth/consent/:id")
                        view={Lazy::<routes::ConsentRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("changes/:kind/:name")
                        view={Lazy::<routes::ChangesRoute>::new()}
                        ssr=SsrMode::Async
                    />
                </ParentRoute>
            </Routes>
        </Router>
    }
}

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // Lazy routes hydrate asynchronously: the page's chunk is fetched first.
    _ = any_spawner::Executor::init_wasm_bindgen();
    leptos::task::spawn_local(async {
        leptos::mount::hydrate_from_async(leptos::prelude::document().body().expect("a body"), App)
            .await
            .forget();
        // A flag the end-to-end suite waits for: it proves the wasm bundle and the page's
        // chunk loaded and hydrated, which a broken wasm-opt can silently prevent while the
        // page still renders.
        let _ = js_sys::Reflect::set(
            &leptos::prelude::window(),
            &"__skillgate_hydrated".into(),
            &true.into(),
        );
    });
}
