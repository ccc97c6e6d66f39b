//! Compliance pages: the filtered sessions list, one session's timeline, and the audit
//! page (full chain verification and retention).

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::compliance::api::{
    EntryArgument, Integrity, SessionQuery, SessionRow, SessionsList, Timeline, TimelineEntry,
    list_sessions, retention_info, session_timeline, verify_audit_chain,
};
use crate::components::{ErrorNotice, Loading};
use crate::shared::encode;

fn session_query() -> impl Fn() -> SessionQuery + Copy + Send + Sync + 'static {
    let query = use_query_map();
    move || {
        let q = query.read();
        let get = |k: &str| q.get(k).filter(|v| !v.trim().is_empty());
        SessionQuery {
            key: get("key"),
            scope: get("scope"),
            from: get("from"),
            to: get("to"),
            role: get("role"),
            tool: get("tool"),
            outcome: get("outcome"),
            q: get("q"),
            before: get("before").and_then(|b| b.parse().ok()),
        }
    }
}

/// The chain check badge: green when every event checked verifies, a warning naming the
/// first bad event otherwise.
fn integrity_badge(integrity: &Integrity, scope: &'static str) -> impl IntoView + use<> {
    match &integrity.first_bad {
        None => view! {
            <p class="integrity ok" role="status">
                <span class="badge ok">"chain verified"</span>
                {format!(" The hash chain verifies over the {} events {scope}.", integrity.events)}
                " " <A href="/audit?run=1">"Run a full verification"</A>
            </p>
        }
        .into_any(),
        Some(bad) => view! {
            <div class="notice error integrity broken" role="alert">
                <strong>"Broken hash chain"</strong>
                <p>
                    {format!("The audit record was tampered with: {bad}. ")}
                    "Do not rely on these events until the cause is found. "
                    <A href="/audit?run=1">"Run a full verification"</A>
                </p>
            </div>
        }
        .into_any(),
    }
}

fn text_input(
    id: &'static str,
    label: &'static str,
    value: Option<String>,
    kind: &'static str,
) -> impl IntoView {
    view! {
        <label for=id>
            {label}
            <input id=id name=id type=kind value=value.unwrap_or_default() />
        </label>
    }
}

fn filter_form(query: &SessionQuery) -> impl IntoView + use<> {
    let outcome = query.outcome.clone().unwrap_or_default();
    let option = move |value: &'static str, label: &'static str| {
        view! {
            <option value=value selected=outcome == value>
                {label}
            </option>
        }
    };
    view! {
        <form class="filters" method="get" action="/sessions" role="search" aria-label="Filter sessions">
            {text_input("q", "Search", query.q.clone(), "search")}
            {text_input("key", "Agent key", query.key.clone(), "text")}
            {text_input("scope", "Scope", query.scope.clone(), "text")}
            {text_input("role", "Role learned", query.role.clone(), "text")}
            {text_input("tool", "Tool", query.tool.clone(), "text")}
            {text_input("from", "From", query.from.clone(), "date")}
            {text_input("to", "To", query.to.clone(), "date")}
            <label for="outcome">
                "Outcome"
                <select id="outcome" name="outcome">
                    {option("", "any")}
                    {option("denial", "had a denial")}
                    {option("violation", "had a governance violation")}
                    {option("error", "had a downstream error")}
                </select>
            </label>
            <div class="filter-actions">
                <button type="submit">"Filter"</button>
                <a href="/sessions">"Clear"</a>
            </div>
        </form>
    }
}

fn facet(
    query: &SessionQuery,
    outcome: Option<&'static str>,
    label: &'static str,
    count: u64,
    class: &'static str,
) -> impl IntoView + use<> {
    let target = query.with_outcome(outcome);
    let current = query.outcome.as_deref() == outcome;
    view! {
        <li class=format!("facet {class}")>
            <a href=format!("/sessions?{}", target.to_query_string())
                aria-current=current.then_some("true")>
                <span class="facet-count">{count}</span>
                " "
                {label}
            </a>
        </li>
    }
}

