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
pub mod notifiers;
pub mod oauth;
pub mod preload;
pub mod revisions;
pub mod roles;
pub mod scopes;
pub mod skills;
pub mod tokens;
pub mod tools;
pub mod upstreams;
pub mod users;
pub mod whatif;

mod routes;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{ParentRoute, Route, Router, Routes};
use leptos_router::{SsrMode, path};

use crate::components::{ConsoleLayout, NotFound};
use crate::preload::SplitLoaderPreload;

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
                <SplitLoaderPreload />
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
                <Route path=path!("/login") view=routes::LOGIN ssr=SsrMode::Async />
                <ParentRoute path=path!("") view=ConsoleLayout ssr=SsrMode::Async>
                    <Route path=path!("") view=routes::DASHBOARD ssr=SsrMode::Async />
                    <Route
                        path=path!("roles")
                        view=routes::ROLES
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("roles/new")
                        view=routes::NEW_ROLE
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("roles/:slug")
                        view=routes::ROLE
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("roles/:slug/edit")
                        view=routes::ROLE_EDIT
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills")
                        view=routes::SKILLS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills/:slug")
                        view=routes::SKILL
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills/:slug/edit")
                        view=routes::SKILL_EDIT
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("skills/:slug/versions/:version")
                        view=routes::SKILL_VERSION
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("tools")
                        view=routes::TOOLS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("tools/:name")
                        view=routes::TOOL
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("scopes")
                        view=routes::SCOPES
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("upstreams")
                        view=routes::UPSTREAMS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("inspectors")
                        view=routes::INSPECTORS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("scopes/new")
                        view=routes::NEW_SCOPE
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("scopes/:slug")
                        view=routes::SCOPE_EDIT
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("sessions")
                        view=routes::SESSIONS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("sessions/:id")
                        view=routes::SESSION
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("audit")
                        view=routes::AUDIT
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("holds")
                        view=routes::HOLDS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("holds/:id")
                        view=routes::HOLD
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("candidates")
                        view=routes::CANDIDATES
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("candidates/:id")
                        view=routes::CANDIDATE
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("users")
                        view=routes::USERS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("connect")
                        view=routes::CONNECT
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("connected")
                        view=routes::CONNECTED
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("tokens")
                        view=routes::TOKENS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("notifications")
                        view=routes::NOTIFICATIONS
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("oauth/consent/:id")
                        view=routes::CONSENT
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=path!("changes/:kind/:name")
                        view=routes::CHANGES
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
