use leptos::prelude::*;
use leptos_meta::Title;

use super::ErrorNotice;
use super::charts::ComplianceCharts;
use crate::api::overview;

#[component]
pub fn Dashboard() -> impl IntoView {
    let data = Resource::new(|| (), |_| overview());
    view! {
        <Title text="Dashboard" />
        <h1>"Dashboard"</h1>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(o) => {
                        view! {
                            <p class="lead">
                                "Signed in as " <strong>{o.me.name.clone()}</strong> " ("
                                {o.me.role.clone()} ")."
                            </p>
                            <div class="cards">
                                <section class="card stat">
                                    <h2>"Database"</h2>
                                    <p class="big">
                                        {if o.database_ok { "answering" } else { "not answering" }}
                                    </p>
                                </section>
                                <section class="card stat">
                                    <h2>"Console users"</h2>
                                    <p class="big">{o.console_users}</p>
                                </section>
                                <section class="card stat">
                                    <h2>"Version"</h2>
                                    <p class="big">{o.version.clone()}</p>
                                </section>
                            </div>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
        <ComplianceCharts />
    }
}