fn session_row(row: SessionRow) -> impl IntoView {
    let flags = (row.violations > 0, row.denials > 0, row.errors > 0);
    let class = if flags.0 {
        "violation"
    } else if flags.1 {
        "denied"
    } else {
        ""
    };
    view! {
        <tr class=class>
            <td>
                <A href=format!("/sessions/{}", encode(&row.id))>{row.id.clone()}</A>
            </td>
            <td><time>{row.started_at.get(..19).unwrap_or(&row.started_at).replace('T', " ")}</time></td>
            <td>{row.key.clone().unwrap_or_default()}</td>
            <td>{row.scope.clone().unwrap_or_default()}</td>
            <td class="description">{row.task_summary.clone().unwrap_or_default()}</td>
            <td>{row.roles.join(", ")}</td>
            <td class="num">{row.events}</td>
            <td>
                {flags.1.then(|| view! { <span class="badge danger">{format!("{} denied", row.denials)}</span> " " })}
                {flags.0.then(|| view! { <span class="badge violation">{format!("{} violation(s)", row.violations)}</span> " " })}
                {flags.2.then(|| view! { <span class="badge warn">{format!("{} error(s)", row.errors)}</span> })}
            </td>
        </tr>
    }
}

fn sessions_view(query: SessionQuery, list: SessionsList) -> impl IntoView {
    let filters = query.to_query_string();
    let next = list.next_cursor.map(|cursor| {
        let sep = if filters.is_empty() { "" } else { "&" };
        format!("/sessions?{filters}{sep}before={cursor}")
    });
    let exports = if filters.is_empty() {
        String::new()
    } else {
        format!("?{filters}")
    };
    view! {
        {integrity_badge(&list.integrity, "of the sessions shown")}
        <ul class="facets" aria-label="Sessions by outcome">
            {facet(&query, None, "sessions", list.sessions, "all")}
            {facet(&query, Some("denial"), "with a denial", list.with_denial, "denied")}
            {facet(&query, Some("violation"), "with a governance violation", list.with_violation, "violation")}
            {facet(&query, Some("error"), "with a downstream error", list.with_error, "error")}
        </ul>
        <p class="exports">
            "Export these sessions' events: "
            <a href=format!("/console/export/sessions.jsonl{exports}") download="">"JSONL"</a>
            " · "
            <a href=format!("/console/export/sessions.csv{exports}") download="">"CSV"</a>
        </p>
        {if list.rows.is_empty() {
            view! { <p class="notice info">"No session matches these filters."</p> }.into_any()
        } else {
            view! {
                <table class="table sessions">
                    <thead>
                        <tr>
                            <th scope="col">"Session"</th>
                            <th scope="col">"Started (UTC)"</th>
                            <th scope="col">"Agent key"</th>
                            <th scope="col">"Scope"</th>
                            <th scope="col">"Task"</th>
                            <th scope="col">"Roles learned"</th>
                            <th scope="col">"Events"</th>
                            <th scope="col">"Outcome"</th>
                        </tr>
                    </thead>
                    <tbody>{list.rows.into_iter().map(session_row).collect_view()}</tbody>
                </table>
            }
            .into_any()
        }}
        <nav class="pager" aria-label="Sessions pages">
            {query.before.is_some().then(|| view! { <a href=format!("/sessions?{filters}")>"← Newest"</a> })}
            {next.map(|href| view! { <a href=href>"Older →"</a> })}
        </nav>
    }
}

