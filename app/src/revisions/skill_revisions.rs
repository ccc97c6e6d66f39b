//! The revisions part of a skill's page: versions (restore), feedback from agents and
//! reviewers (add general feedback or an explicit requirement), wiki patterns, candidates,
//! and an upload (a `SKILL.md` or an Agent Skills zip, or a pasted `SKILL.md`) that becomes
//! a candidate.

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::components::{ErrorNotice, Loading};
use crate::revisions::api::{
    AddFeedback, RestoreVersion, SkillRevisionsData, UploadSkillMd, skill_revisions,
};
use crate::revisions::candidates::{candidate_table, pager, when};
use crate::shared::ConsoleError;
use crate::shared::encode;

fn outcome(
    value: impl Get<Value = Option<Result<String, ConsoleError>>> + Send + Sync + 'static,
) -> impl IntoView {
    move || match value.get() {
        Some(Ok(message)) => {
            view! { <p class="notice success" role="status">{message}</p> }.into_any()
        }
        Some(Err(e)) => view! { <ErrorNotice error=e /> }.into_any(),
        None => ().into_any(),
    }
}

#[component]
pub fn SkillRevisions(#[prop(into)] slug: Signal<String>) -> impl IntoView {
    let feedback = ServerAction::<AddFeedback>::new();
    let upload = ServerAction::<UploadSkillMd>::new();
    let restore = ServerAction::<RestoreVersion>::new();
    let query = use_query_map();
    let param = move |name: &str| query.read().get(name).filter(|v| !v.trim().is_empty());
    let data = Resource::new(
        move || {
            (
                slug.get(),
                param("feedback_after"),
                param("candidates_before"),
                feedback.version().get(),
                upload.version().get(),
                restore.version().get(),
            )
        },
        |(slug, feedback_after, candidates_before, ..)| {
            skill_revisions(slug, feedback_after, candidates_before)
        },
    );
    view! {
        // Outside the Suspense: the section reloads after each action, the outcome stays.
        {outcome(restore.value())}
        {outcome(feedback.value())}
        {outcome(upload.value())}
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(Some(d)) => revisions_view(d, feedback, upload, restore).into_any(),
                    // The skill page already says the skill does not exist.
                    Ok(None) => ().into_any(),
                    // A bad page cursor, or a failure: say so rather than hide the section.
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn revisions_view(
    d: SkillRevisionsData,
    feedback: ServerAction<AddFeedback>,
    upload: ServerAction<UploadSkillMd>,
    restore: ServerAction<RestoreVersion>,
) -> impl IntoView {
    let skill = d.skill.clone();
    let page = format!("/skills/{}", encode(&skill));
    let feedback_pager = pager(
        "Feedback pages",
        d.feedback_paged
            .then(|| (format!("{page}#skill-feedback"), "← First feedback")),
        d.feedback_next.clone().map(|next| {
            (
                format!("{page}?feedback_after={}#skill-feedback", encode(&next)),
                "Later feedback →",
            )
        }),
    );
    let candidates_pager = pager(
        "Candidate pages",
        d.candidates_paged
            .then(|| (format!("{page}#skill-candidates"), "← Newest candidates")),
        d.candidates_next.clone().map(|next| {
            (
                format!(
                    "{page}?candidates_before={}#skill-candidates",
                    encode(&next)
                ),
                "Older candidates →",
            )
        }),
    );
    let more_patterns = (d.patterns_total > d.patterns.len() as u64).then(|| {
        format!(
            "The first {} of {} patterns are shown.",
            d.patterns.len(),
            d.patterns_total
        )
    });
    let notice = d.notice.clone().map(|n| {
        let class = if n.error {
            "notice error"
        } else {
            "notice success"
        };
        let role = if n.error { "alert" } else { "status" };
        view! { <p class=class role=role>{n.message}</p> }
    });
    view! {
        <section aria-labelledby="skill-versions">
            <h2 id="skill-versions">"Versions"</h2>
            <ul class="versions">
                {d.versions
                    .iter()
                    .map(|&v| {
                        let current = v == d.current_version;
                        let skill = skill.clone();
                        view! {
                            <li>
                                {format!("v{v}")}
                                {current.then(|| view! { " " <span class="badge">"current"</span> })}
                                " "
                                <a
                                    href=format!(
                                        "/console/export/skills/{}/versions/{v}.zip",
                                        encode(&skill),
                                    )
                                    download=format!("{skill}-v{v}.zip")
                                    rel="external"
                                >
                                    {format!("Export v{v} (zip)")}
                                </a>
                                {(!current && d.can_restore).then(|| view! {
                                    <ActionForm action=restore attr:class="inline-form">
                                        <CsrfField />
                                        <input type="hidden" name="skill" value=skill />
                                        <input type="hidden" name="version" value=v.to_string() />
                                        <button type="submit">{format!("Restore v{v}")}</button>
                                    </ActionForm>
                                })}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </section>
        <section aria-labelledby="skill-patterns">
            <h2 id="skill-patterns">"Wiki patterns"</h2>
            {if d.patterns.is_empty() {
                view! { <p class="muted">"No patterns recorded for this skill yet."</p> }.into_any()
            } else {
                d.patterns
                    .into_iter()
                    .map(|p| view! {
                        <article class="card pattern">
                            <h3>{p.name} " " <code>{p.id}</code></h3>
                            <p>{p.content}</p>
                            <p class="muted">
                                {format!("by {}; sources: {}", p.created_by, p.sources.join(", "))}
                            </p>
                        </article>
                    })
                    .collect_view()
                    .into_any()
            }}
            {more_patterns.map(|text| view! { <p class="muted">{text}</p> })}
        </section>
        <section aria-labelledby="skill-feedback">
            <h2 id="skill-feedback">"Feedback"</h2>
            {if d.feedback.is_empty() && !d.feedback_paged {
                view! { <p class="muted">"No feedback on this skill yet."</p> }.into_any()
            } else {
                view! {
                    <table class="table">
                        <thead>
                            <tr>
                                <th scope="col">"ID"</th>
                                <th scope="col">"Kind"</th>
                                <th scope="col" class="num">"Rating"</th>
                                <th scope="col">"Version"</th>
                                <th scope="col">"By"</th>
                                <th scope="col">"Comment"</th>
                                <th scope="col">"When"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {d.feedback
                                .into_iter()
                                .map(|f| view! {
                                    <tr>
                                        <td><code>{f.id}</code></td>
                                        <td>{f.kind}</td>
                                        <td class="num">{format!("{}/5", f.rating)}</td>
                                        <td>{format!("v{}", f.version)}</td>
                                        <td>{f.author.unwrap_or_default()}</td>
                                        <td>{f.comment.unwrap_or_default()}</td>
                                        <td>{when(&f.at)}</td>
                                    </tr>
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
            {feedback_pager}
            {d.can_review.then(|| {
                let skill = skill.clone();
                view! {
                    <h3>"Add reviewer feedback"</h3>
                    <ActionForm action=feedback attr:class="form">
                        <CsrfField />
                        <input type="hidden" name="skill" value=skill />
                        <label for="fb-rating">"Rating"</label>
                        <select id="fb-rating" name="rating">
                            <option value="1">"1"</option>
                            <option value="2">"2"</option>
                            <option value="3" selected>"3"</option>
                            <option value="4">"4"</option>
                            <option value="5">"5"</option>
                        </select>
                        <fieldset>
                            <legend>"Kind"</legend>
                            <label>
                                <input type="radio" name="kind" value="general" checked />
                                " General feedback"
                            </label>
                            <label>
                                <input type="radio" name="kind" value="requirement" />
                                " Explicit requirement (candidates must show it is fulfilled)"
                            </label>
                        </fieldset>
                        <label for="fb-comment">"Feedback"</label>
                        <textarea id="fb-comment" name="comment" required rows="3"></textarea>
                        <button type="submit">"Add feedback"</button>
                    </ActionForm>
                }
            })}
        </section>
        <section aria-labelledby="skill-candidates">
            <h2 id="skill-candidates">"Candidates"</h2>
            // Where the upload's redirect lands (`#skill-candidates`).
            {notice}
            {if d.candidates.is_empty() && !d.candidates_paged {
                view! { <p class="muted">"No candidates for this skill."</p> }.into_any()
            } else {
                candidate_table(d.candidates).into_any()
            }}
            {candidates_pager}
            {d.can_review.then(|| view! {
                <h3>"Propose from a file"</h3>
                <p class="muted">
                    "Upload an Agent Skills SKILL.md, or a zip of the skill's folder: SKILL.md, references/<name>.md (they replace the skill's resources) and, optionally, a WikiSkill provenance.json with base_version, note, sources and evidence. At most 2 MiB. Another reviewer decides the candidate."
                </p>
                // A plain multipart form post, with or without JavaScript: the server
                // answers with a redirect back here and the outcome above.
                <form
                    method="post"
                    action=format!("/console/skills/{}/bundle", encode(&skill))
                    enctype="multipart/form-data"
                    class="form"
                >
                    <CsrfField />
                    <label for="up-bundle">"SKILL.md or zip bundle"</label>
                    <input
                        id="up-bundle"
                        type="file"
                        name="bundle"
                        accept=".md,.zip,text/markdown,application/zip"
                        required
                    />
                    <button type="submit">"Upload and propose"</button>
                </form>
                <h3>"Or paste a SKILL.md"</h3>
                <ActionForm action=upload attr:class="form">
                    <CsrfField />
                    <input type="hidden" name="skill" value=skill.clone() />
                    <label for="up-skill-md">"SKILL.md"</label>
                    <textarea id="up-skill-md" name="skill_md" required rows="10"></textarea>
                    <label for="up-provenance">"provenance.json (optional)"</label>
                    <textarea id="up-provenance" name="provenance" rows="6"></textarea>
                    <button type="submit">"Propose candidate"</button>
                </ActionForm>
            })}
        </section>
    }
}
