//! The role editor (title, description, instructions, skills), its limit editor, and the
//! new-role form.

use crate::components::csrf::CsrfField;
use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::api::{CreateRole, RoleEditor, SaveRole, get_role_editor, skill_choices};
use crate::components::catalog::NotFoundNotice;
use crate::components::forms::{
    CountedText, FieldError, FormOutcome, MarkdownEditor, checkbox_group, error_for, last_error,
};
use crate::components::{ErrorNotice, Loading};
use crate::limits::api::{AddLimit, EditLimitValue, RemoveLimit};
use crate::limits::editor::{LimitHolder, limit_form, limit_list};
use crate::whatif::WhatIf;

/// Longest role description; the server checks it too (core's `MAX_ROLE_DESCRIPTION`).
const MAX_DESCRIPTION: usize = 500;

fn read_only_notice(can_edit: bool) -> impl IntoView {
    (!can_edit).then(|| {
        view! {
            <p class="notice info" role="note">
                "You can read this, but only an admin can change the catalog."
            </p>
        }
    })
}

#[component]
pub fn NewRolePage() -> impl IntoView {
    let create = ServerAction::<CreateRole>::new();
    let skills = Resource::new(|| (), |_| skill_choices());
    let error = last_error(create);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <Title text="New role" />
        <p class="crumbs">
            <A href="/roles">"Roles"</A>
        </p>
        <h1>"New role"</h1>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match skills.await {
                    Ok(choices) => {
                        let choices = choices.into_iter().map(|c| (c.name, c.note)).collect();
                        view! {
                            <ActionForm action=create attr:class="card form">
                                <CsrfField />
                                <FormOutcome
                                    action=create
                                    fields=&["slug", "title", "description", "instructions", "skills"]
                                    saved="Created."
                                />
                                <label for="role-slug">"Slug"</label>
                                <input
                                    id="role-slug"
                                    name="slug"
                                    required
                                    aria-describedby="role-slug-error"
                                    placeholder="refund-clerk"
                                />
                                <FieldError id="role-slug-error" message=err("slug") />
                                <label for="role-title">"Title"</label>
                                <input
                                    id="role-title"
                                    name="title"
                                    required
                                    aria-describedby="title-error"
                                />
                                <FieldError id="title-error" message=err("title") />
                                <CountedText
                                    id="role-description"
                                    name="description"
                                    label="Description"
                                    value=String::new()
                                    max=MAX_DESCRIPTION
                                    error=err("description")
                                />
                                <MarkdownEditor
                                    id="role-instructions"
                                    name="instructions"
                                    label="Instructions (markdown)"
                                    value=String::new()
                                    html=String::new()
                                    error=err("instructions")
                                />
                                {checkbox_group("skills", "Skills", choices, &[], err("skills"))}
                                <button type="submit" class="primary">
                                    "Create role"
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
pub fn RoleEditPage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let save = ServerAction::<SaveRole>::new();
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
    let editor = Resource::new(move || (slug(), saved()), |(s, _)| get_role_editor(s));
    view! {
        <Title text=move || format!("Edit role {}", slug()) />
        <p class="crumbs">
            <A href="/roles">"Roles"</A>
            " / "
            <A href=move || format!("/roles/{}", slug())>{slug}</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match editor.await {
                    Ok(Some(role)) => {
                        role_editor(role, save, add, edit, remove, what_if).into_any()
                    }
                    Ok(None) => {
                        view! {
                            <h1>"Role not found"</h1>
                            <NotFoundNotice
                                kind="role"
                                name=slug()
                                back="/roles"
                                back_label="All roles"
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

fn role_editor(
    role: RoleEditor,
    save: ServerAction<SaveRole>,
    add: ServerAction<AddLimit>,
    edit: ServerAction<EditLimitValue>,
    remove: ServerAction<RemoveLimit>,
    what_if: WhatIf,
) -> impl IntoView {
    let error = last_error(save);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    let choices = role
        .all_skills
        .iter()
        .map(|c| (c.name.clone(), c.note.clone()))
        .collect();
    let can_edit = role.can_edit;
    let history = format!("/changes/role/{}", role.slug);
    let skills_picker = checkbox_group("skills", "Skills", choices, &role.skills, err("skills"));
    let holder = LimitHolder {
        kind: "role",
        name: role.slug.clone(),
        revision: role.revision,
        can_edit,
        limits: role.limits.clone(),
        tools: role.tools.clone(),
    };
    let limits = limit_list(&holder, edit, remove, what_if);
    let new_limit = limit_form(&holder, add, what_if);
    view! {
        <h1>{format!("Edit role: {}", role.title)}</h1>
        <p class="muted">
            <code>{role.slug.clone()}</code>
            {format!(" · revision {} · ", role.revision)}
            <A href=history>"Change log"</A>
        </p>
        {read_only_notice(can_edit)}
        <ActionForm action=save attr:class="card form" attr:aria-label="Role">
            <CsrfField />
            <fieldset disabled=!can_edit class="plain">
                <FormOutcome
                    action=save
                    fields=&["title", "description", "instructions", "skills"]
                    saved="Saved. The gateway uses it for the next call."
                />
                <input type="hidden" name="slug" value=role.slug.clone() />
                <input type="hidden" name="revision" value=role.revision />
                <label for="role-title">"Title"</label>
                <input
                    id="role-title"
                    name="title"
                    value=role.title.clone()
                    required
                    aria-describedby="title-error"
                />
                <FieldError id="title-error" message=err("title") />
                <CountedText
                    id="role-description"
                    name="description"
                    label="Description"
                    value=role.description.clone()
                    max=MAX_DESCRIPTION
                    error=err("description")
                />
                <MarkdownEditor
                    id="role-instructions"
                    name="instructions"
                    label="Instructions (markdown)"
                    value=role.instructions.clone()
                    html=role.instructions_html.clone()
                    error=err("instructions")
                />
                {skills_picker}
                <button type="submit" class="primary">
                    "Save role"
                </button>
            </fieldset>
        </ActionForm>
        <section aria-labelledby="limits-heading">
            <h2 id="limits-heading">"Limits"</h2>
            <p class="muted">
                "Each limit as the agent reads it when it learns the role. The gateway enforces every one."
            </p>
            <FormOutcome action=edit fields=&[] saved="Limit changed." />
            <FormOutcome action=remove fields=&[] saved="Limit removed." />
            {limits}
            {new_limit}
            {can_edit.then(|| what_if.panel())}
        </section>
    }
}
