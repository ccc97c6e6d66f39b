//! The API tokens page: the signed-in person's tokens with the form that issues one, and
//! for an admin everyone else's. Issue and revoke are `ActionForm`s: with JavaScript the
//! page updates in place; without it the browser comes back here with the outcome (and a
//! new token shown once).

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos_meta::Title;

use super::api::{CreateApiToken, CreatedToken, RevokeApiToken, TokenLine, list_api_tokens};
use crate::components::csrf::CsrfField;
use crate::components::flash::outcome;
use crate::components::forms::{FieldError, FormOutcome, error_for, last_error};
use crate::components::{ErrorNotice, Loading};

#[component]
pub fn TokensPage() -> impl IntoView {
    let create = ServerAction::<CreateApiToken>::new();
    let revoke = ServerAction::<RevokeApiToken>::new();
    // Created outside any `Suspend`: reading a reveal consumes it, so this fetch runs once
    // per render.
    let query = leptos_router::hooks::use_query_map();
    let tokens = Resource::new(
        move || {
            (
                query.read().get("reveal"),
                create.version().get(),
                revoke.version().get(),
            )
        },
        |(reveal, _, _)| list_api_tokens(reveal),
    );
    view! {
        <Title text="API tokens" />
        <h1>"API tokens"</h1>
        <p class="lead">
            "A token lets your scripts and chat bots list and decide approval holds through the HTTP API ("
            <code>"/api/v1/holds"</code>
            "), as you and with your role at each request. It is shown once, when it is issued; Skillgate keeps only its hash."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match tokens.await {
                    Ok(view) => {
                        let from_redirect = view.notice.map(Ok);
                        let fresh = view.fresh.map(fresh_token);
                        let mine = if view.mine.is_empty() {
                            view! {
                                <p class="muted" id="tokens-none">"You have no API tokens."</p>
                            }
                                .into_any()
                        } else {
                            token_table("my-tokens", "Your API tokens", view.mine, false, revoke)
                                .into_any()
                        };
                        let others = view
                            .others
                            .map(|others| {
                                let table = if others.is_empty() {
                                    view! {
                                        <p class="muted" id="others-none">
                                            "Nobody else has an API token."
                                        </p>
                                    }
                                        .into_any()
                                } else {
                                    token_table("all-tokens", "Everyone else's API tokens", others, true, revoke)
                                        .into_any()
                                };
                                view! {
                                    <h2 id="all-tokens-heading">"Everyone else"</h2>
                                    {table}
                                }
                            });
                        view! {
                            {move || {
                                revoke.value().get().or_else(|| from_redirect.clone()).map(outcome)
                            }}
                            {fresh}
                            {move || {
                                create.value().get().and_then(Result::ok).flatten().map(fresh_token)
                            }}
                            {issue_form(create, view.me, view.people)}
                            <h2 id="my-tokens-heading">"Yours"</h2>
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

/// The form that issues a token; an admin may issue it for another person.
fn issue_form(
    create: ServerAction<CreateApiToken>,
    me: String,
    people: Option<Vec<String>>,
) -> impl IntoView {
    let error = last_error(create);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    let owner = people.map(|people| {
        let options = people
            .into_iter()
            .map(|p| {
                let selected = p == me;
                view! { <option value=p.clone() selected=selected>{p.clone()}</option> }
            })
            .collect_view();
        view! {
            <div>
                <label for="token-user">"For"</label>
                <select id="token-user" name="user" aria-describedby="token-user-error">
                    {options}
                </select>
                <FieldError id="token-user-error" message=err("user") />
            </div>
        }
    });
    view! {
        <ActionForm action=create attr:class="card form" attr:aria-labelledby="new-token-heading">
            <CsrfField />
            <h2 id="new-token-heading">"Issue a token"</h2>
            <FormOutcome
                action=create
                fields=&["name", "expires_in_days", "user"]
                saved="Token issued."
            />
            <div class="form-row">
                <div>
                    <label for="token-name">"Name"</label>
                    <input
                        id="token-name"
                        name="name"
                        required
                        placeholder="chat-ops"
                        aria-describedby="token-name-error"
                    />
                    <FieldError id="token-name-error" message=err("name") />
                </div>
                <div>
                    <label for="token-expiry">"Expires in days (empty: never)"</label>
                    <input
                        id="token-expiry"
                        name="expires_in_days"
                        inputmode="numeric"
                        aria-describedby="token-expiry-error"
                    />
                    <FieldError id="token-expiry-error" message=err("expires_in_days") />
                </div>
                {owner}
            </div>
            <button type="submit" class="primary">
                "Issue token"
            </button>
        </ActionForm>
    }
}

/// The new token, shown once, with a request to try it.
fn fresh_token(token: CreatedToken) -> impl IntoView {
    let copy = crate::scopes::edit::copy_button(token.token.clone(), "Copy token");
    view! {
        <div class="card fresh-key" id="new-token" role="status" aria-labelledby="fresh-token-heading">
            <h3 id="fresh-token-heading">
                {format!("API token “{}” of {}", token.name, token.user)}
            </h3>
            <p class="notice info">
                "This token is shown only once: Skillgate keeps only its hash. Copy it now."
            </p>
            <div class="key-line">
                <code id="fresh-token-value">{token.token}</code>
                {copy}
            </div>
            <p class="label">"Try it: the pending holds"</p>
            <pre class="schema" id="fresh-token-example">
                <code>{token.example}</code>
            </pre>
        </div>
    }
}

fn token_table(
    id: &'static str,
    label: &'static str,
    rows: Vec<TokenLine>,
    with_person: bool,
    revoke: ServerAction<RevokeApiToken>,
) -> impl IntoView {
    view! {
        <table class="table" id=id aria-label=label>
            <thead>
                <tr>
                    {with_person.then(|| view! { <th scope="col">"Person"</th> })}
                    <th scope="col">"Name"</th>
                    <th scope="col">"Token starts with"</th>
                    <th scope="col">"Status"</th>
                    <th scope="col">"Issued"</th>
                    <th scope="col">"Expires"</th>
                    <th scope="col">"Last used"</th>
                    <th scope="col"><span class="visually-hidden">"Revoke"</span></th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|t| token_row(t, with_person, revoke)).collect_view()}
            </tbody>
        </table>
    }
}

fn token_row(
    t: TokenLine,
    with_person: bool,
    revoke: ServerAction<RevokeApiToken>,
) -> impl IntoView {
    let status_text = match &t.revoked_at {
        Some(at) => format!("revoked {at}"),
        None => t.status.clone(),
    };
    let action = t.revoked_at.is_none().then(|| {
        let label = format!("Revoke API token {} of {}", t.name, t.user);
        view! {
            <ActionForm action=revoke attr:class="inline-form">
                <CsrfField />
                <input type="hidden" name="id" value=t.id.to_string() />
                <button type="submit" class="danger" id=format!("revoke-token-{}", t.id) aria-label=label>
                    "Revoke"
                </button>
            </ActionForm>
        }
    });
    let issued = if t.created_by == t.user {
        t.created_at.clone()
    } else {
        format!("{} by {}", t.created_at, t.created_by)
    };
    view! {
        <tr id=format!("token-{}", t.id) class=format!("token-row token-{}", t.status)>
            {with_person.then(|| view! { <td>{t.user.clone()}</td> })}
            <td>{t.name.clone()}</td>
            <td>
                <code>{format!("{}…", t.prefix)}</code>
            </td>
            <td>
                <span class=format!("badge status-{}", t.status)>{status_text}</span>
            </td>
            <td>{issued}</td>
            <td>{t.expires_at.clone().unwrap_or_else(|| "never".to_owned())}</td>
            <td>{t.last_used_at.clone().unwrap_or_else(|| "never".to_owned())}</td>
            <td>{action}</td>
        </tr>
    }
}
