//! Connected clients: the OAuth grants a person made by consenting, with their tokens and a
//! revoke button; an admin also sees everyone else's.
//!
//! Revoke is an `ActionForm`: with JavaScript the table reloads in place; without it the
//! browser comes back here and the page shows the outcome (see [`crate::components::flash`]).

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::components::flash::outcome;
use crate::components::{ErrorNotice, Loading};
use crate::oauth::api::{GrantLine, RevokeGrant, list_grants};

#[component]
pub fn ConnectedPage() -> impl IntoView {
    let revoke = ServerAction::<RevokeGrant>::new();
    let grants = Resource::new(move || revoke.version().get(), |_| list_grants());
    view! {
        <Title text="Connected clients" />
        <h1>"Connected clients"</h1>
        <p class="lead">
            "Apps and agents you signed in to this gateway with OAuth. Each holds tokens for the one scope you chose; revoking ends them on their next request."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match grants.await {
                    Ok(view) => {
                        let from_redirect = view.notice.map(Ok);
                        let allowed = allowed_scopes(view.allowed_scopes);
                        let mine = if view.mine.is_empty() {
                            view! {
                                <p class="notice info" id="connected-none">
                                    "You have not connected any client. When an MCP client signs in with your console user, it shows here."
                                </p>
                            }
                                .into_any()
                        } else {
                            grant_table("my-grants", "Your connected clients", view.mine, false, revoke)
                                .into_any()
                        };
                        let others = view
                            .others
                            .map(|others| {
                                let table = if others.is_empty() {
                                    view! {
                                        <p class="muted" id="others-none">
                                            "Nobody else has connected a client."
                                        </p>
                                    }
                                        .into_any()
                                } else {
                                    grant_table("all-grants", "Everyone's connected clients", others, true, revoke)
                                        .into_any()
                                };
                                view! {
                                    <h2 id="all-grants-heading">"Everyone else"</h2>
                                    {table}
                                }
                            });
                        view! {
                            {move || {
                                revoke
                                    .value()
                                    .get()
                                    .or_else(|| from_redirect.clone())
                                    .map(outcome)
                            }}
                            <h2 id="my-grants-heading">"Yours"</h2>
                            {allowed}
                            {mine}
                            {others}
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Which scopes a client may ask of this person: without one, no client can sign in as them.
fn allowed_scopes(scopes: Vec<String>) -> impl IntoView {
    if scopes.is_empty() {
        return view! {
            <p class="muted" id="my-allowed-scopes">
                "An admin has allowed you no scope yet, so you cannot approve a client's sign-in."
            </p>
        }
        .into_any();
    }
    let list = scopes
        .into_iter()
        .map(|s| view! { <li><code>{s}</code></li> })
        .collect_view();
    view! {
        <p class="muted" id="my-allowed-scopes">
            "Scopes you may give a client (an admin sets these): "
        </p>
        <ul class="inline-list" aria-labelledby="my-allowed-scopes">{list}</ul>
    }
    .into_any()
}

fn grant_table(
    id: &'static str,
    label: &'static str,
    rows: Vec<GrantLine>,
    with_person: bool,
    revoke: ServerAction<RevokeGrant>,
) -> impl IntoView {
    view! {
        <table class="table" id=id aria-label=label>
            <thead>
                <tr>
                    {with_person.then(|| view! { <th scope="col">"Person"</th> })}
                    <th scope="col">"Client"</th>
                    <th scope="col">"Scope"</th>
                    <th scope="col">"Status"</th>
                    <th scope="col">"Connected"</th>
                    <th scope="col">"Last used"</th>
                    <th scope="col">"Live access tokens"</th>
                    <th scope="col">"Refresh token expires"</th>
                    <th scope="col"><span class="visually-hidden">"Revoke"</span></th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|g| grant_row(g, with_person, revoke)).collect_view()}
            </tbody>
        </table>
    }
}

fn grant_row(g: GrantLine, with_person: bool, revoke: ServerAction<RevokeGrant>) -> impl IntoView {
    let status = if g.revoked_at.is_some() {
        "revoked"
    } else {
        "active"
    };
    let status_text = match &g.revoked_at {
        Some(at) => format!("revoked {at}"),
        None => status.to_owned(),
    };
    let action = g.revoked_at.is_none().then(|| {
        let label = format!("Revoke {} for {}", g.client_name, g.user_name);
        view! {
            <ActionForm action=revoke attr:class="inline-form">
                <CsrfField />
                <input type="hidden" name="key_id" value=g.key_id.to_string() />
                <button
                    type="submit"
                    class="danger"
                    id=format!("revoke-grant-{}", g.key_id)
                    aria-label=label
                >
                    "Revoke"
                </button>
            </ActionForm>
        }
    });
    view! {
        <tr id=format!("grant-{}", g.key_id) class=format!("grant-row grant-{status}")>
            {with_person.then(|| view! { <td>{g.user_name.clone()}</td> })}
            <td>
                <strong>{g.client_name.clone()}</strong>
                <br />
                <code class="muted">{g.client_id.clone()}</code>
            </td>
            <td>
                <code>{g.scope.clone()}</code>
            </td>
            <td>
                <span class=format!("badge status-{status}")>{status_text}</span>
            </td>
            <td>{g.created_at.clone()}</td>
            <td>{g.last_used_at.clone().unwrap_or_else(|| "never".to_owned())}</td>
            <td>{g.live_access_tokens}</td>
            <td>{g.refresh_expires_at.clone().unwrap_or_else(|| "none".to_owned())}</td>
            <td>{action}</td>
        </tr>
    }
}
