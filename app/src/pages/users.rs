use leptos::prelude::*;
use leptos_meta::Title;

use super::ErrorNotice;
use crate::api::list_users;

/// Console users (admin only: the server function refuses everyone else).
#[component]
pub fn UsersPage() -> impl IntoView {
    let users = Resource::new(|| (), |_| list_users());
    view! {
        <Title text="Users" />
        <h1>"Users"</h1>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match users.await {
                    Ok(rows) => {
                        view! {
                            <table class="table">
                                <thead>
                                    <tr>
                                        <th scope="col">"Name"</th>
                                        <th scope="col">"Console role"</th>
                                        <th scope="col">"Status"</th>
                                    </tr>
                                </thead>
                                <tbody>
                                    {rows
                                        .into_iter()
                                        .map(|u| {
                                            view! {
                                                <tr>
                                                    <td>{u.name}</td>
                                                    <td>
                                                        <span class="badge">{u.role}</span>
                                                    </td>
                                                    <td>{if u.disabled { "disabled" } else { "active" }}</td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </tbody>
                            </table>
                            <p class="muted">
                                "Add users with " <code>"skillgate user add NAME --role ROLE"</code>
                                "."
                            </p>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}
