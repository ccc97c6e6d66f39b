//! The console frame: header, navigation, sign-out, and the page outlet.

use crate::csrf::CsrfField;
use leptos::prelude::*;
use leptos_router::components::{A, Outlet};

use crate::api::whoami;

const SECTIONS: &[(&str, &str)] = &[
    ("/", "Dashboard"),
    ("/roles", "Roles"),
    ("/skills", "Skills"),
    ("/tools", "Tools"),
    ("/upstreams", "Upstreams"),
    ("/scopes", "Scopes & keys"),
    ("/connect", "Connect an agent"),
    ("/connected", "Connected clients"),
    ("/sessions", "Sessions"),
    ("/holds", "Holds"),
    ("/candidates", "Candidates"),
    ("/users", "Users"),
];

#[component]
pub fn ConsoleLayout() -> impl IntoView {
    let me = Resource::new(|| (), |_| whoami());
    view! {
        <div class="frame">
            <header class="topbar">
                <a class="brand" href="/">
                    "Skillgate"
                </a>
                <nav aria-label="Sections">
                    <ul class="nav">
                        {SECTIONS
                            .iter()
                            .map(|(href, label)| {
                                view! {
                                    <li>
                                        <A href=*href exact=true>
                                            {*label}
                                        </A>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                </nav>
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
