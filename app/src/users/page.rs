//! Console users (admin only: every server function here refuses everyone else).
//!
//! Each form is an `ActionForm`: with JavaScript it posts in the background and the table
//! refreshes in place; without it, it is a plain form post and the page comes back with the
//! outcome (see [`crate::components::flash`]).

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::components::flash::Notice;
use crate::components::{ErrorNotice, Loading};
use crate::shared::ConsoleError;
use crate::users::api::{
    AddUser, ResetUserPassword, SetUserScopes, UpdateUser, UserRow, list_users,
};

const ROLES: [&str; 3] = ["viewer", "reviewer", "admin"];

#[component]
pub fn UsersPage() -> impl IntoView {
    let add = ServerAction::<AddUser>::new();
    let update = ServerAction::<UpdateUser>::new();
    let reset = ServerAction::<ResetUserPassword>::new();
    let scopes = ServerAction::<SetUserScopes>::new();
    let users = Resource::new(
        move || {
            (
                add.version().get(),
                update.version().get(),
                reset.version().get(),
                scopes.version().get(),
            )
        },
        |_| list_users(),
    );
    // The newest outcome of any of the forms, when JavaScript posted it.
    let latest = RwSignal::new(None::<Result<Notice, ConsoleError>>);
    Effect::new(move || {
        if let Some(r) = add.value().get() {
            latest.set(Some(r));
        }
    });
    Effect::new(move || {
        if let Some(r) = update.value().get() {
            latest.set(Some(r));
        }
    });
    Effect::new(move || {
        if let Some(r) = reset.value().get() {
            latest.set(Some(r));
        }
    });
    Effect::new(move || {
        if let Some(r) = scopes.value().get() {
            latest.set(Some(r));
        }
    });
    view! {
        <Title text="Users" />
        <h1>"Users"</h1>
        <p class="lead">
            "Console accounts. Admins author the catalog, reviewers decide skill revisions, viewers read."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match users.await {
                    Ok(view) => {
                        let from_redirect = view.notice.map(Ok);
                        view! {
                            {move || {
                                latest
                                    .get()
                                    .or_else(|| from_redirect.clone())
                                    .map(|outcome| view! { <Outcome outcome /> })
                            }}
                            <section aria-labelledby="add-user-heading" class="card form-card">
                                <h2 id="add-user-heading">"Add a user"</h2>
                                <ActionForm action=add attr:class="inline-form">
                                    <CsrfField />
                                    <div>
                                        <label for="new-user-name">"User name"</label>
                                        <input
                                            id="new-user-name"
                                            name="name"
                                            required
                                            maxlength="64"
                                            pattern="[A-Za-z0-9._\\-]+"
                                            autocomplete="off"
                                        />
                                    </div>
                                    <div>
                                        <label for="new-user-role">"Console role"</label>
                                        <RoleSelect id="new-user-role".to_owned() selected="viewer".to_owned() />
                                    </div>
                                    <button type="submit" class="secondary">
                                        "Add user"
                                    </button>
                                </ActionForm>
                                <p class="muted">"A password is generated and shown once."</p>
                            </section>
                            <table class="table" aria-label="Console users">
                                <thead>
                                    <tr>
                                        <th scope="col">"Name"</th>
                                        <th scope="col">"Console role and status"</th>
                                        <th scope="col">"Password"</th>
                                        <th scope="col">"OAuth scopes"</th>
                                    </tr>
                                </thead>
                                <tbody>
                                    {view
                                        .users
                                        .into_iter()
                                        .map(|u| {
                                            let catalog = view.catalog_scopes.clone();
                                            view! { <UserLine user=u catalog update reset scopes /> }
                                        })
                                        .collect_view()}
                                </tbody>
                            </table>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn UserLine(
    user: UserRow,
    /// The catalog's scopes, offered as checkboxes.
    catalog: Vec<String>,
    update: ServerAction<UpdateUser>,
    reset: ServerAction<ResetUserPassword>,
    scopes: ServerAction<SetUserScopes>,
) -> impl IntoView {
    let row_id = format!("user-{}", user.name);
    let role_id = format!("{row_id}-role");
    let disabled_id = format!("{row_id}-disabled");
    let status = if user.disabled { "disabled" } else { "active" };
    let status_class = format!("badge status-{status}");
    let role_label = format!("Console role of {}", user.name);
    let reset_label = format!("Reset the password of {}", user.name);
    let name = user.name.clone();
    let name_for_reset = user.name.clone();
    let scope_form = scope_form(&user, catalog, scopes);
    view! {
        <tr id=row_id.clone()>
            <th scope="row">
                {user.name.clone()} {user.is_me.then(|| view! { <span class="muted">" (you)"</span> })}
                " " <span class=status_class>{status}</span>
                {user
                    .provider
                    .clone()
                    .map(|issuer| {
                        view! {
                            " "
                            <span class="badge sso-user" title=issuer>
                                "identity provider"
                            </span>
                        }
                    })}
            </th>
            <td>
                {if user.is_me {
                    view! {
                        <span class="badge">{user.role.clone()}</span>
                        <span class="muted">" Another admin can change your own access."</span>
                    }
                        .into_any()
                } else {
                    view! {
                        <ActionForm action=update attr:class="inline-form">
                            <CsrfField />
                            <input type="hidden" name="name" value=name.clone() />
                            <label for=role_id.clone() class="visually-hidden">
                                {role_label}
                            </label>
                            <RoleSelect id=role_id.clone() selected=user.role.clone() />
                            <label for=disabled_id.clone() class="checkbox">
                                <input
                                    type="checkbox"
                                    id=disabled_id.clone()
                                    name="disabled"
                                    value="on"
                                    checked=user.disabled
                                />
                                " Disabled"
                            </label>
                            <button type="submit" class="secondary">
                                "Save"
                            </button>
                        </ActionForm>
                    }
                        .into_any()
                }}
            </td>
            <td>
                {if user.provider.is_some() {
                    view! {
                        <span class="muted">
                            "Signs in through the identity provider; its groups set the role at each sign-in."
                        </span>
                    }
                        .into_any()
                } else {
                    view! {
                        <ActionForm action=reset attr:class="inline-form">
                            <CsrfField />
                            <input type="hidden" name="name" value=name_for_reset />
                            <button type="submit" class="secondary" aria-label=reset_label>
                                "Reset password"
                            </button>
                        </ActionForm>
                    }
                        .into_any()
                }}
            </td>
            <td>{scope_form}</td>
        </tr>
    }
}

/// The scopes a person may pick on the OAuth consent page: one checkbox per catalog scope
/// (posting `scopes[slug]=on`). One the catalog lost stays listed, ticked and marked, until
/// the admin unticks it: the server refuses to save a scope that is not in the catalog.
fn scope_form(
    user: &UserRow,
    catalog: Vec<String>,
    action: ServerAction<SetUserScopes>,
) -> impl IntoView + use<> {
    let gone: Vec<(String, bool)> = user
        .oauth_scopes
        .iter()
        .filter(|s| !catalog.contains(s))
        .map(|s| (s.clone(), true))
        .collect();
    let row_id = format!("user-{}", user.name);
    let legend = format!("OAuth scopes {} may consent to", user.name);
    let save_label = format!("Save the OAuth scopes of {}", user.name);
    let name = user.name.clone();
    let choices = catalog
        .into_iter()
        .map(|s| (s, false))
        .chain(gone)
        .map(|(scope, gone)| {
            let id = format!("{row_id}-scope-{scope}");
            let checked = user.oauth_scopes.contains(&scope);
            view! {
                <li>
                    <input
                        type="checkbox"
                        id=id.clone()
                        name=format!("scopes[{scope}]")
                        value="on"
                        checked=checked
                    />
                    <label for=id class="inline">
                        <code>{scope}</code>
                        {gone.then(|| view! { <span class="muted">" (no longer in the catalog)"</span> })}
                    </label>
                </li>
            }
        })
        .collect_view();
    view! {
        <ActionForm action=action attr:class="inline-form">
            <CsrfField />
            <input type="hidden" name="name" value=name />
            <fieldset class="plain">
                <legend class="visually-hidden">{legend}</legend>
                <ul class="scope-choices">{choices}</ul>
            </fieldset>
            <button type="submit" class="secondary" aria-label=save_label>
                "Save scopes"
            </button>
        </ActionForm>
    }
}

#[component]
fn RoleSelect(id: String, selected: String) -> impl IntoView {
    view! {
        <select id=id name="role">
            {ROLES
                .iter()
                .map(|r| {
                    view! {
                        <option value=*r selected=*r == selected>
                            {*r}
                        </option>
                    }
                })
                .collect_view()}
        </select>
    }
}

/// A form's outcome: a confirmation (with a one-time secret, if any) or the error.
#[component]
fn Outcome(outcome: Result<Notice, ConsoleError>) -> impl IntoView {
    let notice = match outcome {
        Ok(n) => n,
        Err(e) => Notice {
            error: true,
            message: e.to_string(),
            secret: None,
        },
    };
    let class = if notice.error {
        "notice error"
    } else {
        "notice info"
    };
    let role = if notice.error { "alert" } else { "status" };
    view! {
        <div class=class role=role id="form-outcome">
            <p>{notice.message}</p>
            {notice
                .secret
                .map(|secret| {
                    view! {
                        <p>
                            <code class="secret" id="one-time-secret">
                                {secret}
                            </code>
                        </p>
                    }
                })}
        </div>
    }
}
