//! Candidates: the review queue of proposed skill revisions, and one candidate with its
//! diff, cited sources, evidence, gate verdict and the approve/reject form.

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::components::catalog::Prose;
use crate::components::{ErrorNotice, Loading};
use crate::revisions::api::{
    CandidateDetail, CandidateRow, DecideCandidate, get_candidate, list_candidates,
};
use crate::shared::encode;

pub fn verdict_badge(verdict: String) -> impl IntoView {
    let class = format!(
        "badge verdict verdict-{}",
        verdict.to_lowercase().replace('_', "-")
    );
    view! { <span class=class>{verdict}</span> }
}

/// `2026-11-30T08:00:00.123456Z` as `2026-11-30 08:00 UTC`: stable, no client clock needed.
pub fn when(stamp: &str) -> String {
    match (stamp.get(..10), stamp.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => stamp.to_owned(),
    }
}

pub fn candidate_table(rows: Vec<CandidateRow>) -> impl IntoView {
    view! {
        <table class="table">
            <thead>
                <tr>
                    <th scope="col">"Candidate"</th>
                    <th scope="col">"Skill"</th>
                    <th scope="col">"Verdict"</th>
                    <th scope="col">"Status"</th>
                    <th scope="col">"Proposed"</th>
                    <th scope="col">"Proposer"</th>
                </tr>
            </thead>
            <tbody>
                {rows
                    .into_iter()
                    .map(|c| {
                        view! {
                            <tr>
                                <td>
                                    <A href=format!("/candidates/{}", c.id)>{c.id.clone()}</A>
                                </td>
                                <td>
                                    <A href=format!("/skills/{}", c.skill)>{c.skill.clone()}</A>
                                    " "
                                    <span class="muted">{format!("on v{}", c.base_version)}</span>
                                </td>
                                <td>{verdict_badge(c.verdict)}</td>
                                <td>
                                    {c.status}
                                    {c.stale.then(|| view! { " " <span class="badge stale">"stale"</span> })}
                                </td>
                                <td>{when(&c.created_at)}</td>
                                <td>{format!("{} ({})", c.proposer, c.proposer_kind)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

#[component]
pub fn CandidatesPage() -> impl IntoView {
    let query = use_query_map();
    let all = move || query.read().get("all").is_some_and(|v| v == "1");
    let before = move || query.read().get("before").filter(|v| !v.trim().is_empty());
    let candidates = Resource::new(
        move || (all(), before()),
        |(all, before)| list_candidates(all, before),
    );
    view! {
        <Title text="Candidates" />
        <h1>"Candidates"</h1>
        <p class="lead">
            "Proposed skill revisions with cited sources, evidence and the server's gate verdict. The verdict is advice: a reviewer decides."
        </p>
        <p>
            {move || {
                if all() {
                    view! { <A href="/candidates">"Show pending only"</A> }.into_any()
                } else {
                    view! { <A href="/candidates?all=1">"Show decided candidates too"</A> }
                        .into_any()
                }
            }}
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match candidates.await {
                    Ok(page) if page.rows.is_empty() && before().is_none() => {
                        view! { <p class="notice info">"No candidates are waiting for review."</p> }
                            .into_any()
                    }
                    Ok(page) => {
                        let base = if all() { "/candidates?all=1&" } else { "/candidates?" };
                        let first = if all() { "/candidates?all=1" } else { "/candidates" };
                        view! {
                            {candidate_table(page.rows)}
                            {pager(
                                "Candidate pages",
                                before().map(|_| (first.to_owned(), "← Newest")),
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

/// Links to the first and the next page of a list: plain links, so paging works without
/// JavaScript.
pub fn pager(
    label: &'static str,
    first: Option<(String, &'static str)>,
    next: Option<(String, &'static str)>,
) -> impl IntoView {
    (first.is_some() || next.is_some()).then(|| {
        view! {
            <nav class="pager" aria-label=label>
                {first.map(|(href, text)| view! { <a href=href>{text}</a> })}
                " "
                {next.map(|(href, text)| view! { <a href=href rel="next">{text}</a> })}
            </nav>
        }
    })
}

#[component]
pub fn CandidatePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let decide = ServerAction::<DecideCandidate>::new();
    let candidate = Resource::new(
        move || (id(), decide.version().get()),
        |(id, _)| get_candidate(id),
    );
    view! {
        <Title text=move || format!("Candidate {}", id()) />
        <p class="crumbs">
            <A href="/candidates">"Candidates"</A>
        </p>
        // Outside the Suspense: the candidate reloads after a decision, the outcome stays.
        {move || match decide.value().get() {
            Some(Ok(message)) => {
                view! { <p class="notice success" role="status">{message}</p> }.into_any()
            }
            Some(Err(e)) => view! { <ErrorNotice error=e /> }.into_any(),
            None => ().into_any(),
        }}
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match candidate.await {
                    Ok(Some(c)) => candidate_view(c, decide).into_any(),
                    Ok(None) => {
                        view! {
                            <h1>"Candidate not found"</h1>
                            <p class="notice info">
                                "There is no candidate " <code>{id()}</code> ". "
                                <A href="/candidates">"All candidates"</A>
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

fn candidate_view(c: CandidateDetail, decide: ServerAction<DecideCandidate>) -> impl IntoView {
    let row = c.row.clone();
    let proposed = c
        .diff
        .iter()
        .filter(|l| l.tag != "delete")
        .map(|l| l.text.clone())
        .collect::<Vec<_>>()
        .join("\n");
    view! {
        <h1>
            "Candidate for " <A href=format!("/skills/{}", row.skill)>{row.skill.clone()}</A> " "
            {verdict_badge(row.verdict.clone())}
        </h1>
        <p class="lead">
            {format!(
                "Proposed by {} ({}) on {}, based on version {} (current: {}). Status: {}.",
                row.proposer,
                row.proposer_kind,
                when(&row.created_at),
                row.base_version,
                c.current_version,
                row.status,
            )}
        </p>
        {row.stale.then(|| view! {
            <p class="notice warning" role="status">
                <strong>"Stale. "</strong>
                {format!(
                    "This candidate is based on version {} but version {} is current, so it cannot be approved as is; reject it or ask for a proposal on the current version.",
                    row.base_version, c.current_version
                )}
            </p>
        })}
        {c.approved_version.map(|v| view! {
            <p class="notice info" role="status">{format!("Approved as version {v}.")}</p>
        })}
        {c.decided_by.clone().map(|by| view! {
            <p>
                <strong>"Decided by "</strong> {by} ": " {c.reason.clone().unwrap_or_default()}
            </p>
        })}
        <section class="card" aria-labelledby="cand-note">
            <h2 id="cand-note">"Note"</h2>
            <p>{c.note.clone()}</p>
            {c.description.clone().map(|d| view! { <p><strong>"New description: "</strong> {d}</p> })}
            {c.frontmatter.clone().map(|f| view! {
                <p><strong>"SKILL.md frontmatter besides name and description:"</strong></p>
                <pre class="frontmatter">{f}</pre>
            })}
            {c.resources.clone().map(|resources| view! {
                <p>
                    <strong>"Resources (they replace the current ones): "</strong>
                    {if resources.is_empty() { "none".to_owned() } else { resources.join("; ") }}
                </p>
            })}
        </section>
        <section aria-labelledby="cand-verdict">
            <h2 id="cand-verdict">"Gate verdict"</h2>
            <p class="verdict-summary">{c.verdict_summary.clone()}</p>
            <ul class="gate-checks">
                {c.verdict_checks
                    .iter()
                    .map(|ch| {
                        let mark = if ch.passed { "✔ " } else { "✘ " };
                        let class = if ch.passed { "passed" } else { "failed" };
                        view! { <li class=class>{mark} {ch.condition.clone()}</li> }
                    })
                    .collect_view()}
            </ul>
        </section>
        <section aria-labelledby="cand-evidence">
            <h2 id="cand-evidence">{format!("Evidence ({})", c.evidence_kind)}</h2>
            {if c.evidence.is_empty() {
                view! { <p class="muted">"No evidence rows."</p> }.into_any()
            } else {
                view! {
                    <table class="table">
                        <thead>
                            <tr>
                                <th scope="col">"Case"</th>
                                <th scope="col">"Incumbent"</th>
                                <th scope="col">"Candidate"</th>
                                <th scope="col">"Detail"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {c.evidence
                                .iter()
                                .map(|e| view! {
                                    <tr>
                                        <td>{e.case.clone()}</td>
                                        <td>{e.incumbent.clone()}</td>
                                        <td>{e.candidate.clone()}</td>
                                        <td>{e.detail.clone()}</td>
                                    </tr>
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="cand-sources">
            <h2 id="cand-sources">"Cited sources"</h2>
            <ul class="sources">
                {c.sources
                    .iter()
                    .map(|s| view! {
                        <li>
                            <code>{s.id.clone()}</code> " "
                            <span class="badge">{s.kind.clone()}</span> " " {s.text.clone()}
                        </li>
                    })
                    .collect_view()}
            </ul>
        </section>
        <section aria-labelledby="cand-diff">
            <h2 id="cand-diff">{format!("Instructions: changes against version {}", row.base_version)}</h2>
            <pre class="diff" aria-label="Instructions diff">
                {c.diff
                    .iter()
                    .map(|l| {
                        let (class, mark) = match l.tag.as_str() {
                            "insert" => ("diff-insert", "+ "),
                            "delete" => ("diff-delete", "- "),
                            _ => ("diff-equal", "  "),
                        };
                        view! { <span class=class>{mark} {l.text.clone()} "\n"</span> }
                    })
                    .collect_view()}
            </pre>
        </section>
        <section aria-labelledby="cand-decide">
            <h2 id="cand-decide">"Decision"</h2>
            {match c.cannot_decide.clone() {
                Some(why) => view! { <p class="notice info" role="status">{why}</p> }.into_any(),
                None => decision_form(row.id.clone(), row.stale, decide).into_any(),
            }}
        </section>
        <details>
            <summary>"Full proposed instructions"</summary>
            <Prose text=proposed />
        </details>
    }
}

fn decision_form(id: String, stale: bool, decide: ServerAction<DecideCandidate>) -> impl IntoView {
    view! {
        <ActionForm action=decide attr:class="form decide-form">
            <CsrfField />
            <input type="hidden" name="id" value=id />
            <label for="decide-reason">"Reason (required)"</label>
            <textarea id="decide-reason" name="reason" required rows="3"></textarea>
            <fieldset class="decision">
                <legend>"Decision"</legend>
                {(!stale).then(|| view! {
                    <label>
                        <input type="radio" name="decision" value="approve" required />
                        " Approve: make it the current version"
                    </label>
                })}
                <label>
                    <input type="radio" name="decision" value="reject" required />
                    " Reject"
                </label>
            </fieldset>
            <button type="submit" class="primary">"Record decision"</button>
        </ActionForm>
    }
}