#[component]
pub fn SessionsPage() -> impl IntoView {
    let query = session_query();
    let list = Resource::new(query, list_sessions);
    view! {
        <Title text="Sessions" />
        <h1>"Sessions"</h1>
        <p class="lead">"Every agent session: what it learned, tried, was refused, and ran. Newest first."</p>
        {move || filter_form(&query())}
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(list) => sessions_view(query(), list).into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn argument_list(arguments: Vec<EntryArgument>) -> impl IntoView {
    (!arguments.is_empty()).then(|| {
        view! {
            <dl class="arguments">
                {arguments
                    .into_iter()
                    .map(|a| {
                        view! {
                            <dt><code>{a.name}</code></dt>
                            <dd>
                                <code>{a.value}</code>
                                {a.digest.then(|| view! { " " <span class="badge sensitive">"sensitive: digest only"</span> })}
                            </dd>
                        }
                    })
                    .collect_view()}
            </dl>
        }
    })
}

fn entry_view(e: TimelineEntry) -> impl IntoView {
    let bad_rule = matches!(e.tone.as_str(), "violation" | "denied");
    view! {
        {e.scope_grew.then(|| view! {
            <li class="scope-grew" role="note">
                {format!("Scope grew: the session learned a second role ({}) here.", e.role.clone().unwrap_or_default())}
            </li>
        })}
        <li class=format!("event tone-{}", e.tone) id=format!("event-{}", e.seq)>
            <div class="event-head">
                <span class=format!("badge tone-{}", e.tone)>{e.badge.clone()}</span>
                " "
                <strong>{e.headline.clone()}</strong>
                <span class="muted event-meta">
                    {format!(" #{} · {}", e.seq, e.at.replace('T', " "))}
                </span>
                " "
                <span class="event-actor">
                    "by " <code>{e.actor.clone().unwrap_or_else(|| "unknown".to_owned())}</code>
                </span>
            </div>
            {e.rule.clone().map(|rule| view! {
                <p class=if bad_rule { "rule danger" } else { "rule" }>"Rule: " <code>{rule}</code></p>
            })}
            {e.authorized_by.clone().map(|role| view! {
                <p>"Authorized by role " <code>{role}</code></p>
            })}
            {(!e.skill_versions.is_empty()).then(|| view! {
                <p class="muted">"Skill versions: " {e.skill_versions.join(", ")}</p>
            })}
            {argument_list(e.arguments)}
            {e.duration_ms.map(|ms| view! { <p class="muted">{format!("Took {ms} ms")}</p> })}
            {e.detail.map(|d| view! { <p class="detail">{d}</p> })}
        </li>
    }
}

fn timeline_view(t: Timeline) -> impl IntoView {
    let s = t.session;
    let id = encode(&s.id);
    view! {
        <h1>"Session " <code>{s.id.clone()}</code></h1>
        <p class="lead">{s.task_summary.clone().unwrap_or_else(|| "No task summary given.".into())}</p>
        <dl class="session-facts">
            <dt>"Agent key"</dt><dd>{s.key.clone().unwrap_or_default()}</dd>
            <dt>"Scope"</dt><dd>{s.scope.clone().unwrap_or_default()}</dd>
            <dt>"Started"</dt><dd>{s.started_at.clone()}</dd>
            <dt>"Last event"</dt><dd>{s.last_at.clone()}</dd>
            <dt>"Roles learned"</dt><dd>{s.roles.join(", ")}</dd>
            <dt>"Events"</dt>
            <dd>{format!("{} ({} calls, {} denied, {} violations, {} errors)", s.events, s.calls, s.denials, s.violations, s.errors)}</dd>
        </dl>
        {integrity_badge(&t.integrity, "of this session shown")}
        <p class="exports">
            "Export this session: "
            <a href=format!("/console/export/sessions.jsonl?session={id}") download="">"JSONL"</a>
            " · "
            <a href=format!("/console/export/sessions.csv?session={id}") download="">"CSV"</a>
        </p>
        {t.after.map(|after| view! {
            <p class="muted">{format!("Events after #{after}.")}</p>
        })}
        <ol class="timeline">{t.entries.into_iter().map(entry_view).collect_view()}</ol>
        {(t.after.is_some() || t.next_after.is_some()).then(|| view! {
            <nav class="pager" aria-label="Timeline pages">
                {t.after.is_some().then(|| view! { <a href=format!("/sessions/{id}")>"← First events"</a> })}
                " "
                {t.next_after.map(|next| view! {
                    <a href=format!("/sessions/{id}?after={next}") rel="next">"Later events →"</a>
                })}
            </nav>
        })}
    }
}

#[component]
pub fn SessionPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let after = move || {
        query
            .read()
            .get("after")
            .and_then(|a| a.parse::<u64>().ok())
    };
    let timeline = Resource::new(
        move || (id(), after()),
        |(id, after)| session_timeline(id, after),
    );
    view! {
        <Title text=move || format!("Session {}", id()) />
        <p class="crumbs">
            <A href="/sessions">"Sessions"</A>
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match timeline.await {
                    Ok(Some(t)) => timeline_view(t).into_any(),
                    Ok(None) => {
                        #[cfg(feature = "ssr")]
                        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                            response.set_status(http::StatusCode::NOT_FOUND);
                        }
                        view! {
                            <h1>"Session not found"</h1>
                            <div class="notice error" role="alert">
                                <p>{format!("The audit log has no session “{}”.", id())}</p>
                            </div>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Full chain verification (run on every visit: it is read-only) and retention.
#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let saved = move || query.read().get("saved").is_some();
    // `run=since`: only what is newer than the newest signed checkpoint; any other value
    // the whole chain.
    let run = move || query.read().get("run");
    // The walk reads every event, so it runs when asked for, not on every visit.
    let report = Resource::new(run, |run| async move {
        match run {
            Some(run) => verify_audit_chain(run == "since").await.map(Some),
            None => Ok(None),
        }
    });
    let asked_since = move || query.read().get("run").as_deref() == Some("since");
    let retention = Resource::new(|| (), |_| retention_info());
    view! {
        <Title text="Audit integrity" />
        <h1>"Audit integrity"</h1>
        <p class="lead">"A full walk of the hash chain, from the genesis or the newest retention anchor, checked against the checkpoints the server signs. A walk since the newest checkpoint re-reads only the newer events, so it is quick to run often; only a full walk finds an older event edited without re-chaining."</p>
        <form method="get" action="/audit">
            <input type="hidden" name="run" value="1" />
            <button type="submit" class="link-button">"Run a full verification"</button>
        </form>
        <form method="get" action="/audit">
            <input type="hidden" name="run" value="since" />
            <button type="submit" class="link-button">"Verify since the newest checkpoint"</button>
        </form>
        <Suspense fallback=|| view! { <Loading label="Verifying…" /> }>
            {move || Suspend::new(async move {
                match report.await {
                    Ok(None) => ().into_any(),
                    Ok(Some(r)) => {
                        let broken = r.first_bad.is_some() || !r.checkpoint_problems.is_empty();
                        if !broken {
                            let walked = match &r.since {
                                Some((seq, at)) => format!(
                                    " {} events after the checkpoint of seq {seq} (signed at {at}) verify, to tip seq {}. Events up to seq {seq} were not re-read: a full verification walks them all.",
                                    r.events, r.tip_seq
                                ),
                                None => format!(
                                    " {} events verify, from seq {} to tip seq {}.{}",
                                    r.events,
                                    r.start_seq,
                                    r.tip_seq,
                                    if r.start_seq > 0 { " The retention anchor it starts from is vouched for by its signed prune event." } else { "" }
                                ),
                            };
                            view! {
                                {(asked_since() && r.since.is_none()).then(|| view! {
                                    <p class="muted">"No checkpoint signed by the server's key to start from: the whole chain was walked."</p>
                                })}
                                <p class="integrity ok" role="status">
                                    <span class="badge ok">"chain verified"</span>
                                    {walked}
                                </p>
                                <p class="muted">
                                    {match &r.newest_checkpoint {
                                        Some((seq, at)) => format!(
                                            "{} signed checkpoints match; the newest, signed at {at}, covers seq {seq}; {} newer events are not covered yet.",
                                            r.checkpoints, r.uncovered_events
                                        ),
                                        None => "No signed checkpoint yet: a deletion of the newest events would not be detected.".to_owned(),
                                    }}
                                </p>
                                <p class="muted">"Tip hash " <code>{r.tip_hash}</code></p>
                            }.into_any()
                        } else {
                            let verified = r.tip_seq - r.start_seq;
                            view! {
                                <div class="notice error integrity broken" role="alert">
                                    <strong>"Broken hash chain"</strong>
                                    {r.first_bad.map(|bad| view! {
                                        <p>{format!("The chain breaks at {bad}. The {verified} events before it verify.")}</p>
                                    })}
                                    {(!r.checkpoint_problems.is_empty()).then(|| view! {
                                        <ul>
                                            {r.checkpoint_problems.into_iter().map(|p| view! { <li>{p}</li> }).collect_view()}
                                        </ul>
                                    })}
                                </div>
                            }.into_any()
                        }
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
        <h2>"Retention"</h2>
        {move || saved().then(|| view! { <p class="notice info" role="status">"Retention saved."</p> })}
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match retention.await {
                    Ok(r) => view! {
                        <p>
                            {match r.days {
                                Some(d) => format!("Events older than {d} days are pruned in whole segments of 1000."),
                                None => "Every event is kept (no retention period).".to_owned(),
                            }}
                            {(r.anchor_seq > 0).then(|| format!(" The chain now starts after the anchor at seq {}.", r.anchor_seq))}
                        </p>
                        {r.can_change.then(|| view! {
                            <form class="inline-form" method="post" action="/console/retention">
                                <CsrfField />
                                <label for="days">
                                    "Retention (days, empty keeps everything)"
                                    <input id="days" name="days" type="number" min="1"
                                        value=r.days.map(|d| d.to_string()).unwrap_or_default() />
                                </label>
                                <label for="prune_now">
                                    <input id="prune_now" name="prune_now" type="checkbox" value="1" />
                                    " prune now"
                                </label>
                                <button type="submit">"Save retention"</button>
                            </form>
                        })}
                    }.into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}
