use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;

use crate::compliance::charts::ComplianceCharts;
use crate::components::{ErrorNotice, Loading};
use crate::dashboard::api::overview;
use crate::holds::api::pending_holds;

#[component]
pub fn Dashboard() -> impl IntoView {
    let data = Resource::new(|| (), |_| overview());
    let holds = Resource::new(|| (), |_| pending_holds());
    view! {
        <Title text="Dashboard" />
        <h1>"Dashboard"</h1>
        <Suspense fallback=|| view! { <Loading /> }>
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
                                <Suspense fallback=|| ()>
                                    {move || Suspend::new(async move {
                                        holds.await.ok().map(|p| {
                                            let count = if p.more {
                                                format!("{}+", p.count)
                                            } else {
                                                p.count.to_string()
                                            };
                                            view! {
                                                <section class="card stat">
                                                    <h2>"Holds waiting for a reviewer"</h2>
                                                    <p class="big">
                                                        <A href="/holds">{count}</A>
                                                    </p>
                                                </section>
                                            }
                                        })
                                    })}
                                </Suspense>
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
