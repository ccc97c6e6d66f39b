//! The gateway's own account of where a governed call's time went, for `skillgate-dev load`: its
//! `/metrics` page is read before and after the measured window, and the difference of
//! each phase's histogram (sum, count, buckets) gives that phase's mean and p99 over the
//! window.

use std::collections::BTreeMap;

use anyhow::Context as _;
use serde_json::{Value, json};

/// Phases in the order a call passes through them, with the words the table uses.
const PHASES: [(&str, &str); 7] = [
    ("auth", "agent key check"),
    ("session", "session lookup and read"),
    ("decide", "policy decision"),
    ("reserve", "usage reservation"),
    ("audit_decision", "durable decision event"),
    ("upstream", "upstream round trip"),
    ("audit_result", "durable result event"),
];

const PHASE_SERIES: &str = "skillgate_call_phase_seconds";
const REQUEST_SERIES: &str = "skillgate_admitted_request_seconds";

/// Which line of a histogram a series is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Sum,
    Count,
    /// A cumulative bucket with this upper bound (`+Inf` for the last).
    Bucket(f64),
}

/// The snapshot key (`phase` label, or `request`) and part of a timing series; `None` for
/// every other line.
fn series_key(series: &str) -> Option<(String, Part)> {
    let (name, labels) = match series.split_once('{') {
        Some((name, labels)) => (name, labels.strip_suffix('}')?),
        None => (series, ""),
    };
    let mut phase = None;
    let mut le = None;
    for pair in labels.split(',').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=')?;
        let value = value.strip_prefix('"')?.strip_suffix('"')?;
        match key {
            "phase" => phase = Some(value),
            "le" => le = Some(value),
            _ => return None,
        }
    }
    let (base, part) = if let Some(base) = name.strip_suffix("_sum") {
        (base, Part::Sum)
    } else if let Some(base) = name.strip_suffix("_count") {
        (base, Part::Count)
    } else {
        let base = name.strip_suffix("_bucket")?;
        let bound = match le? {
            "+Inf" => f64::INFINITY,
            bound => bound.parse().ok()?,
        };
        (base, Part::Bucket(bound))
    };
    match (base, phase) {
        (PHASE_SERIES, Some(phase)) => Some((phase.to_owned(), part)),
        (REQUEST_SERIES, None) => Some(("request".to_owned(), part)),
        _ => None,
    }
}

/// One histogram as read: sum, count and cumulative buckets in ascending bound order.
#[derive(Debug, Clone, Default, PartialEq)]
struct Histogram {
    sum: f64,
    count: f64,
    buckets: Vec<(f64, f64)>,
}

impl Histogram {
    /// `self - earlier`: the observations made in between.
    fn since(&self, earlier: &Histogram) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .map(|&(bound, cumulative)| {
                let before = earlier
                    .buckets
                    .iter()
                    .find(|(b, _)| *b == bound)
                    .map_or(0.0, |(_, c)| *c);
                (bound, cumulative - before)
            })
            .collect();
        Histogram {
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
            buckets,
        }
    }

    /// The `q` quantile in seconds, interpolated linearly inside its bucket as
    /// Prometheus's `histogram_quantile` does. `Err(bound)` when it lies beyond the last
    /// finite bound; `None` without observations.
    fn quantile(&self, q: f64) -> Option<Result<f64, f64>> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(bound, cumulative) in &self.buckets {
            if cumulative >= rank {
                if bound.is_infinite() {
                    return Some(Err(lower.0));
                }
                let inside = cumulative - lower.1;
                let fraction = if inside > 0.0 {
                    (rank - lower.1) / inside
                } else {
                    1.0
                };
                return Some(Ok(lower.0 + (bound - lower.0) * fraction));
            }
            lower = (bound, cumulative);
        }
        None
    }
}

/// The timing histograms, by series key (`phase` label or `request`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    histograms: BTreeMap<String, Histogram>,
}

impl Snapshot {
    /// Parses the `_sum`, `_count` and `_bucket` lines of the exposition text.
    pub fn parse(text: &str) -> Self {
        let mut histograms: BTreeMap<String, Histogram> = BTreeMap::new();
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let Some((key, part)) = series_key(series) else {
                continue;
            };
            let histogram = histograms.entry(key).or_default();
            match part {
                Part::Sum => histogram.sum = value,
                Part::Count => histogram.count = value,
                Part::Bucket(bound) => histogram.buckets.push((bound, value)),
            }
        }
        Self { histograms }
    }

    /// The gateway's `/metrics`, read over plain HTTP from the same host.
    pub async fn scrape(url: &str) -> anyhow::Result<Self> {
        let text = reqwest::get(url)
            .await
            .and_then(|response| response.error_for_status())
            .with_context(|| format!("reading {url}"))?
            .text()
            .await
            .with_context(|| format!("reading {url}"))?;
        Ok(Self::parse(&text))
    }

    fn get(&self, key: &str) -> Histogram {
        self.histograms.get(key).cloned().unwrap_or_default()
    }
}

