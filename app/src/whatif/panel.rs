//! The "What would change" panel and the buttons that fill it. A button sits beside a save
//! button and replays that form's change instead of saving it; the panel shows the last
//! replay. Both need JavaScript: the buttons stay hidden without it, and the save buttons
//! work as before.

use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_router::components::A;

use super::api::{FlipGroup, WINDOWS, WhatIfView};
use crate::components::ErrorNotice;
use crate::components::catalog::inline_code;
use crate::limits::api::WhatIfLimits;

/// One editor's replays: the action its buttons dispatch and the window they replay.
#[derive(Clone, Copy)]
pub struct WhatIf {
    action: ServerAction<WhatIfLimits>,
    window: RwSignal<String>,
    /// Set once the page is hydrated: only then can a button read its form.
    enhanced: RwSignal<bool>,
}

impl WhatIf {
    pub fn new() -> Self {
        let enhanced = RwSignal::new(false);
        Effect::new(move || enhanced.set(true));
        Self {
            action: ServerAction::new(),
            window: RwSignal::new(WINDOWS[0].0.to_owned()),
            enhanced,
        }
    }

    /// A button that replays its form's change (`add`, `value` or `remove`) rather than
    /// saving it. `label` names the change for screen readers.
    pub fn button(self, change: &'static str, label: String) -> impl IntoView {
        let text = match change {
            "remove" => "What if removed",
            _ => "What would change",
        };
        view! {
            <button
                type="button"
                class="secondary what-if"
                hidden=move || !self.enhanced.get()
                aria-label=label
                on:click=move |ev| self.replay(&ev, change)
            >
                {text}
            </button>
        }
    }

    /// Reads the clicked button's form as the save function would, and replays it.
    fn replay(self, ev: &leptos::ev::MouseEvent, change: &'static str) {
        use leptos::form::FromFormData as _;
        use leptos::wasm_bindgen::JsCast as _;
        let form = ev
            .target()
            .and_then(|t| t.dyn_into::<leptos::web_sys::Element>().ok())
            .and_then(|e| e.closest("form").ok().flatten())
            .and_then(|f| f.dyn_into::<leptos::web_sys::HtmlFormElement>().ok());
        let Some(data) = form.and_then(|f| leptos::web_sys::FormData::new_with_form(&f).ok())
        else {
            return;
        };
        match WhatIfLimits::from_form_data(&data) {
            Ok(mut args) => {
                args.change = Some(change.to_owned());
                args.window = Some(self.window.get_untracked());
                self.action.dispatch(args);
            }
            Err(e) => leptos::logging::warn!("the form could not be read for a replay: {e}"),
        }
    }

    /// The panel: the window, and what the last replay found.
    pub fn panel(self) -> impl IntoView {
        let action = self.action;
        let window = self.window;
        view! {
            <section
                class="card what-if-panel"
                aria-labelledby="what-if-heading"
                hidden=move || !self.enhanced.get()
            >
                <h3 id="what-if-heading">"What would change"</h3>
                <p class="help">
                    "Press “What would change” beside a change to replay the audited calls against it before you save. Nothing is saved; the replay itself is audited."
                </p>
                <label for="what-if-window">"Replay"</label>
                <select
                    id="what-if-window"
                    on:change=move |ev| window.set(event_target_value(&ev))
                >
                    {WINDOWS
                        .iter()
                        .map(|(value, words)| view! { <option value=*value>{*words}</option> })
                        .collect_view()}
                </select>
                <div id="what-if-result" aria-live="polite">
                    {move || {
                        if action.pending().get() {
                            return view! {
                                <p class="muted" role="status">"Replaying the audited calls…"</p>
                            }
                                .into_any();
                        }
                        match action.value().get() {
                            None => ().into_any(),
                            Some(Ok(view)) => report(view).into_any(),
                            Some(Err(e)) => view! { <ErrorNotice error=e /> }.into_any(),
                        }
                    }}
                </div>
            </section>
        }
    }
}

impl Default for WhatIf {
    fn default() -> Self {
        Self::new()
    }
}

fn report(view: WhatIfView) -> impl IntoView {
    if let Some(nothing) = view.nothing {
        return view! { <p class="muted" id="what-if-summary">{nothing}</p> }.into_any();
    }
    let flipped = view.flipped();
    let summary = format!(
        "{} decision{} in {} session{} of {} decided again: {}.",
        view.decided,
        plural(view.decided),
        view.sessions,
        plural(view.sessions),
        view.window,
        match flipped {
            0 => "none would change".to_owned(),
            1 => "1 would change".to_owned(),
            n => format!("{n} would change"),
        }
    );
    let caveats = [
        (view.undecidable > 0).then(|| {
            format!(
                "{} decision{} the log cannot settle (a sensitive argument, or a prerequisite that ran only in the replay).",
                view.undecidable,
                plural(view.undecidable)
            )
        }),
        (view.skipped > 0).then(|| {
            format!(
                "{} audited call{} could not be decided again.",
                view.skipped,
                plural(view.skipped)
            )
        }),
    ];
    let tone = if flipped > 0 {
        "notice warning"
    } else {
        "notice ok"
    };
    view! {
        <p id="what-if-summary" class=tone>
            {summary}
        </p>
        {caveats
            .into_iter()
            .flatten()
            .map(|c| view! { <p class="muted">{c}</p> })
            .collect_view()}
        <ul class="what-if-groups" aria-label="Calls that would change">
            {view.groups.into_iter().map(group).collect_view()}
        </ul>
    }
    .into_any()
}

fn group(g: FlipGroup) -> impl IntoView {
    let heading = format!(
        "{} → {}: {} by key {}{}",
        g.before,
        g.after,
        g.subject,
        g.key,
        g.role
            .map(|r| format!(" under role {r}"))
            .unwrap_or_default()
    );
    let more = g.count.saturating_sub(g.calls.len());
    view! {
        <li class="what-if-group">
            <p>
                <strong>{heading}</strong>
                {format!(" ({} call{})", g.count, plural(g.count))}
            </p>
            {g.rule.map(|rule| view! { <p class="muted">"Rule: " {inline_code(&rule)}</p> })}
            <ul class="inline-list">
                {g
                    .calls
                    .into_iter()
                    .map(|(session, seq)| {
                        let href = format!("/sessions/{session}#event-{seq}");
                        view! {
                            <li>
                                <A href=href>{format!("{session} · event {seq}")}</A>
                            </li>
                        }
                    })
                    .collect_view()}
                {(more > 0).then(|| view! { <li class="muted">{format!("and {more} more")}</li> })}
            </ul>
        </li>
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
