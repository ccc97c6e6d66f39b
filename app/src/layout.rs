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
                <Outlet />
            </main>
        </div>
    }
}