/// A p99 read from histogram buckets: interpolated inside its bucket, or beyond the last
/// finite bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimate {
    Ms(f64),
    Above(f64),
    NoData,
}

impl Estimate {
    fn of(histogram: &Histogram, q: f64) -> Self {
        match histogram.quantile(q) {
            Some(Ok(seconds)) => Estimate::Ms(seconds * 1e3),
            Some(Err(bound)) => Estimate::Above(bound * 1e3),
            None => Estimate::NoData,
        }
    }

    fn text(self) -> String {
        match self {
            Estimate::Ms(ms) => format!("{ms:.3}"),
            Estimate::Above(ms) => format!("> {ms:.1}"),
            Estimate::NoData => "–".to_owned(),
        }
    }

    fn to_json(self) -> Value {
        match self {
            Estimate::Ms(ms) => json!((ms * 1e3).round() / 1e3),
            Estimate::Above(ms) => json!(format!("> {ms}")),
            Estimate::NoData => Value::Null,
        }
    }
}

/// One row: how often a phase ran in the window, its mean and its p99.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub phase: &'static str,
    pub label: &'static str,
    pub count: f64,
    pub mean_ms: f64,
    pub p99: Estimate,
}

/// The window between two snapshots.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    pub rows: Vec<Row>,
    /// Requests admitted in the window, and their mean and p99 after the key check.
    pub requests: f64,
    pub request_mean_ms: f64,
    pub request_p99: Estimate,
    /// Mean request time per request not spent in any timed phase inside it: rmcp's
    /// HTTP and JSON-RPC handling, argument parsing, serialising the answer.
    pub rest_ms: f64,
}

fn mean_ms(sum: f64, count: f64) -> f64 {
    if count > 0.0 { sum / count * 1e3 } else { 0.0 }
}

impl Breakdown {
    pub fn between(before: &Snapshot, after: &Snapshot) -> Self {
        let delta = |key: &str| after.get(key).since(&before.get(key));
        let rows: Vec<Row> = PHASES
            .iter()
            .map(|(phase, label)| {
                let window = delta(phase);
                Row {
                    phase,
                    label,
                    count: window.count,
                    mean_ms: mean_ms(window.sum, window.count),
                    p99: Estimate::of(&window, 0.99),
                }
            })
            .collect();
        let request = delta("request");
        // The key check runs before the request timer starts; every other phase inside it.
        let inside: f64 = PHASES
            .iter()
            .filter(|(phase, _)| *phase != "auth")
            .map(|(phase, _)| delta(phase).sum)
            .sum();
        Self {
            rows,
            requests: request.count,
            request_mean_ms: mean_ms(request.sum, request.count),
            request_p99: Estimate::of(&request, 0.99),
            rest_ms: mean_ms(request.sum - inside, request.count),
        }
    }

