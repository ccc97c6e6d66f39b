//! The change log of one catalog entity: its `admin_change` audit events, newest first.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::api::{ChangeRow, change_log};
use crate::components::catalog::code_list;
use crate::components::{ErrorNotice, Loading};

#[component]
pub fn ChangesPage() -> impl IntoView {
    let params = use_params_map();
    let kind = move || params.read().get("kind").unwrap_or_default();
    let name = move || params.read().get("name").unwrap_or_default();
    let changes = Resource::new(move || (kind(), name()), |(k, n)| change_log(k, n));
    let back = move || match kind().as_str() {
        "role" => format!("/roles/{}", name()),
        "skill" => format!("/skills/{}", name()),
        "tool" => format!("/tools/{}", name()),
        "scope" => format!("/scopes/{}", name()),
        _ => "/scopes".to_owned(),
    };
    view! {
        <Title text=move || format!("Changes to {} {}", kind(), name()) />
        <p class="crumbs">
            <a href=back>{move || format!("{} {}", kind(), name())}</a>
        </p>
        <h1>{move || format!("Change log: {} {}", kind(), name())}</h1>
        <p class="lead">
            "Every save is an audit event in the hash chain: who, when, and the entry before and after."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match changes.await {
                    Ok(rows) if rows.is_empty() => {
                        view! { <p class="notice info">"No changes recorded yet."</p> }.into_any()
                    }
                    Ok(rows) => {
                        view! { <ol class="changes">{rows.into_iter().map(change).collect_view()}</ol> }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn change(row: ChangeRow) -> impl IntoView {
    view! {
        <li class="card change">
            <p>
                <strong>{row.action}</strong>
                {format!(" by {} at {} (event #{})", row.actor, row.at, row.seq)}
            </p>
            <div class="muted changed">"Changed: " {code_list(row.changed)}</div>
            <details>
                <summary>"Before and after"</summary>
                <div class="diff">
                    <pre class="schema">
                        <code>{if row.before.is_empty() { "(new)".to_owned() } else { row.before }}</code>
                    </pre>
                    <pre class="schema">
                        <code>{row.after}</code>
                    </pre>
                </div>
            </details>
        </li>
    }
}
