//! Approval holds: the reviewers' queue of held calls, and one hold with the exact call,
//! the rule that held it, and the approve and deny forms.
//!
//! The forms are `ActionForm`s: with JavaScript they post in the background and the hold
//! reloads in place; without it, the browser comes back to the hold's page, which shows the
//! outcome (see [`crate::components::flash`]) and the new state.

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::components::flash::Notice;
use crate::components::{ErrorNotice, Loading};
use crate::holds::api::{
    ApproveHold, DenyHold, HoldDetail, HoldSummary, MAX_REASON, Notified, STATE_FILTERS, get_hold,
    list_holds,
};
use crate::revisions::candidates::{pager, when};
use crate::shared::ConsoleError;
use crate::shared::encode;

fn state_badge(state: &str) -> impl IntoView + use<> {
    view! { <span class=format!("badge hold-state hold-{state}")>{state.to_owned()}</span> }
}

fn hold_table(rows: Vec<HoldSummary>) -> impl IntoView {
    view! {
        <table class="table holds" aria-label="Holds">
            <thead>
                <tr>
                    <th scope="col">"Hold"</th>
                    <th scope="col">"Session"</th>
                    <th scope="col">"Agent key"</th>
                    <th scope="col">"Role"</th>
                    <th scope="col">"Tool"</th>
                    <th scope="col">"Rule"</th>
                    <th scope="col">"Age"</th>
                    <th scope="col">"Expires"</th>
                    <th scope="col">"State"</th>
                </tr>
            </thead>
            <tbody>
                {rows
                    .into_iter()
                    .map(|h| {
                        let session = h.session_id.clone();
                        view! {
                            <tr class=format!("hold-row hold-{}", h.state)>
                                <td class="id">
                                    <A href=format!("/holds/{}", encode(&h.id))>{h.id.clone()}</A>
                                </td>
                                <td class="id">
                                    <A href=format!("/sessions/{}", encode(&session))>
                                        <code>{session.clone()}</code>
                                    </A>
                                </td>
                                <td>{h.key.clone()}</td>
                                <td><code>{h.role.clone()}</code></td>
                                <td><code>{h.tool.clone()}</code></td>
                                <td class="description">{h.rule.clone()}</td>
                                <td>{h.age.clone()}</td>
                                <td>
                                    <time datetime=h.expires_at.clone()>{when(&h.expires_at)}</time>
                                    " "
                                    <span class="muted">{format!("({})", h.expires_in)}</span>
                                </td>
                                <td>{state_badge(&h.state)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

/// Plain links, one per state, so the filter works without JavaScript.
fn state_filters(current: String) -> impl IntoView {
    view! {
        <ul class="facets" aria-label="Holds by state">
            {STATE_FILTERS
                .iter()
                .map(|state| {
                    let href = if *state == "pending" {
                        "/holds".to_owned()
                    } else {
                        format!("/holds?state={state}")
                    };
                    let label = if *state == "all" { "every state" } else { state };
                    view! {
                        <li class="facet">
                            <a href=href aria-current=(current == *state).then_some("true")>
                                {label}
                            </a>
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
}

#[component]
pub fn HoldsPage() -> impl IntoView {
    let query = use_query_map();
    let state = move || query.read().get("state").filter(|v| !v.trim().is_empty());
    let before = move || query.read().get("before").filter(|v| !v.trim().is_empty());
    let holds = Resource::new(
        move || (state(), before()),
        |(state, before)| list_holds(state, before),
    );
    view! {
        <Title text="Holds" />
        <h1>"Holds"</h1>
        <p class="lead">
            "Calls that a requires-approval limit stopped before they ran. A reviewer approves or denies each exact call; an approved call runs once, when its agent comes back for it."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match holds.await {
                    Ok(page) => {
                        let shown = page.state.clone();
                        let base = if shown == "pending" {
                            "/holds?".to_owned()
                        } else {
                            format!("/holds?state={}&", encode(&shown))
                        };
                        let first = base.trim_end_matches(['?', '&']).to_owned();
                        let empty = page.rows.is_empty();
                        view! {
                            {state_filters(shown.clone())}
                            {if empty && before().is_none() {
                                let message = if shown == "pending" {
                                    "No call is waiting for a reviewer.".to_owned()
                                } else {
                                    format!("No hold is {shown}.")
                                };
                                view! { <p class="notice info">{message}</p> }.into_any()
                            } else {
                                hold_table(page.rows).into_any()
                            }}
                            {pager(
                                "Hold pages",
                                before().map(|_| (first, "← Newest")),
                                page.next.map(|next| (format!("{base}before={}", encode(&next)), "Older →")),
                            )}
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
pub fn HoldPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let approve = ServerAction::<ApproveHold>::new();
    let deny = ServerAction::<DenyHold>::new();
    let hold = Resource::new(
        move || (id(), approve.version().get(), deny.version().get()),
        |(id, _, _)| get_hold(id),
    );
    // The newest outcome of either form when JavaScript posted it; it outlives the reload.
    let latest = RwSignal::new(None::<Result<Notice, ConsoleError>>);
    Effect::new(move || {
        if let Some(r) = approve.value().get() {
            latest.set(Some(r));
        }
    });
    Effect::new(move || {
        if let Some(r) = deny.value().get() {
            latest.set(Some(r));
        }
    });
    view! {
        <Title text=move || format!("Hold {}", id()) />
        <p class="crumbs">
            <A href="/holds">"Holds"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match hold.await {
                    Ok(Some(h)) => hold_view(h, latest, approve, deny).into_any(),
                    Ok(None) => {
                        #[cfg(feature = "ssr")]
                        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                            response.set_status(http::StatusCode::NOT_FOUND);
                        }
                        view! {
                            <h1>"Hold not found"</h1>
                            <p class="notice info">
                                "There is no hold " <code>{id()}</code> ". "
                                <A href="/holds">"All holds"</A>
                            </p>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// A decision's outcome: a success, or the refusal as a form error naming what to fix.
fn outcome(result: Result<Notice, ConsoleError>) -> impl IntoView {
    match result {
        Ok(n) if !n.error => {
            view! { <p class="notice success" role="status">{n.message}</p> }.into_any()
        }
        Ok(n) => view! {
            <div class="notice error" role="alert">
                <strong>"Not recorded"</strong>
                <p>{n.message}</p>
            </div>
        }
        .into_any(),
        Err(e) => view! {
            <div class="notice error" role="alert">
                <strong>"Not recorded"</strong>
                <p>{e.to_string()}</p>
            </div>
        }
        .into_any(),
    }
}

fn hold_view(
    h: HoldDetail,
    latest: RwSignal<Option<Result<Notice, ConsoleError>>>,
    approve: ServerAction<ApproveHold>,
    deny: ServerAction<DenyHold>,
) -> impl IntoView {
    let s = h.summary.clone();
    let from_redirect = h.notice.clone().map(Ok);
    let session_href = format!("/sessions/{}", encode(&s.session_id));
    let revision_moved = h.current_revision != h.catalog_revision;
    view! {
        <h1>"Hold " <code>{s.id.clone()}</code> " " {state_badge(&s.state)}</h1>
        <p class="lead">
            "A call of " <code>{s.tool.clone()}</code> " by agent key " <strong>{s.key.clone()}</strong>
            {format!(", held {} ago under role ", s.age)} <code>{s.role.clone()}</code> "."
        </p>
        <section class="card" aria-labelledby="hold-rule">
            <h2 id="hold-rule">"Why it was held"</h2>
            <p class="rule">{s.rule.clone()}</p>
        </section>
        <section aria-labelledby="hold-call">
            <h2 id="hold-call">"The call"</h2>
            <dl class="session-facts">
                <dt>"Session"</dt>
                <dd><A href=session_href><code>{s.session_id.clone()}</code></A></dd>
                <dt>"Agent key"</dt>
                <dd>
                    {s.key.clone()}
                    {h.key_created_by.clone().map(|by| view! { <span class="muted">{format!(" (created by {by})")}</span> })}
                </dd>
                <dt>"Scope"</dt><dd><code>{s.scope.clone()}</code></dd>
                <dt>"Role"</dt><dd><code>{s.role.clone()}</code></dd>
                <dt>"Tool"</dt>
                <dd><A href=format!("/tools/{}", encode(&s.tool))><code>{s.tool.clone()}</code></A></dd>
                <dt>"Raised"</dt>
                <dd><time datetime=s.created_at.clone()>{when(&s.created_at)}</time></dd>
                <dt>"Expires"</dt>
                <dd>
                    <time datetime=s.expires_at.clone()>{when(&s.expires_at)}</time>
                    {format!(" ({}); an approval lets the call run for {} minutes", s.expires_in, h.minutes)}
                </dd>
                <dt>"Catalog revision"</dt>
                <dd>
                    <code>{h.catalog_revision.clone()}</code>
                    {revision_moved.then(|| view! {
                        <span class="muted">" (now " <code>{h.current_revision.clone()}</code> ")"</span>
                    })}
                </dd>
                <dt>"Arguments digest"</dt><dd><code>{h.arguments_digest.clone()}</code></dd>
            </dl>
            {revision_moved.then(|| view! {
                <p class="notice warning" role="status">
                    "The catalog changed since this call was held. When the agent comes back for an approved call, it is decided again under the catalog then in force and does not run if that refuses it."
                </p>
            })}
        </section>
        <section aria-labelledby="hold-arguments">
            <h2 id="hold-arguments">"Arguments, exactly as they would run"</h2>
            {if h.arguments.is_empty() {
                view! { <p class="muted">"No arguments."</p> }.into_any()
            } else {
                view! {
                    <dl class="arguments hold-arguments" aria-labelledby="hold-arguments">
                        {h.arguments
                            .iter()
                            .map(|a| view! {
                                <dt><code>{a.name.clone()}</code></dt>
                                <dd>
                                    <code>{a.value.clone()}</code>
                                    {a.digest.then(|| view! { " " <span class="badge sensitive">"sensitive: digest only"</span> })}
                                </dd>
                            })
                            .collect_view()}
                    </dl>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="hold-earlier">
            <h2 id="hold-earlier">"The session's earlier calls"</h2>
            {if h.earlier.is_empty() {
                view! { <p class="muted">"None: this is the session's first call."</p> }.into_any()
            } else {
                view! {
                    <ol class="hold-earlier" aria-labelledby="hold-earlier">
                        {h.earlier
                            .iter()
                            .map(|c| view! {
                                <li>
                                    <time datetime=c.at.clone()>{when(&c.at)}</time>
                                    " " <span class="badge">{c.badge.clone()}</span>
                                    " " {c.headline.clone()}
                                </li>
                            })
                            .collect_view()}
                    </ol>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="hold-notified">
            <h2 id="hold-notified">"Who was notified"</h2>
            {if h.notified.is_empty() {
                view! {
                    <p class="muted">
                        "Nobody yet: no notifier announces this hold, or its announcement is still being recorded."
                    </p>
                }
                    .into_any()
            } else {
                view! {
                    <ul class="hold-notified" aria-labelledby="hold-notified">
                        {h.notified.iter().map(notified_line).collect_view()}
                    </ul>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="hold-decision">
            <h2 id="hold-decision">"Decision"</h2>
            {move || latest.get().or_else(|| from_redirect.clone()).map(outcome)}
            {decision(&h, approve, deny)}
        </section>
    }
}

/// One announcement: to whom, what, and how its delivery went.
fn notified_line(n: &Notified) -> impl IntoView + use<> {
    let what = if n.event == "hold.expiring" {
        "that it expires soon"
    } else {
        "that it waits"
    };
    let how = match n.state.as_str() {
        "delivered" => format!("delivered {}", when(&n.at)),
        "failed" => format!(
            "failed after {} attempts: {}",
            n.attempts,
            n.last_error.clone().unwrap_or_default()
        ),
        "skipped" => n
            .last_error
            .clone()
            .unwrap_or_else(|| "not sent".to_owned()),
        _ if n.attempts == 0 => "being sent".to_owned(),
        _ => format!(
            "retrying ({} failed, last: {}); next try {}",
            n.attempts,
            n.last_error.clone().unwrap_or_default(),
            when(&n.at)
        ),
    };
    view! {
        <li class=format!("notified-{}", n.state)>
            <strong>{n.notifier.clone()}</strong>
            {format!(", {what}: ")}
            <span class=format!("badge status-{}", n.state)>{how}</span>
        </li>
    }
}

/// Where the decision stands, and the forms while it can still be made.
fn decision(
    h: &HoldDetail,
    approve: ServerAction<ApproveHold>,
    deny: ServerAction<DenyHold>,
) -> impl IntoView + use<> {
    let s = &h.summary;
    let by = s
        .decided_by
        .clone()
        .unwrap_or_else(|| "a reviewer".to_owned());
    // The reason as a sentence, whether or not the reviewer ended it with a full stop.
    let reason = h.reason.clone().unwrap_or_default();
    let reason = if reason.ends_with(['.', '!', '?']) {
        reason
    } else {
        format!("{reason}.")
    };
    let decided = h.decided_at.as_deref().map(when).unwrap_or_default();
    let finished = h.finished_at.as_deref().map(when).unwrap_or_default();
    let settled = |text: String| view! { <p class="hold-settled">{text}</p> }.into_any();
    match s.state.as_str() {
        "pending" if h.can_review => decision_forms(s.id.clone(), approve, deny).into_any(),
        "pending" => view! {
            <p class="notice info" role="status">
                "This call waits for a reviewer. Deciding needs the reviewer console role."
            </p>
        }
        .into_any(),
        "approved" => settled(format!(
            "Approved by {by} on {decided}: {reason} The agent runs it once by calling call_tool with this hold_id before {}.",
            when(&s.expires_at)
        )),
        "executed" => settled(format!(
            "Approved by {by} on {decided}: {reason} The call ran on {finished}; it cannot run again."
        )),
        "refused" => settled(format!(
            "Approved by {by} on {decided}: {reason} When the agent came back on {finished}, the policy in force refused the call, so it did not run."
        )),
        "denied" => settled(format!(
            "Denied by {by} on {decided}: {reason} The call did not run, and what it reserved was released."
        )),
        "withdrawn" => settled(format!(
            "The agent withdrew it on {finished} by cancelling its task: the call did not run, and what it reserved was released."
        )),
        _ if s.decided_by.is_some() => settled(format!(
            "Approved by {by} on {decided}: {reason} The agent did not run it in time; the approval expired and what it reserved was released."
        )),
        _ => settled(
            "No reviewer decided it in time: it expired without running, and what it reserved was released."
                .to_owned(),
        ),
    }
}

fn decision_forms(
    id: String,
    approve: ServerAction<ApproveHold>,
    deny: ServerAction<DenyHold>,
) -> impl IntoView {
    let (approve_id, deny_id) = (id.clone(), id);
    let (approve_max, deny_max) = (MAX_REASON.to_string(), MAX_REASON.to_string());
    view! {
        <div class="detail-grid hold-forms">
            <ActionForm action=approve attr:class="card form decide-form" attr:aria-label="Approve this call">
                <CsrfField />
                <input type="hidden" name="id" value=approve_id.clone() />
                <label for="approve-reason">"Reason for approving (required)"</label>
                <textarea id="approve-reason" name="reason" required maxlength=approve_max.clone() rows="3"></textarea>
                <button type="submit" class="primary">"Approve this call"</button>
            </ActionForm>
            <ActionForm action=deny attr:class="card form decide-form" attr:aria-label="Deny this call">
                <CsrfField />
                <input type="hidden" name="id" value=deny_id.clone() />
                <label for="deny-reason">"Reason for denying (required)"</label>
                <textarea id="deny-reason" name="reason" required maxlength=deny_max.clone() rows="3"></textarea>
                <button type="submit" class="danger">"Deny this call"</button>
            </ActionForm>
        </div>
    }
}
