//! Roles: the list, and one role with its instructions, skills, limits and granted tools.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::read::{RoleDetail, RoleRow, get_role, list_roles};
use crate::components::catalog::{
    NotFoundNotice, Pager, Prose, inline_code, link_list, page_param,
};
use crate::components::{ErrorNotice, Loading};

#[component]
pub fn RolesPage() -> impl IntoView {
    let page = page_param("page");
    let roles = Resource::new(page, list_roles);
    view! {
        <Title text="Roles" />
        <h1>"Roles"</h1>
        <p class="lead">
            "Roles bundle skills and the limits the gateway enforces on their tools."
        </p>
        <p>
            <A href="/roles/new">"New role"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match roles.await {
                    Ok(list) if list.total == 0 => {
                        view! { <p class="notice info">"The catalog has no roles yet."</p> }
                            .into_any()
                    }
                    Ok(list) => {
                        view! {
                            <table class="table">
                                <thead>
                                    <tr>
                                        <th scope="col">"Role"</th>
                                        <th scope="col">"Title"</th>
                                        <th scope="col">"Description"</th>
                                        <th scope="col" class="num">"Skills"</th>
                                        <th scope="col" class="num">"Limits"</th>
                                        <th scope="col">"In scopes"</th>
                                    </tr>
                                </thead>
                                <tbody>{list.rows.into_iter().map(role_row).collect_view()}</tbody>
                            </table>
                            <Pager
                                page=list.page
                                pages=list.pages
                                total=list.total
                                href=|n| format!("/roles?page={n}")
                                label="Roles pages"
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

fn role_row(role: RoleRow) -> impl IntoView {
    view! {
        <tr>
            <td>
                <A href=format!("/roles/{}", role.slug)>{role.slug.clone()}</A>
            </td>
            <td>{role.title}</td>
            <td class="description">{role.description}</td>
            <td class="num">{role.skill_count}</td>
            <td class="num">{role.limit_count}</td>
            <td>{scope_badges(role.scopes)}</td>
        </tr>
    }
}

fn scope_badges(scopes: Vec<String>) -> impl IntoView {
    if scopes.is_empty() {
        return view! { <span class="muted">"none"</span> }.into_any();
    }
    scopes
        .into_iter()
        .map(|s| view! { <span class="badge">{s}</span> " " })
        .collect_view()
        .into_any()
}

#[component]
pub fn RolePage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let role = Resource::new(slug, get_role);
    view! {
        <Title text=move || format!("Role {}", slug()) />
        <p class="crumbs">
            <A href="/roles">"Roles"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match role.await {
                    Ok(Some(role)) => role_view(role).into_any(),
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

fn role_view(role: RoleDetail) -> impl IntoView {
    let limits = if role.limits.is_empty() {
        view! { <p class="muted">"No limits: calls to this role's tools are bounded only by their input schemas."</p> }
            .into_any()
    } else {
        view! {
            <ul class="limits">
                {role
                    .limits
                    .iter()
                    .zip(role.limit_rules)
                    .map(|(sentence, rule)| {
                        view! {
                            <li>
                                <span>{inline_code(sentence)}</span>
                                " "
                                <code class="rule">{rule}</code>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        }
        .into_any()
    };
    view! {
        <h1>{role.title}</h1>
        <p class="muted">
            <code>{role.slug.clone()}</code>
            " · "
            <A href=format!("/roles/{}/edit", role.slug)>"Edit role and limits"</A>
            " · "
            <A href=format!("/changes/role/{}", role.slug)>"Change log"</A>
        </p>
        <p class="lead">{role.description}</p>
        <div class="detail-grid">
            <section class="card" aria-labelledby="role-skills">
                <h2 id="role-skills">"Skills"</h2>
                {if role.skills.is_empty() {
                    view! { <span class="muted">"none"</span> }.into_any()
                } else {
                    view! {
                        <ul class="inline-list">
                            {role
                                .skills
                                .into_iter()
                                .map(|s| {
                                    let version = match s.version {
                                        Some(v) => format!("v{v}"),
                                        None => "missing".to_owned(),
                                    };
                                    view! {
                                        <li>
                                            <A href=format!("/skills/{}", s.slug)>{s.slug.clone()}</A>
                                            " "
                                            <span class="badge">{version}</span>
                                        </li>
                                    }
                                })
                                .collect_view()}
                        </ul>
                    }
                        .into_any()
                }}
            </section>
            <section class="card" aria-labelledby="role-tools">
                <h2 id="role-tools">"Tools granted"</h2>
                {link_list("/tools", role.tools)}
            </section>
            <section class="card" aria-labelledby="role-scopes">
                <h2 id="role-scopes">"In scopes"</h2>
                {scope_badges(role.scopes)}
            </section>
        </div>
        <section aria-labelledby="role-limits">
            <h2 id="role-limits">"Limits"</h2>
            <p class="muted">"What an agent reads when it learns this role; the gateway enforces each one."</p>
            {limits}
        </section>
        <section aria-labelledby="role-instructions">
            <h2 id="role-instructions">"Instructions"</h2>
            <Prose text=role.instructions />
        </section>
    }
}
