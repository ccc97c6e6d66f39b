//! The skill editor (instructions, tools, resources), its version history with restore,
//! and the read-only view of any stored version.

use crate::components::csrf::CsrfField;
use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::api::{
    RestoreSkill, SaveSkill, SkillEditor, VersionRow, get_skill_editor, skill_version,
};
use crate::catalog::ResourceEdit;
use crate::components::catalog::{NotFoundNotice, code_list, link_list};
use crate::components::forms::{
    FieldError, FormOutcome, MarkdownEditor, checkbox_group, error_for, last_error,
};
use crate::components::{ErrorNotice, Loading};

#[component]
pub fn SkillEditPage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let save = ServerAction::<SaveSkill>::new();
    let restore = ServerAction::<RestoreSkill>::new();
    let saved = move || {
        (
            save.value().get().and_then(Result::ok),
            restore.value().get().and_then(Result::ok),
        )
    };
    let editor = Resource::new(move || (slug(), saved()), |(s, _)| get_skill_editor(s));
    view! {
        <Title text=move || format!("Edit skill {}", slug()) />
        <p class="crumbs">
            <A href="/skills">"Skills"</A>
            " / "
            <A href=move || format!("/skills/{}", slug())>{slug}</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match editor.await {
                    Ok(Some(skill)) => skill_editor(skill, save, restore).into_any(),
                    Ok(None) => {
                        view! {
                            <h1>"Skill not found"</h1>
                            <NotFoundNotice
                                kind="skill"
                                name=slug()
                                back="/skills"
                                back_label="All skills"
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

fn resource_row(index: usize, resource: ResourceEdit) -> impl IntoView {
    let id = |field: &str| format!("resource-{index}-{field}");
    let name = |field: &str| format!("resources[{index}][{field}]");
    let is_new = resource.name.is_empty();
    view! {
        <fieldset class="checks resource-edit">
            <legend>
                {if is_new {
                    "Add a resource".to_owned()
                } else {
                    format!("Resource {}", resource.name)
                }}
            </legend>
            <div class="form-row">
                <div>
                    <label for=id("name")>"Name (slug)"</label>
                    <input id=id("name") name=name("name") value=resource.name.clone() />
                </div>
                <div>
                    <label for=id("title")>"Title"</label>
                    <input id=id("title") name=name("title") value=resource.title />
                </div>
            </div>
            <label for=id("content")>"Content (markdown)"</label>
            <textarea id=id("content") name=name("content") rows="5" class="mono">
                {resource.content}
            </textarea>
            {(!is_new)
                .then(|| {
                    view! {
                        <p>
                            <input
                                type="checkbox"
                                id=id("remove")
                                name=name("remove")
                                value="on"
                                class="inline-check"
                            />
                            " "
                            <label for=id("remove") class="inline">
                                "Remove this resource in the new version"
                            </label>
                        </p>
                    }
                })}
        </fieldset>
    }
}

fn skill_editor(
    skill: SkillEditor,
    save: ServerAction<SaveSkill>,
    restore: ServerAction<RestoreSkill>,
) -> impl IntoView {
    let error = last_error(save);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    let can_edit = skill.can_edit;
    let tools = checkbox_group(
        "tools",
        "Tools",
        skill
            .all_tools
            .iter()
            .map(|c| (c.name.clone(), c.note.clone()))
            .collect(),
        &skill.tools,
        err("tool"),
    );
    let mut resources = skill.resources.clone();
    resources.push(ResourceEdit {
        name: String::new(),
        title: String::new(),
        content: String::new(),
        remove: None,
    });
    let resources = resources
        .into_iter()
        .enumerate()
        .map(|(i, r)| resource_row(i, r))
        .collect_view();
    let versions = version_table(&skill, restore);
    view! {
        <h1>{format!("Edit skill: {}", skill.slug)}</h1>
        <p class="muted">
            {format!("current version {} · revision {} · ", skill.version, skill.revision)}
            <A href=format!("/changes/skill/{}", skill.slug)>"Change log"</A>
        </p>
        {(!can_edit)
            .then(|| {
                view! {
                    <p class="notice info" role="note">
                        "You can read this, but only an admin can change the catalog."
                    </p>
                }
            })}
        <ActionForm action=save attr:class="card form" attr:aria-label="Skill">
            <CsrfField />
            <fieldset disabled=!can_edit class="plain">
                <FormOutcome
                    action=save
                    fields=&["description", "instructions", "tool", "resources"]
                    saved="Saved as a new version. Agents that learn the role from now on get it."
                />
                <input type="hidden" name="slug" value=skill.slug.clone() />
                <input type="hidden" name="revision" value=skill.revision />
                <label for="skill-description">"Description"</label>
                <input
                    id="skill-description"
                    name="description"
                    value=skill.description.clone()
                    aria-describedby="description-error"
                />
                <FieldError id="description-error" message=err("description") />
                <MarkdownEditor
                    id="skill-instructions"
                    name="instructions"
                    label="Instructions (markdown)"
                    value=skill.instructions.clone()
                    html=skill.instructions_html.clone()
                    error=err("instructions")
                />
                {tools}
                <h3 class="label">"Resources"</h3>
                <FieldError id="resources-error" message=err("resources") />
                {resources}
                <button type="submit" class="primary">
                    "Save new version"
                </button>
            </fieldset>
        </ActionForm>
        <section aria-labelledby="versions-heading">
            <h2 id="versions-heading">"Version history"</h2>
            <FormOutcome action=restore fields=&[] saved="Restored: that version is current again." />
            {versions}
        </section>
    }
}

fn version_table(
    skill: &SkillEditor,
    restore: ServerAction<RestoreSkill>,
) -> impl IntoView + use<> {
    let slug = skill.slug.clone();
    let (revision, can_edit) = (skill.revision, skill.can_edit);
    let rows = skill
        .versions
        .iter()
        .cloned()
        .map(|v: VersionRow| {
            let view_href = format!("/skills/{}/versions/{}", slug, v.version);
            let action = (!v.current && can_edit).then(|| {
                let slug = slug.clone();
                view! {
                    <ActionForm action=restore attr:class="inline-form">
                        <CsrfField />
                        <input type="hidden" name="slug" value=slug />
                        <input type="hidden" name="revision" value=revision />
                        <input type="hidden" name="version" value=v.version />
                        <button
                            type="submit"
                            class="secondary"
                            aria-label=format!("Restore version {}", v.version)
                        >
                            "Restore"
                        </button>
                    </ActionForm>
                }
            });
            view! {
                <tr>
                    <td>
                        <A href=view_href>{format!("v{}", v.version)}</A>
                        {v.current.then(|| view! { " " <span class="badge status-active">"current"</span> })}
                    </td>
                    <td class="description">{v.description}</td>
                    <td>{code_list(v.tools)}</td>
                    <td>{code_list(v.resources)}</td>
                    <td class="num">{v.instructions_chars}</td>
                    <td>{action}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p class="muted">
            "Who saved each version, and what changed, is in the change log."
        </p>
        <table class="table versions">
            <thead>
                <tr>
                    <th scope="col">"Version"</th>
                    <th scope="col">"Description"</th>
                    <th scope="col">"Tools"</th>
                    <th scope="col">"Resources"</th>
                    <th scope="col" class="num">"Instruction chars"</th>
                    <th scope="col">
                        <span class="visually-hidden">"Actions"</span>
                    </th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[component]
pub fn SkillVersionPage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let version = move || {
        params
            .read()
            .get("version")
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let data = Resource::new(move || (slug(), version()), |(s, v)| skill_version(s, v));
    view! {
        <Title text=move || format!("Skill {} v{}", slug(), version()) />
        <p class="crumbs">
            <A href=move || format!("/skills/{}/edit", slug())>"Version history"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(Some(v)) => {
                        view! {
                            <h1>
                                {v.slug} " " <span class="badge">{format!("v{}", v.version)}</span>
                            </h1>
                            <p class="lead">{v.description}</p>
                            <section class="card" aria-labelledby="version-tools">
                                <h2 id="version-tools">"Tools"</h2>
                                {link_list("/tools", v.tools)}
                            </section>
                            <section aria-labelledby="version-instructions">
                                <h2 id="version-instructions">"Instructions"</h2>
                                <div class="prose md-preview" inner_html=v.instructions_html></div>
                            </section>
                            <section aria-labelledby="version-resources">
                                <h2 id="version-resources">"Resources"</h2>
                                {code_list(v.resources.into_iter().map(|r| r.name).collect())}
                            </section>
                        }
                            .into_any()
                    }
                    Ok(None) => {
                        view! {
                            <h1>"Version not found"</h1>
                            <NotFoundNotice
                                kind="skill version"
                                name=format!("{} v{}", slug(), version())
                                back="/skills"
                                back_label="All skills"
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
