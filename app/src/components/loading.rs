//! The states every page shows while its data or its code is on the way, and when it failed.

use leptos::prelude::*;

use crate::shared::ConsoleError;

/// What a page shows while a server function answers: the fallback of every `Suspense`.
#[component]
pub fn Loading(
    /// What is on the way, when "Loading…" would not say it.
    #[prop(optional)]
    label: Option<&'static str>,
) -> impl IntoView {
    view! { <p class="muted loading">{label.unwrap_or("Loading…")}</p> }
}

/// How a page shows a failed server function: a clear sentence, styled as an alert.
#[component]
pub fn ErrorNotice(error: ConsoleError) -> impl IntoView {
    let heading = match &error {
        ConsoleError::Forbidden { .. } => "Not allowed",
        ConsoleError::Unauthorized => "Signed out",
        _ => "Could not load this page",
    };
    // `error-panel` tells a page that failed to load from a finding it reports (a broken
    // hash chain is an alert too): the browser suite fails on the first, never the second.
    view! {
        <div class="notice error error-panel" role="alert">
            <strong>{heading}</strong>
            <p>{error.to_string()}</p>
        </div>
    }
}

/// A bar at the top of the window while the router fetches the next page: its code (each
/// page is a lazily loaded chunk) and its data. Without it a click shows the old page, as
/// if nothing happened, until the new one is ready.
#[component]
pub fn RoutingProgress(routing: ReadSignal<bool>) -> impl IntoView {
    view! {
        <div
            class="routing-progress"
            role="progressbar"
            aria-label="Loading page"
            hidden=move || !routing.get()
        ></div>
    }
}
