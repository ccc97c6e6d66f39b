//! Scopes and agent keys: which roles each scope allows, and the keys mapped to scopes.
//! Keys are listed by their display prefix only; the key itself is never stored in clear.

use leptos::prelude::*;
use leptos_meta::Title;

use leptos::server::ServerAction;
use leptos_router::components::A;

use super::keys::RevokeKey;
use super::read::{KeyRow, ScopeRow, scopes_and_keys};
use crate::components::catalog::{Pager, inline_code, link_list, page_param};
use crate::components::{ErrorNotice, Loading};
use crate::scopes::edit::{CreateKeyPanel, key_form_resource, revoke_button};

#[component]
pub fn ScopesPage() -> impl IntoView {
    let scope_page = page_param("scopes_page");
    let key_page = page_param("page");
    let external_page = page_param("agents_page");
    let revoke = ServerAction::<RevokeKey>::new();
    let key_form = key_form_resource();
    let data = Resource::new(
        move || {
            (
                scope_page(),
                key_page(),
                external_page(),
                revoke.version().get(),
            )
        },
        |(scopes, keys, external, _)| scopes_and_keys(scopes, keys, external),
    );
    view! {
        <Title text="Scopes & keys" />
        <h1>"Scopes & keys"</h1>
        <p class="lead">
            "Scopes say which roles an agent may learn; every agent key is mapped to one scope."
        </p>
        <p>
            <A href="/scopes/new">"New scope"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(o) => {
                        let (scopes, keys, external) = (o.scopes, o.keys, o.external);
                        let key_page = keys.page;
                        let scope_page = scopes.page;
                        let external_page = external.page;
                        view! {
                            <section aria-labelledby="scopes-heading">
                                <h2 id="scopes-heading">"Scopes"</h2>
                                {if scopes.total == 0 {
                                    view! { <p class="notice info">"The catalog has no scopes yet."</p> }
                                        .into_any()
                                } else {
                                    view! {
                                        <table class="table">
                                            <thead>
                                                <tr>
                                                    <th scope="col">"Scope"</th>
                                                    <th scope="col">"Description"</th>
                                                    <th scope="col">"Roles"</th>
                                                    <th scope="col">"Guardrails"</th>
                                                </tr>
                                            </thead>
                                            <tbody>
                                                {scopes.rows.into_iter().map(scope_row).collect_view()}
                                            </tbody>
                                        </table>
                                        <Pager
                                            page=scopes.page
                                            pages=scopes.pages
                                            total=scopes.total
                                            href=move |n| pages_href(n, key_page, external_page)
                                            label="Scopes pages"
                                        />
                                    }
                                        .into_any()
                                }}
                            </section>
                            <section aria-labelledby="keys-heading">
                                <h2 id="keys-heading">"Agent keys"</h2>
                                <p class="notice info" role="note">
                                    "Create a key with "
                                    <code>"skillgate key create --name NAME --scope SCOPE"</code>
                                    " or the form below. The key is shown once, when it is created; Skillgate keeps only its hash, so this list shows each key's first characters."
                                </p>
                                <CreateKeyPanel form=key_form />
                                {if keys.total == 0 {
                                    view! { <p class="muted">"No agent keys yet."</p> }.into_any()
                                } else {
                                    view! {
                                        <table class="table">
                                            <thead>
                                                <tr>
                                                    <th scope="col">"Name"</th>
                                                    <th scope="col">"Scope"</th>
                                                    <th scope="col">"Key starts with"</th>
                                                    <th scope="col">"Status"</th>
                                                    <th scope="col">"Created"</th>
                                                    <th scope="col">"Expires"</th>
                                                    <th scope="col">"Last used"</th>
                                                    <th scope="col">
                                                        <span class="visually-hidden">"Actions"</span>
                                                    </th>
                                                </tr>
                                            </thead>
                                            <tbody>
                                                {keys
                                                    .rows
                                                    .into_iter()
                                                    .map(|k| key_row(k, revoke))
                                                    .collect_view()}
                                            </tbody>
                                        </table>
                                        <Pager
                                            page=keys.page
                                            pages=keys.pages
                                            total=keys.total
                                            href=move |n| pages_href(scope_page, n, external_page)
                                            label="Agent keys pages"
                                        />
                                    }
                                        .into_any()
                                }}
                            </section>
                            {(external.total > 0)
                                .then(|| {
                                    view! {
                                        <section aria-labelledby="external-heading">
                                            <h2 id="external-heading">
                                                "Agents with identity provider tokens"
                                            </h2>
                                            <p class="muted">
                                                "Each subject of a trusted issuer that brought a token, named subject@issuer. Revoking one refuses its tokens from the next request, whatever the provider says."
                                            </p>
                                            <table class="table" id="external-agents">
                                                <thead>
                                                    <tr>
                                                        <th scope="col">"Name"</th>
                                                        <th scope="col">"Scope"</th>
                                                        <th scope="col">"Status"</th>
                                                        <th scope="col">"First seen"</th>
                                                        <th scope="col">"Last used"</th>
                                                        <th scope="col">
                                                            <span class="visually-hidden">"Actions"</span>
                                                        </th>
                                                    </tr>
                                                </thead>
                                                <tbody>
                                                    {external
                                                        .rows
                                                        .into_iter()
                                                        .map(|k| external_row(k, revoke))
                                                        .collect_view()}
                                                </tbody>
                                            </table>
                                            <Pager
                                                page=external.page
                                                pages=external.pages
                                                total=external.total
                                                href=move |n| pages_href(scope_page, key_page, n)
                                                label="Identity provider agents pages"
                                            />
                                        </section>
                                    }
                                })}
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn scope_row(scope: ScopeRow) -> impl IntoView {
    view! {
        <tr>
            <td>
                <A href=format!("/scopes/{}", scope.slug)>{scope.slug.clone()}</A>
            </td>
            <td class="description">{scope.description}</td>
            <td>{link_list("/roles", scope.roles)}</td>
            <td>
                {if scope.guardrails.is_empty() {
                    view! { <span class="muted">"none"</span> }.into_any()
                } else {
                    view! {
                        <ul class="plain">
                            {scope
                                .guardrails
                                .into_iter()
                                .map(|sentence| view! { <li>{inline_code(&sentence)}</li> })
                                .collect_view()}
                        </ul>
                    }
                        .into_any()
                }}
            </td>
        </tr>
    }
}

fn key_row(key: KeyRow, revoke: ServerAction<RevokeKey>) -> impl IntoView {
    let action = (key.revoked_at.is_none()).then(|| revoke_button(key.name.clone(), revoke));
    let status = match key.revoked_at {
        Some(at) => format!("revoked {at}"),
        None => key.status.clone(),
    };
    let created = match key.created_by {
        Some(by) => format!("{} by {by}", key.created_at),
        None => key.created_at,
    };
    view! {
        <tr>
            <td>{key.name}</td>
            <td>
                <code>{key.scope}</code>
            </td>
            <td>
                <code>{format!("{}…", key.prefix)}</code>
            </td>
            <td>
                <span class=format!("badge status-{}", key.status)>{status}</span>
            </td>
            <td>{created}</td>
            <td>{key.expires_at.unwrap_or_else(|| "never".to_owned())}</td>
            <td>{key.last_used_at.unwrap_or_else(|| "never".to_owned())}</td>
            <td>{action}</td>
        </tr>
    }
}

/// A subject of a trusted issuer: no key prefix and no expiry (its tokens expire).
fn external_row(agent: KeyRow, revoke: ServerAction<RevokeKey>) -> impl IntoView {
    let action = (agent.revoked_at.is_none()).then(|| revoke_button(agent.name.clone(), revoke));
    let (badge, status) = match &agent.revoked_at {
        Some(at) => ("revoked", format!("revoked {at}")),
        None => ("active", "active".to_owned()),
    };
    view! {
        <tr>
            <td>{agent.name}</td>
            <td>
                <code>{agent.scope}</code>
            </td>
            <td>
                <span class=format!("badge status-{badge}")>{status}</span>
            </td>
            <td>{agent.created_at}</td>
            <td>{agent.last_used_at.unwrap_or_else(|| "never".to_owned())}</td>
            <td>{action}</td>
        </tr>
    }
}

/// The page with these pages of its three lists.
fn pages_href(scopes: usize, keys: usize, agents: usize) -> String {
    format!("/scopes?scopes_page={scopes}&page={keys}&agents_page={agents}")
}
