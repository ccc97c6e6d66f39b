//! The role editor (title, description, instructions, skills), its limit editor, and the
//! new-role form.

use crate::csrf::CsrfField;
use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::ErrorNotice;
use super::catalog::{NotFoundNotice, inline_code};
use super::forms::{
    CountedText, FieldError, FormOutcome, MarkdownEditor, checkbox_group, error_for, last_error,
};
use crate::authoring_api::{
    AddLimit, CreateRole, EditLimitValue, LimitView, RemoveLimit, RoleEditor, SaveRole, ToolChoice,
    get_role_editor, skill_choices,
};

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
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
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
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match editor.await {
                    Ok(Some(role)) => {
                        role_editor(role, save, add, edit, remove).into_any()
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
    let limits = limit_list(&role, edit, remove);
    let new_limit = limit_form(&role, add);
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
        </section>
    }
}

fn limit_list(
    role: &RoleEditor,
    edit: ServerAction<EditLimitValue>,
    remove: ServerAction<RemoveLimit>,
) -> impl IntoView + use<> {
    if role.limits.is_empty() {
        return view! {
            <p class="muted">"No limits yet: calls are bounded only by the tools' input schemas."</p>
        }
        .into_any();
    }
    let (slug, revision, can_edit) = (role.slug.clone(), role.revision, role.can_edit);
    view! {
        <ul class="limit-editor">
            {role
                .limits
                .iter()
                .map(|limit| limit_item(limit, &slug, revision, can_edit, edit, remove))
                .collect_view()}
        </ul>
    }
    .into_any()
}

/// The number a limit compares against, if it has exactly one: what the quick edit changes.
fn limit_number(rule: &str) -> Option<String> {
    let (_, number) = rule.rsplit_once(' ')?;
    (rule.contains("<") || rule.contains(">") || rule.contains("=="))
        .then(|| number.to_owned())
        .filter(|n| n.parse::<f64>().is_ok())
}

fn limit_item(
    limit: &LimitView,
    slug: &str,
    revision: i64,
    can_edit: bool,
    edit: ServerAction<EditLimitValue>,
    remove: ServerAction<RemoveLimit>,
) -> impl IntoView + use<> {
    let index = limit.index;
    let slug = slug.to_owned();
    let edit_slug = slug.clone();
    let rule = limit.rule.clone();
    let remove_label = format!("Remove limit: {rule}");
    let value_id = format!("limit-{index}-value");
    let number = limit_number(&limit.rule);
    let edit_error = Signal::derive(move || {
        edit.value()
            .get()
            .and_then(|r| r.err())
            .filter(|_| {
                edit.input()
                    .get()
                    .is_none_or(|i: EditLimitValue| i.index == index)
            })
            .and_then(|e| error_for(Some(e), "value"))
    });
    view! {
        <li class="limit">
            <p class="sentence">{inline_code(&limit.sentence)}</p>
            <code class="rule">{rule}</code>
            <div class="limit-actions">
                {number
                    .map(|n| {
                        view! {
                            <ActionForm action=edit attr:class="inline-form">
                                <CsrfField />
                                <fieldset disabled=!can_edit class="plain">
                                    <input type="hidden" name="role" value=edit_slug.clone() />
                                    <input type="hidden" name="revision" value=revision />
                                    <input type="hidden" name="index" value=index />
                                    <label for=value_id.clone() class="inline">
                                        "Value"
                                    </label>
                                    <input
                                        id=value_id.clone()
                                        name="value"
                                        value=n
                                        inputmode="decimal"
                                        class="short"
                                        aria-describedby=format!("{value_id}-error")
                                    />
                                    <button type="submit" class="secondary">
                                        "Change"
                                    </button>
                                    <FieldError id=format!("{value_id}-error") message=edit_error />
                                </fieldset>
                            </ActionForm>
                        }
                    })}
                <ActionForm action=remove attr:class="inline-form">
                    <CsrfField />
                    <fieldset disabled=!can_edit class="plain">
                        <input type="hidden" name="role" value=slug.clone() />
                        <input type="hidden" name="revision" value=revision />
                        <input type="hidden" name="index" value=index />
                        <button type="submit" class="danger" aria-label=remove_label>
                            "Remove"
                        </button>
                    </fieldset>
                </ActionForm>
            </div>
        </li>
    }
}

const KINDS: &[(&str, &str)] = &[
    ("bound", "Per-call bound: argument compared with a number"),
    ("one_of", "Per-call bound: argument is one of listed values"),
    (
        "max_length",
        "Per-call bound: text argument of at most N characters",
    ),
    ("sum_cap", "Cumulative cap: sum of an argument per session"),
    ("count_cap", "Call count cap per session"),
    (
        "requires",
        "Step order: tool runs only after other tools succeeded",
    ),
];

