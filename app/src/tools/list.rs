//! Tools: the list with arguments and users, and one tool with its input schema, its pin,
//! and for a quarantined tool the diff of pinned and offered definitions.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use leptos::server::ServerAction;

use super::pins::DefinitionFindings;
use super::read::{PinDetail, ToolDetail, ToolRow, get_tool, list_tools};
use crate::components::catalog::{NotFoundNotice, Pager, code_list, link_list, page_param};
use crate::components::{ErrorNotice, Loading};
use crate::tools::edit::{AdmitForm, SensitiveArgsForm};
use crate::tools::pins::AdmitTool;

#[component]
pub fn ToolsPage() -> impl IntoView {
    let page = page_param("page");
    let tools = Resource::new(page, list_tools);
    view! {
        <Title text="Tools" />
        <h1>"Tools"</h1>
        <p class="lead">
            "Tools come from upstream MCP servers; their schemas bound every call. Each definition is pinned when an admin admits it: a new tool, or one whose upstream changes its definition, is quarantined until an admin admits it. Sensitive arguments are stored in the audit log as a digest only."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match tools.await {
                    Ok(list) if list.total == 0 => {
                        view! { <p class="notice info">"The catalog has no tools yet."</p> }
                            .into_any()
                    }
                    Ok(list) => {
                        view! {
                            <table class="table">
                                <thead>
                                    <tr>
                                        <th scope="col">"Tool"</th>
                                        <th scope="col">"Upstream"</th>
                                        <th scope="col">"Description"</th>
                                        <th scope="col">"Required arguments"</th>
                                        <th scope="col">"Sensitive arguments"</th>
                                        <th scope="col">"Skills"</th>
                                        <th scope="col">"Roles"</th>
                                    </tr>
                                </thead>
                                <tbody>{list.rows.into_iter().map(tool_row).collect_view()}</tbody>
                            </table>
                            <Pager
                                page=list.page
                                pages=list.pages
                                total=list.total
                                href=|n| format!("/tools?page={n}")
                                label="Tools pages"
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

fn broken_badge(broken: bool) -> impl IntoView {
    broken.then(|| {
        view! {
            " "
            <span class="badge danger" title="The input schema does not compile: every call is denied as TOOL_UNUSABLE">
                "unusable: schema error"
            </span>
        }
    })
}

fn missing_badge(since: Option<String>) -> impl IntoView {
    since.map(|since| {
        let title =
            format!("Its upstream stopped listing it (first seen {since}); calls to it will fail");
        view! {
            " "
            <span class="badge danger missing" title=title>
                "missing upstream"
            </span>
        }
    })
}

fn quarantine_badge(kind: Option<String>) -> impl IntoView {
    kind.map(|kind| {
        let title = if kind == "new" {
            "Its upstream started offering it and no admin has admitted it yet: it cannot be granted or called"
        } else {
            "Its upstream offers another definition than the pinned one: calls are refused until an admin admits it"
        };
        view! {
            " "
            <span class="badge danger quarantined" title=title>
                {format!("quarantined: {kind}")}
            </span>
        }
    })
}

fn sensitive_list(names: Vec<String>) -> impl IntoView {
    if names.is_empty() {
        return view! { <span class="muted">"none"</span> }.into_any();
    }
    view! {
        <ul class="inline-list">
            {names
                .into_iter()
                .map(|n| {
                    view! {
                        <li>
                            <code>{n}</code>
                            " "
                            <span class="badge sensitive">"sensitive"</span>
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
    .into_any()
}

fn tool_row(tool: ToolRow) -> impl IntoView {
    view! {
        <tr>
            <td>
                <A href=format!("/tools/{}", tool.name)>{tool.name.clone()}</A>
                {broken_badge(tool.broken.is_some())}
                {missing_badge(tool.missing_since.clone())}
                {quarantine_badge(tool.quarantine.clone())}
            </td>
            <td>{tool.upstream}</td>
            <td class="description">{tool.description}</td>
            <td>{code_list(tool.required)}</td>
            <td>{sensitive_list(tool.sensitive)}</td>
            <td>{link_list("/skills", tool.skills)}</td>
            <td>{link_list("/roles", tool.roles)}</td>
        </tr>
    }
}

#[component]
pub fn ToolPage() -> impl IntoView {
    let params = use_params_map();
    let name = move || params.read().get("name").unwrap_or_default();
    let admit = ServerAction::<AdmitTool>::new();
    let tool = Resource::new(
        move || (name(), admit.version().get()),
        |(name, _)| get_tool(name),
    );
    view! {
        <Title text=move || format!("Tool {}", name()) />
        <p class="crumbs">
            <A href="/tools">"Tools"</A>
        </p>
        // Outside the Suspense: the tool reloads after admitting, the outcome stays.
        {move || match admit.value().get() {
            Some(Ok(pin)) => {
                view! {
                    <p class="notice ok" role="status">
                        "Admitted: the offered definition is pinned (" <code>{pin}</code>
                        ") and calls pass again."
                    </p>
                }
                    .into_any()
            }
            Some(Err(e)) => {
                view! {
                    <p class="notice error" role="alert">
                        <strong>"Not admitted. "</strong>
                        {e.to_string()}
                    </p>
                }
                    .into_any()
            }
            None => ().into_any(),
        }}
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match tool.await {
                    Ok(Some(tool)) => tool_view(tool, admit).into_any(),
                    Ok(None) => {
                        view! {
                            <h1>"Tool not found"</h1>
                            <NotFoundNotice
                                kind="tool"
                                name=name()
                                back="/tools"
                                back_label="All tools"
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

fn tool_view(detail: ToolDetail, admit: ServerAction<AdmitTool>) -> impl IntoView {
    let ToolDetail {
        tool,
        arguments,
        schema,
        pin,
    } = detail;
    let pin_section = pin.map(|pin| pin_view(tool.name.clone(), pin, admit));
    let sensitive_form =
        view! { <SensitiveArgsForm tool=tool.name.clone() arguments=arguments.clone() /> };
    let missing_since = tool.missing_since.clone();
    let upstream_name = tool.upstream.clone();
    view! {
        <h1>{tool.name}</h1>
        <p class="muted">"From upstream " <code>{tool.upstream}</code></p>
        <p class="lead">{tool.description}</p>
        {tool
            .broken
            .map(|reason| {
                view! {
                    <div class="notice error" role="alert">
                        <strong>"This tool is unusable: its input schema does not compile"</strong>
                        <p>"Every call to it is denied with TOOL_UNUSABLE until its upstream serves a schema that compiles: " {reason}</p>
                    </div>
                }
            })}
        {missing_since
            .map(|since| {
                view! {
                    <div class="notice error" role="alert" id="tool-missing">
                        <strong>"Missing from its upstream"</strong>
                        <p>
                            "The last sync of " <code>{upstream_name}</code>
                            " did not list this tool (first missed " {since}
                            "). It is kept with its last definition so the roles that grant it stay valid; calls to it will fail until the upstream serves it again or it is removed from those roles."
                        </p>
                    </div>
                }
            })}
        {pin_section}
        <div class="detail-grid">
            <section class="card" aria-labelledby="tool-skills">
                <h2 id="tool-skills">"Used by skills"</h2>
                {link_list("/skills", tool.skills)}
            </section>
            <section class="card" aria-labelledby="tool-roles">
                <h2 id="tool-roles">"Granted by roles"</h2>
                {link_list("/roles", tool.roles)}
            </section>
        </div>
        <section aria-labelledby="tool-arguments">
            <h2 id="tool-arguments">"Arguments"</h2>
            {if arguments.is_empty() {
                view! { <p class="muted">"The schema declares no arguments."</p> }.into_any()
            } else {
                view! {
                    <table class="table">
                        <thead>
                            <tr>
                                <th scope="col">"Argument"</th>
                                <th scope="col">"Type"</th>
                                <th scope="col">"Required"</th>
                                <th scope="col">"Sensitive"</th>
                                <th scope="col">"Description"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {arguments
                                .into_iter()
                                .map(|a| {
                                    view! {
                                        <tr>
                                            <td><code>{a.name}</code></td>
                                            <td>{a.kind}</td>
                                            <td>{if a.required { "required" } else { "optional" }}</td>
                                            <td>
                                                {if a.sensitive {
                                                    view! { <span class="badge sensitive">"sensitive"</span> }.into_any()
                                                } else {
                                                    view! { <span class="muted">"no"</span> }.into_any()
                                                }}
                                            </td>
                                            <td class="description">{a.description}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
        </section>
        {sensitive_form}
        <section aria-labelledby="tool-schema">
            <h2 id="tool-schema">"Input schema"</h2>
            <pre class="schema"><code>{schema}</code></pre>
        </section>
    }
}

/// The pin, and for a quarantined tool why, since when, the diff and the admit form (or,
/// for anyone but an admin, the same read-only).
fn pin_view(tool: String, pin: PinDetail, admit: ServerAction<AdmitTool>) -> impl IntoView {
    let PinDetail {
        pin,
        quarantine,
        reason,
        since,
        offered_pin,
        diff,
        can_admit,
        findings,
        refuses_admission,
    } = pin;
    let pinned = match pin {
        Some(pin) => {
            view! { <p class="muted">"Pinned definition: SHA-256 " <code>{pin}</code></p> }
                .into_any()
        }
        None => view! { <p class="muted">"No definition of this tool has been admitted yet."</p> }
            .into_any(),
    };
    let Some(kind) = quarantine else {
        return pinned;
    };
    let heading = if kind == "new" {
        "Quarantined: a new tool no admin has admitted"
    } else {
        "Quarantined: its upstream changed the definition"
    };
    let decision = match (offered_pin.clone(), can_admit) {
        (Some(offered), true) => {
            view! { <AdmitForm tool=tool offered_pin=offered action=admit /> }.into_any()
        }
        (_, false) => view! {
            <p class="notice info" role="status">
                "Read-only: only an admin can admit a definition. Until then every call is refused."
            </p>
        }
        .into_any(),
        (None, true) => ().into_any(),
    };
    view! {
        <div class="notice error" role="alert" id="tool-quarantine">
            <strong>{heading}</strong>
            <p>
                "Every call is refused with TOOL_QUARANTINED"
                {since.map(|since| format!(" (since {since})"))} ": " {reason}
                ". Agents that learn a role granting it still read the pinned definition, never the offered one."
            </p>
        </div>
        {pinned}
        <section aria-labelledby="tool-pin-diff">
            <h2 id="tool-pin-diff">"Pinned and offered definitions"</h2>
            <p class="muted">
                "Lines marked − are only in the pinned definition, + only in the offered one"
                {offered_pin.map(|p| view! { " (SHA-256 " <code>{p}</code> ")" })} "."
            </p>
            <pre class="diff" aria-label="Pinned and offered definitions diff">
                {diff
                    .into_iter()
                    .map(|l| {
                        let (class, mark) = match l.tag.as_str() {
                            "insert" => ("diff-insert", "+ "),
                            "delete" => ("diff-delete", "− "),
                            _ => ("diff-equal", "  "),
                        };
                        view! { <span class=class>{mark} {l.text} "\n"</span> }
                    })
                    .collect_view()}
            </pre>
            <DefinitionFindings findings=findings refuses=refuses_admission />
            {decision}
        </section>
    }
    .into_any()
}