    pub fn to_json(&self) -> Value {
        let phases: serde_json::Map<String, Value> = self
            .rows
            .iter()
            .map(|row| {
                (
                    row.phase.to_owned(),
                    json!({
                        "count": row.count,
                        "mean_ms": (row.mean_ms * 1e3).round() / 1e3,
                        "p99_ms": row.p99.to_json(),
                    }),
                )
            })
            .collect();
        json!({
            "phases": phases,
            "requests": self.requests,
            "request_mean_ms": (self.request_mean_ms * 1e3).round() / 1e3,
            "request_p99_ms": self.request_p99.to_json(),
            "rest_ms": (self.rest_ms * 1e3).round() / 1e3,
        })
    }

    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "\nWhere a governed call's time goes, as the gateway measures it over the measured \
             window (p99 estimated from histogram buckets, as Prometheus would):\n\n\
             | phase | count | mean ms | p99 ms |\n| --- | ---: | ---: | ---: |\n",
        );
        for row in &self.rows {
            out.push_str(&format!(
                "| {} (`{}`) | {:.0} | {:.3} | {} |\n",
                row.label,
                row.phase,
                row.count,
                row.mean_ms,
                row.p99.text()
            ));
        }
        out.push_str(&format!(
            "| rest of the request: rmcp, JSON, HTTP (per request) | {:.0} | {:.3} | |\n\
             | whole request after the key check | {:.0} | {:.3} | {} |\n",
            self.requests,
            self.rest_ms,
            self.requests,
            self.request_mean_ms,
            self.request_p99.text()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# HELP skillgate_call_phase_seconds x\n\
        skillgate_call_phase_seconds_sum{phase=\"session\"} 0.5\n\
        skillgate_call_phase_seconds_count{phase=\"session\"} 100\n\
        skillgate_call_phase_seconds_bucket{phase=\"session\",le=\"0.001\"} 100\n\
        skillgate_call_phase_seconds_sum{phase=\"upstream\"} 1.0\n\
        skillgate_call_phase_seconds_count{phase=\"upstream\"} 100\n\
        skillgate_admitted_request_seconds_sum 2.0\n\
        skillgate_admitted_request_seconds_count 100\n\
        # EOF\n";
    const AFTER: &str = "skillgate_call_phase_seconds_sum{phase=\"session\"} 0.7\n\
        skillgate_call_phase_seconds_count{phase=\"session\"} 200\n\
        skillgate_call_phase_seconds_sum{phase=\"upstream\"} 1.3\n\
        skillgate_call_phase_seconds_count{phase=\"upstream\"} 200\n\
        skillgate_call_phase_seconds_sum{phase=\"auth\"} 9.0\n\
        skillgate_call_phase_seconds_count{phase=\"auth\"} 100\n\
        skillgate_admitted_request_seconds_sum 2.8\n\
        skillgate_admitted_request_seconds_count 200\n";

    #[test]
    fn the_window_means_come_from_the_differences_of_sums_and_counts() {
        let breakdown = Breakdown::between(&Snapshot::parse(BEFORE), &Snapshot::parse(AFTER));
        let row = |phase: &str| {
            breakdown
                .rows
                .iter()
                .find(|r| r.phase == phase)
                .unwrap()
                .clone()
        };
        assert_eq!(row("session").count, 100.0);
        assert!((row("session").mean_ms - 2.0).abs() < 1e-9);
        assert!((row("upstream").mean_ms - 3.0).abs() < 1e-9);
        // A phase absent before counts from zero.
        assert!((row("auth").mean_ms - 90.0).abs() < 1e-9);
        assert_eq!(row("decide").count, 0.0);
        assert_eq!(row("decide").mean_ms, 0.0);
        assert_eq!(breakdown.requests, 100.0);
        assert!((breakdown.request_mean_ms - 8.0).abs() < 1e-9);
        // 0.8 s of requests, 0.2 + 0.3 s inside timed phases (auth is outside): 3 ms each.
        assert!(
            (breakdown.rest_ms - 3.0).abs() < 1e-9,
            "{}",
            breakdown.rest_ms
        );
    }

    #[test]
    fn lines_of_other_series_and_malformed_lines_are_ignored() {
        let text = "skillgate_call_decisions_total{decision=\"allowed\"} 5\n\
            skillgate_call_phase_seconds_sum{phase=\"decide\"} not-a-number\n\
            skillgate_call_phase_seconds_bucket{phase=\"decide\"} 3\n\
            skillgate_call_phase_seconds_count{phase=\"decide\",tool=\"x\"} 3\n\
            garbage\n\
            skillgate_call_phase_seconds_sum{phase=\"decide\"} 0.25\n";
        let snapshot = Snapshot::parse(text);
        let decide = snapshot.get("decide");
        assert_eq!((decide.sum, decide.count), (0.25, 0.0));
        assert!(decide.buckets.is_empty(), "a bucket needs its `le`");
        assert_eq!(snapshot.histograms.len(), 1);
    }

    /// Buckets as prometheus-client writes them: `le` first, then the family's labels.
    fn buckets(phase: &str, counts: &[(&str, u32)]) -> String {
        counts
            .iter()
            .map(|(le, n)| {
                format!(
                    "skillgate_call_phase_seconds_bucket{{le=\"{le}\",phase=\"{phase}\"}} {n}\n"
                )
            })
            .collect()
    }

    #[test]
    fn the_window_p99_is_interpolated_in_the_bucket_that_holds_it() {
        // Before: 50 fast observations. In the window: 100 more, 90 of them under 1 ms and
        // 10 between 1 and 2 ms, so the 99th of the window's 100 lies 90 % into (1, 2] ms.
        let before = buckets("upstream", &[("0.001", 50), ("0.002", 50), ("+Inf", 50)]);
        let after = buckets("upstream", &[("0.001", 140), ("0.002", 150), ("+Inf", 150)]);
        let breakdown = Breakdown::between(&Snapshot::parse(&before), &Snapshot::parse(&after));
        let upstream = breakdown
            .rows
            .iter()
            .find(|r| r.phase == "upstream")
            .unwrap();
        let Estimate::Ms(p99) = upstream.p99 else {
            panic!("{:?}", upstream.p99)
        };
        assert!((p99 - 1.9).abs() < 1e-9, "{p99}");
        let decide = breakdown.rows.iter().find(|r| r.phase == "decide").unwrap();
        assert_eq!(decide.p99, Estimate::NoData);
    }

    #[test]
    fn a_p99_beyond_the_last_finite_bucket_is_reported_as_above_it() {
        let after = buckets(
            "audit_result",
            &[("0.001", 90), ("0.002", 95), ("+Inf", 100)],
        );
        let breakdown = Breakdown::between(&Snapshot::default(), &Snapshot::parse(&after));
        let row = breakdown
            .rows
            .iter()
            .find(|r| r.phase == "audit_result")
            .unwrap();
        assert_eq!(row.p99, Estimate::Above(2.0));
        assert_eq!(row.p99.text(), "> 2.0");
    }
}
