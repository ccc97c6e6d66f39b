//! The dashboard's compliance figures as small SVG bar charts rendered on the server.

use leptos::prelude::*;

use crate::compliance::api::{Bucket, compliance_overview};
use crate::components::{ErrorNotice, Loading};

// Every chart has the same coordinate space whatever its bucket count, so its text renders
// at one size: a viewBox as wide as its buckets made the 24-hour chart's labels tiny and
// stretched the 7-day chart's into each other.
const WIDTH: f64 = 320.0;
const PLOT_TOP: f64 = 12.0;
const PLOT_HEIGHT: f64 = 84.0;
const LEFT: f64 = 26.0;
const AXIS: f64 = 16.0;

/// Sessions, denials and violations per bucket, three bars side by side, with the largest
/// value on the y axis and every `label_every`th bucket named on the x axis.
fn bar_chart(
    title: &'static str,
    empty: &'static str,
    buckets: Vec<Bucket>,
    label_from: usize,
    label_every: usize,
) -> impl IntoView {
    let total: (u64, u64, u64) = buckets.iter().fold((0, 0, 0), |t, b| {
        (t.0 + b.sessions, t.1 + b.denials, t.2 + b.violations)
    });
    if total == (0, 0, 0) {
        return view! {
            <section class="card">
                <h2>{title}</h2>
                <p class="muted chart-empty">{empty}</p>
            </section>
        }
        .into_any();
    }
    let max = buckets
        .iter()
        .map(|b| b.sessions.max(b.denials).max(b.violations))
        .max()
        .unwrap_or(0)
        .max(1);
    let group = (WIDTH - LEFT) / buckets.len().max(1) as f64;
    let bar_width = group * 0.24;
    let baseline = PLOT_TOP + PLOT_HEIGHT;
    let summary = format!(
        "{title}: {} sessions, {} denials, {} violations",
        total.0, total.1, total.2
    );
    let bars = buckets
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let x = LEFT + i as f64 * group;
            let bar = |slot: f64, value: u64, class: &'static str| {
                let h = value as f64 / max as f64 * PLOT_HEIGHT;
                view! {
                    <rect
                        class=class
                        x=x + group * (0.1 + 0.27 * slot)
                        y=baseline - h
                        width=bar_width
                        height=h
                    >
                        <title>{format!("{}: {value}", b.label)}</title>
                    </rect>
                }
            };
            let label = (i % label_every.max(1) == 0).then(|| {
                let text = b.label.get(label_from..).unwrap_or(&b.label).to_owned();
                view! {
                    <text class="x-label" x=x + group / 2.0 y=baseline + 12.0 text-anchor="middle">
                        {text}
                    </text>
                }
            });
            view! {
                <g>
                    {bar(0.0, b.sessions, "bar-sessions")}
                    {bar(1.0, b.denials, "bar-denials")}
                    {bar(2.0, b.violations, "bar-violations")}
                    {label}
                </g>
            }
        })
        .collect_view();
    let label = summary.clone();
    view! {
        <section class="card">
            <h2>{title}</h2>
            <svg
                class="chart"
                viewBox=format!("0 0 {WIDTH} {}", baseline + AXIS)
                role="img"
                aria-label=label
            >
                <title>{summary}</title>
                <line class="axis" x1=LEFT y1=PLOT_TOP x2=WIDTH y2=PLOT_TOP />
                <line class="axis" x1=LEFT y1=baseline x2=WIDTH y2=baseline />
                <text class="y-label" x=LEFT - 4.0 y=PLOT_TOP + 4.0 text-anchor="end">
                    {max.to_string()}
                </text>
                <text class="y-label" x=LEFT - 4.0 y=baseline text-anchor="end">
                    "0"
                </text>
                {bars}
            </svg>
        </section>
    }
    .into_any()
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
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(o) => view! {
                        <div class="detail-grid">
                            {bar_chart(
                                "Last 24 hours (UTC hour)",
                                "No sessions in the last 24 hours.",
                                o.last_24h,
                                11,
                                3,
                            )}
                            {bar_chart(
                                "Last 7 days",
                                "No sessions in the last 7 days.",
                                o.last_7d,
                                5,
                                1,
                            )}
                            {top_list("Top denied tools (7 days)", o.top_denied_tools)}
                            {top_list("Top violated rules (7 days)", o.top_violated_rules)}
                            {top_list("Content findings (7 days)", o.findings)}
                        </div>
                    }.into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    fn buckets(n: usize, sessions: u64) -> Vec<Bucket> {
        (0..n)
            .map(|i| Bucket {
                label: format!("2026-12-01T{i:02}"),
                sessions,
                denials: 0,
                violations: 0,
            })
            .collect()
    }

    fn html(view: impl IntoView) -> String {
        let owner = Owner::new();
        owner.with(|| view.into_view().to_html())
    }

    #[test]
    fn both_charts_share_one_coordinate_space_so_their_labels_render_alike() {
        let day = html(bar_chart("24h", "none", buckets(24, 3), 11, 3));
        let week = html(bar_chart("7d", "none", buckets(7, 3), 5, 1));
        let view_box = |svg: &str| {
            let start = svg.find("viewBox=\"").expect("a viewBox") + 9;
            svg[start..start + svg[start..].find('"').unwrap()].to_owned()
        };
        assert_eq!(view_box(&day), view_box(&week));
        assert_eq!(
            day.matches("class=\"x-label\"").count(),
            8,
            "every third hour"
        );
        assert_eq!(week.matches("class=\"x-label\"").count(), 7, "every day");
    }

    #[test]
    fn a_chart_with_nothing_to_show_says_so_instead_of_drawing_empty_axes() {
        let empty = html(bar_chart(
            "24h",
            "No sessions in the last 24 hours.",
            buckets(24, 0),
            11,
            3,
        ));
        assert!(
            empty.contains("No sessions in the last 24 hours."),
            "{empty}"
        );
        assert!(!empty.contains("<svg"), "{empty}");
    }
}
