//! The console frame: header, navigation, sign-out, the loading bar, and the page outlet.

use leptos::prelude::*;
use leptos_router::components::Outlet;

use super::RoutingProgress;
use super::csrf::CsrfField;
use super::nav::{GroupNav, SectionsNav};
use crate::shared::whoami;

/// Whether the router is fetching the next page (its code or its data); set by `<Router>`.
#[derive(Clone, Copy)]
pub struct Routing(pub ReadSignal<bool>);

#[component]
pub fn ConsoleLayout() -> impl IntoView {
    let me = Resource::new(|| (), |_| whoami());
    let routing = use_context::<Routing>()
        .map(|r| r.0)
        .unwrap_or_else(|| signal(false).0);
    view! {
        <div class="frame">
            <RoutingProgress routing />
            <header class="topbar">
                <a class="brand" href="/">
                    "Skillgate"
                </a>
                <SectionsNav />
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        match me.await {
                            Ok(Some(me)) => {
                                view! {
                                    <div class="who">
                                        <span class="who-name">{me.name}</span>
                                        <span class="badge">{me.role}</span>
                                        <form method="post" action="/logout">
                                            <CsrfField />
                                            <button type="submit" class="link-button">
                                                "Sign out"
                                            </button>
                                        </form>
                                    </div>
                                }
                                    .into_any()
                            }
                            _ => view! { <a href="/login">"Sign in"</a> }.into_any(),
                        }
                    })}
                </Suspense>
            </header>
            <GroupNav />
            <main class="content" id="main">
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        me.await
                            .ok()
                            .flatten()
                            .and_then(|me| me.catalog_file)
                            .map(|file| view! { <CatalogAsCode file /> })
                    })}
                </Suspense>
                <Outlet />
            </main>
        </div>
    }
}

/// The banner of a console whose catalog is managed as code: git is the source of truth,
/// so catalog pages are for reading and every catalog save here is refused.
#[component]
fn CatalogAsCode(file: String) -> impl IntoView {
    view! {
        <p class="notice gitops" role="status" aria-label="Catalog managed as code">
            <strong>"Read-only catalog. "</strong>
            "The catalog is managed as code in "
            <code>{file}</code>
            ": change it there (in git) and the gateway applies it. Users, settings and \
            upstream credentials can still be changed here."
        </p>
    }
}
