//! Skills: the list of current versions, and one skill with its instructions and resources.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::read::{SkillDetail, SkillRow, get_skill, list_skills};
use crate::components::catalog::{NotFoundNotice, Pager, Prose, link_list, page_param};
use crate::components::{ErrorNotice, Loading};

#[component]
pub fn SkillsPage() -> impl IntoView {
    let page = page_param("page");
    let skills = Resource::new(page, list_skills);
    view! {
        <Title text="Skills" />
        <h1>"Skills"</h1>
        <p class="lead">
            "Skills carry instructions, tools and resource documents; agents learn their current versions."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match skills.await {
                    Ok(list) if list.total == 0 => {
                        view! { <p class="notice info">"The catalog has no skills yet."</p> }
                            .into_any()
                    }
                    Ok(list) => {
                        view! {
                            <table class="table">
                                <thead>
                                    <tr>
                                        <th scope="col">"Skill"</th>
                                        <th scope="col" class="num">"Version"</th>
                                        <th scope="col">"Description"</th>
                                        <th scope="col">"Tools"</th>
                                        <th scope="col">"Resources"</th>
                                        <th scope="col">"Used by roles"</th>
                                    </tr>
                                </thead>
                                <tbody>
                                    {list.rows.into_iter().map(skill_row).collect_view()}
                                </tbody>
                            </table>
                            <Pager
                                page=list.page
                                pages=list.pages
                                total=list.total
                                href=|n| format!("/skills?page={n}")
                                label="Skills pages"
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

fn skill_row(skill: SkillRow) -> impl IntoView {
    let resources = if skill.resources.is_empty() {
        view! { <span class="muted">"none"</span> }.into_any()
    } else {
        view! {
            <ul class="inline-list">
                {skill
                    .resources
                    .into_iter()
                    .map(|r| view! { <li title=r.name>{r.title}</li> })
                    .collect_view()}
            </ul>
        }
        .into_any()
    };
    view! {
        <tr>
            <td>
                <A href=format!("/skills/{}", skill.slug)>{skill.slug.clone()}</A>
            </td>
            <td class="num">{format!("v{}", skill.version)}</td>
            <td class="description">{skill.description}</td>
            <td>{link_list("/tools", skill.tools)}</td>
            <td>{resources}</td>
            <td>{link_list("/roles", skill.roles)}</td>
        </tr>
    }
}

#[component]
pub fn SkillPage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let skill = Resource::new(slug, get_skill);
    view! {
        <Title text=move || format!("Skill {}", slug()) />
        <p class="crumbs">
            <A href="/skills">"Skills"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match skill.await {
                    Ok(Some(skill)) => skill_view(skill).into_any(),
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
        // Its own resources, outside the skill's Suspense: a resource created while an
        // outer one resolves can leave the streamed page unfinished.
        <crate::revisions::SkillRevisions slug=Signal::derive(slug) />
    }
}

fn skill_view(skill: SkillDetail) -> impl IntoView {
    view! {
        <h1>
            {skill.slug.clone()} " " <span class="badge">{format!("v{}", skill.version)}</span>
        </h1>
        <p class="muted">
            <A href=format!("/skills/{}/edit", skill.slug)>"Edit skill and version history"</A>
            " · "
            <A href=format!("/changes/skill/{}", skill.slug)>"Change log"</A>
        </p>
        <p class="lead">{skill.description}</p>
        <div class="detail-grid">
            <section class="card" aria-labelledby="skill-tools">
                <h2 id="skill-tools">"Tools"</h2>
                {link_list("/tools", skill.tools)}
            </section>
            <section class="card" aria-labelledby="skill-roles">
                <h2 id="skill-roles">"Used by roles"</h2>
                {link_list("/roles", skill.roles)}
            </section>
        </div>
        <section aria-labelledby="skill-instructions">
            <h2 id="skill-instructions">"Instructions"</h2>
            <Prose text=skill.instructions />
        </section>
        <section aria-labelledby="skill-resources">
            <h2 id="skill-resources">"Resources"</h2>
            {if skill.resources.is_empty() {
                view! { <p class="muted">"This skill has no resource documents."</p> }.into_any()
            } else {
                skill
                    .resources
                    .into_iter()
                    .map(|r| {
                        view! {
                            <article class="card resource">
                                <h3>{r.title} " " <code>{r.name}</code></h3>
                                <Prose text=r.content />
                            </article>
                        }
                    })
                    .collect_view()
                    .into_any()
            }}
        </section>
    }
}