fn limit_form(role: &RoleEditor, add: ServerAction<AddLimit>) -> impl IntoView + use<> {
    let error = last_error(add);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    let tool = RwSignal::new(String::new());
    let kind = RwSignal::new("bound".to_owned());
    // Fields that do not apply to the chosen kind are hidden only once JavaScript runs;
    // without it every field shows and the server ignores the ones the kind does not use.
    let enhanced = RwSignal::new(false);
    Effect::new(move || enhanced.set(true));
    let tools: Vec<ToolChoice> = role.tools.clone();
    let tool_options = tools
        .iter()
        .map(|t| view! { <option value=t.name.clone()>{t.name.clone()}</option> })
        .collect_view();
    let arg_groups = tools
        .iter()
        .map(|t| {
            let name = t.name.clone();
            let hidden = move || {
                let picked = tool.get();
                enhanced.get() && !picked.is_empty() && picked != name
            };
            view! {
                <optgroup label=t.name.clone() hidden=hidden>
                    {t
                        .args
                        .iter()
                        .map(|a| {
                            view! {
                                <option value=a.name.clone()>
                                    {format!("{} ({})", a.name, if a.kind.is_empty() { "any" } else { &a.kind })}
                                </option>
                            }
                        })
                        .collect_view()}
                </optgroup>
            }
        })
        .collect_view();
    let after = tools
        .iter()
        .map(|t| (t.name.clone(), String::new()))
        .collect();
    let needs = move |kinds: &'static [&'static str]| {
        move || enhanced.get() && !kinds.contains(&kind.get().as_str())
    };
    let can_edit = role.can_edit;
    let (slug, revision) = (role.slug.clone(), role.revision);
    let after_picker = checkbox_group(
        "limit[after]",
        "Only after these succeeded",
        after,
        &[],
        err("after"),
    );
    view! {
        <ActionForm action=add attr:class="card form" attr:aria-labelledby="add-limit-heading">
            <CsrfField />
            <fieldset disabled=!can_edit class="plain">
                <h3 id="add-limit-heading">"Add a limit"</h3>
                <FormOutcome
                    action=add
                    fields=&["kind", "tool", "arg", "op", "value", "after"]
                    saved="Limit added. The gateway enforces it from the next call."
                />
                <input type="hidden" name="role" value=slug />
                <input type="hidden" name="revision" value=revision />
                <div class="form-row">
                    <div>
                        <label for="limit-kind">"Kind"</label>
                        <select
                            id="limit-kind"
                            name="limit[kind]"
                            aria-describedby="kind-error"
                            on:change=move |ev| kind.set(event_target_value(&ev))
                        >
                            {KINDS
                                .iter()
                                .map(|(value, label)| view! { <option value=*value>{*label}</option> })
                                .collect_view()}
                        </select>
                        <FieldError id="kind-error" message=err("kind") />
                    </div>
                    <div>
                        <label for="limit-tool">"Tool"</label>
                        <select
                            id="limit-tool"
                            name="limit[tool]"
                            aria-describedby="tool-error"
                            on:change=move |ev| tool.set(event_target_value(&ev))
                        >
                            <option value="">"Pick a tool of this role"</option>
                            {tool_options}
                        </select>
                        <FieldError id="tool-error" message=err("tool") />
                    </div>
                    <div hidden=needs(&["bound", "one_of", "max_length", "sum_cap"])>
                        <label for="limit-arg">"Argument"</label>
                        <select id="limit-arg" name="limit[arg]" aria-describedby="arg-error">
                            <option value="">"Pick an argument"</option>
                            {arg_groups}
                        </select>
                        <FieldError id="arg-error" message=err("arg") />
                    </div>
                    <div hidden=needs(&["bound"])>
                        <label for="limit-op">"Comparison"</label>
                        <select id="limit-op" name="limit[op]" aria-describedby="op-error">
                            <option value="<=">"<= at most"</option>
                            <option value="<">"< less than"</option>
                            <option value=">=">">= at least"</option>
                            <option value=">">"> greater than"</option>
                            <option value="==">"== exactly"</option>
                        </select>
                        <FieldError id="op-error" message=err("op") />
                    </div>
                    <div hidden=needs(&["bound", "one_of", "max_length", "sum_cap", "count_cap"])>
                        <label for="limit-value">"Value"</label>
                        <input
                            id="limit-value"
                            name="limit[value]"
                            aria-describedby="value-help value-error"
                        />
                        <p class="help" id="value-help">
                            "A number; for “one of”, values separated by commas."
                        </p>
                        <FieldError id="value-error" message=err("value") />
                    </div>
                </div>
                <div hidden=needs(&["requires"])>
                    {after_picker}
                </div>
                <button type="submit" class="primary">
                    "Add limit"
                </button>
            </fieldset>
        </ActionForm>
    }
}
