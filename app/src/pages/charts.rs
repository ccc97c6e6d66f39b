//! The dashboard's compliance figures as small SVG bar charts rendered on the server.

use leptos::prelude::*;

use super::ErrorNotice;
use crate::compliance_api::{Bucket, compliance_overview};

const HEIGHT: f64 = 80.0;
const GROUP: f64 = 24.0;

/// Sessions, denials and violations per bucket, three bars side by side.
fn bar_chart(title: &'static str, buckets: Vec<Bucket>, label_from: usize) -> impl IntoView {
    let max = buckets
        .iter()
        .map(|b| b.sessions.max(b.denials).max(b.violations))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let width = GROUP * buckets.len() as f64;
    let total: (u64, u64, u64) = buckets.iter().fold((0, 0, 0), |t, b| {
        (t.0 + b.sessions, t.1 + b.denials, t.2 + b.violations)
    });
    let summary = format!(
        "{title}: {} sessions, {} denials, {} violations",
        total.0, total.1, total.2
    );
    let bars = buckets
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let x = i as f64 * GROUP;
            let bar = |offset: f64, value: u64, class: &'static str| {
                let h = value as f64 / max * HEIGHT;
                view! {
                    <rect class=class x=x + offset y=HEIGHT - h width="6" height=h>
                        <title>{format!("{}: {value}", b.label)}</title>
                    </rect>
                }
            };
            let label = b.label.get(label_from..).unwrap_or(&b.label).to_owned();
            view! {
                <g>
                    {bar(2.0, b.sessions, "bar-sessions")}
                    {bar(8.0, b.denials, "bar-denials")}
                    {bar(14.0, b.violations, "bar-violations")}
                    <text x=x + 2.0 y=HEIGHT + 11.0>{label}</text>
                </g>
            }
        })
        .collect_view();
    let label = summary.clone();
    view! {
        <section class="card">
            <h2>{title}</h2>
            <svg class="chart" viewBox=format!("0 0 {width} {}", HEIGHT + 14.0) role="img" aria-label=label>
                <title>{summary}</title>
                {bars}
            </svg>
        </section>
    }
}

fn top_list(title: &'static str, rows: Vec<(String, u64)>) -> impl IntoView {
    view! {
        <section class="card">
            <h2>{title}</h2>
            {if rows.is_empty() {
                view! { <p class="muted">"None in the last 7 days."</p> }.into_any()
            } else {
                view! {
                    <ol>
                        {rows.into_iter().map(|(name, n)| view! { <li><code>{name}</code> " " <span class="muted">{format!("× {n}")}</span></li> }).collect_view()}
                    </ol>
                }.into_any()
            }}
        </section>
    }
}

/// The compliance section of the dashboard.
#[component]
pub fn ComplianceCharts() -> impl IntoView {
    let data = Resource::new(|| (), |_| compliance_overview());
    view! {
        <h2>"Compliance"</h2>
        <p class="legend">
            <span><span class="swatch" style="background:#9db4ee"></span>"sessions"</span>
            <span><span class="swatch" style="background:#e98b82"></span>"denials"</span>
            <span><span class="swatch" style="background:#b42318"></span>"violations"</span>
            <a href="/sessions">"All sessions"</a>
        </p>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(o) => view! {
                        <div class="detail-grid">
                            {bar_chart("Last 24 hours (UTC hour)", o.last_24h, 11)}
                            {bar_chart("Last 7 days", o.last_7d, 5)}
                            {top_list("Top denied tools (7 days)", o.top_denied_tools)}
                            {top_list("Top violated rules (7 days)", o.top_violated_rules)}
                        </div>
                    }.into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}
