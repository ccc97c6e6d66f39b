//! Scope editor (which roles are learnable), the new-scope form, and agent-key creation
//! and revocation.

use crate::components::csrf::CsrfField;
use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::api::{CreateScope, SaveScope, get_scope_editor, role_choices};
use super::keys::{CreateKey, CreatedKey, KeyForm, RevokeKey, get_key_form};
use crate::components::catalog::NotFoundNotice;
use crate::components::forms::{FieldError, FormOutcome, checkbox_group, error_for, last_error};
use crate::components::{ErrorNotice, Loading};
use crate::limits::api::{AddLimit, EditLimitValue, RemoveLimit};
use crate::limits::editor::{LimitHolder, limit_form, limit_list};
use crate::shared::ConsoleError;
use crate::whatif::WhatIf;

#[component]
pub fn NewScopePage() -> impl IntoView {
    let create = ServerAction::<CreateScope>::new();
    let roles = Resource::new(|| (), |_| role_choices());
    let error = last_error(create);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <Title text="New scope" />
        <p class="crumbs">
            <A href="/scopes">"Scopes & keys"</A>
        </p>
        <h1>"New scope"</h1>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match roles.await {
                    Ok(choices) => {
                        let picker = checkbox_group(
                            "roles",
                            "Roles an agent with this scope may learn",
                            choices.into_iter().map(|c| (c.name, c.note)).collect(),
                            &[],
                            err("roles"),
                        );
                        view! {
                            <ActionForm action=create attr:class="card form">
                                <CsrfField />
                                <FormOutcome
                                    action=create
                                    fields=&["slug", "roles"]
                                    saved="Created."
                                />
                                <label for="scope-slug">"Slug"</label>
                                <input
                                    id="scope-slug"
                                    name="slug"
                                    required
                                    aria-describedby="scope-slug-error"
                                    placeholder="refund-desk"
                                />
                                <FieldError id="scope-slug-error" message=err("slug") />
                                <label for="scope-description">"Description"</label>
                                <input id="scope-description" name="description" />
                                {picker}
                                <button type="submit" class="primary">
                                    "Create scope"
                                </button>
                            </ActionForm>
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
pub fn ScopeEditPage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let save = ServerAction::<SaveScope>::new();
    let add = ServerAction::<AddLimit>::new();
    let edit = ServerAction::<EditLimitValue>::new();
    let remove = ServerAction::<RemoveLimit>::new();
    let what_if = WhatIf::new();
    // Reload after a successful save only, so a refused save keeps what the admin typed.
    let saved = move || {
        [
            save.value().get().and_then(Result::ok),
            add.value().get().and_then(Result::ok),
            edit.value().get().and_then(Result::ok),
            remove.value().get().and_then(Result::ok),
        ]
    };
    let editor = Resource::new(move || (slug(), saved()), |(s, _)| get_scope_editor(s));
    let error = last_error(save);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <Title text=move || format!("Scope {}", slug()) />
        <p class="crumbs">
            <A href="/scopes">"Scopes & keys"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match editor.await {
                    Ok(Some(scope)) => {
                        let picker = checkbox_group(
                            "roles",
                            "Roles an agent with this scope may learn",
                            scope.all_roles.iter().map(|c| (c.name.clone(), c.note.clone())).collect(),
                            &scope.roles,
                            err("roles"),
                        );
                        let can_edit = scope.can_edit;
                        let holder = LimitHolder {
                            kind: "scope",
                            name: scope.slug.clone(),
                            revision: scope.revision,
                            can_edit,
                            limits: scope.guardrails.clone(),
                            tools: scope.tools.clone(),
                        };
                        let guardrails = limit_list(&holder, edit, remove, what_if);
                        let new_guardrail = limit_form(&holder, add, what_if);
                        view! {
                            <h1>{format!("Scope: {}", scope.slug)}</h1>
                            <p class="muted">
                                {format!("revision {} · ", scope.revision)}
                                <A href=format!("/changes/scope/{}", scope.slug)>"Change log"</A>
                            </p>
                            {(!can_edit)
                                .then(|| {
                                    view! {
                                        <p class="notice info" role="note">
                                            "You can read this, but only an admin can change the catalog."
                                        </p>
                                    }
                                })}
                            <ActionForm action=save attr:class="card form">
                                <CsrfField />
                                <fieldset disabled=!can_edit class="plain">
                                    <FormOutcome
                                        action=save
                                        fields=&["roles"]
                                        saved="Saved. New sessions and the next call use it."
                                    />
                                    <input type="hidden" name="slug" value=scope.slug.clone() />
                                    <input type="hidden" name="revision" value=scope.revision />
                                    <label for="scope-description">"Description"</label>
                                    <input
                                        id="scope-description"
                                        name="description"
                                        value=scope.description.clone()
                                    />
                                    {picker}
                                    <button type="submit" class="primary">
                                        "Save scope"
                                    </button>
                                </fieldset>
                            </ActionForm>
                            <section aria-labelledby="guardrails-heading">
                                <h2 id="guardrails-heading">"Guardrails"</h2>
                                <p class="muted">
                                    "Limits that bind every call of this scope's sessions, whichever role authorizes it: a role cannot lift them. Agents read them when they start a session and learn a role."
                                </p>
                                <FormOutcome action=edit fields=&[] saved="Guardrail changed." />
                                <FormOutcome action=remove fields=&[] saved="Guardrail removed." />
                                {guardrails}
                                {new_guardrail}
                                {can_edit.then(|| what_if.panel())}
                            </section>
                        }
                            .into_any()
                    }
                    Ok(None) => {
                        view! {
                            <h1>"Scope not found"</h1>
                            <NotFoundNotice
                                kind="scope"
                                name=slug()
                                back="/scopes"
                                back_label="All scopes"
                            />
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The new key, shown once: the key, a copy button, and a client configuration to paste.
fn fresh_key(key: CreatedKey) -> impl IntoView {
    let copy = copy_button(key.key.clone(), "Copy key");
    view! {
        <div class="card fresh-key" id="new-key" role="status" aria-labelledby="fresh-key-heading">
            <h3 id="fresh-key-heading">
                {format!("Agent key “{}” for scope {}", key.name, key.scope)}
            </h3>
            <p class="notice info">
                "This key is shown only once: Skillgate keeps only its hash. Copy it now."
            </p>
            <div class="key-line">
                <code id="fresh-key-value">{key.key}</code>
                {copy}
            </div>
            <p class="label">"MCP client configuration"</p>
            <pre class="schema" id="fresh-key-config">
                <code>{key.config}</code>
            </pre>
        </div>
    }
}

/// A button that copies `text` (a secret shown once) to the clipboard; `label` until it did.
pub(crate) fn copy_button(text: String, label: &'static str) -> impl IntoView {
    let copied = RwSignal::new(false);
    view! {
        <button
            type="button"
            class="secondary"
            on:click=move |_| {
                #[cfg(feature = "hydrate")]
                copy_to_clipboard(&text);
                #[cfg(not(feature = "hydrate"))]
                let _ = &text;
                copied.set(true);
            }
        >
            {move || if copied.get() { "Copied" } else { label }}
        </button>
    }
}

/// `navigator.clipboard.writeText(text)`, looked up dynamically: a browser without the
/// Clipboard API (or a plain-HTTP origin) leaves the key selectable on the page instead.
#[cfg(feature = "hydrate")]
fn copy_to_clipboard(text: &str) {
    use js_sys::{Function, Reflect};
    let call = || -> Result<(), wasm_bindgen::JsValue> {
        let navigator = Reflect::get(&window(), &"navigator".into())?;
        let clipboard = Reflect::get(&navigator, &"clipboard".into())?;
        let write: Function = Reflect::get(&clipboard, &"writeText".into())?.into();
        write.call1(&clipboard, &text.into())?;
        Ok(())
    };
    let _ = call();
}

/// What the key form needs, with the key to reveal when the URL names one. Create it at
/// the top of the page, outside any `Suspend`: reading a reveal consumes it, so its fetch
/// must run exactly once per render.
pub fn key_form_resource() -> Resource<Result<KeyForm, ConsoleError>> {
    let query = leptos_router::hooks::use_query_map();
    let reveal = move || query.read().get("reveal");
    Resource::new(reveal, get_key_form)
}

/// The create-key form (admins), and the key just created.
#[component]
pub fn CreateKeyPanel(form: Resource<Result<KeyForm, ConsoleError>>) -> impl IntoView {
    let create = ServerAction::<CreateKey>::new();
    let error = last_error(create);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match form.await {
                    Ok(form) if form.can_edit => {
                        let options = form
                            .scopes
                            .into_iter()
                            .map(|s| view! { <option value=s.clone()>{s.clone()}</option> })
                            .collect_view();
                        let fresh = form.fresh;
                        view! {
                            {fresh.map(fresh_key)}
                            {move || {
                                create.value().get().and_then(Result::ok).flatten().map(fresh_key)
                            }}
                            <ActionForm action=create attr:class="card form" attr:aria-labelledby="new-key-heading">
                                <CsrfField />
                                <h3 id="new-key-heading">"Create an agent key"</h3>
                                <FormOutcome
                                    action=create
                                    fields=&["name", "scope", "expires_in_days"]
                                    saved="Key created."
                                />
                                <div class="form-row">
                                    <div>
                                        <label for="key-name">"Name"</label>
                                        <input
                                            id="key-name"
                                            name="name"
                                            required
                                            aria-describedby="key-name-error"
                                        />
                                        <FieldError id="key-name-error" message=err("name") />
                                    </div>
                                    <div>
                                        <label for="key-scope">"Scope"</label>
                                        <select id="key-scope" name="scope" aria-describedby="key-scope-error">
                                            {options}
                                        </select>
                                        <FieldError id="key-scope-error" message=err("scope") />
                                    </div>
                                    <div>
                                        <label for="key-expiry">"Expires in days (empty: never)"</label>
                                        <input
                                            id="key-expiry"
                                            name="expires_in_days"
                                            inputmode="numeric"
                                            aria-describedby="key-expiry-error"
                                        />
                                        <FieldError
                                            id="key-expiry-error"
                                            message=err("expires_in_days")
                                        />
                                    </div>
                                </div>
                                <button type="submit" class="primary">
                                    "Create key"
                                </button>
                            </ActionForm>
                        }
                            .into_any()
                    }
                    Ok(_) => ().into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// A revoke button for one key (the server refuses anyone but an admin).
pub fn revoke_button(name: String, action: ServerAction<RevokeKey>) -> impl IntoView {
    let label = format!("Revoke key {name}");
    view! {
        <ActionForm action=action attr:class="inline-form">
            <CsrfField />
            <input type="hidden" name="name" value=name />
            <button type="submit" class="danger" aria-label=label>
                "Revoke"
            </button>
        </ActionForm>
    }
}
