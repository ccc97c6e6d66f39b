//! The gateway's own account of where a governed call's time went, for `dev load`: its
//! `/metrics` page is read before and after the measured window, and the difference of
//! each phase's histogram sum and count gives that phase's mean over the window.

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

/// The snapshot key of a `_sum` or `_count` series and whether it is the sum; `None` for
/// every other line.
fn series_key(series: &str) -> Option<(String, bool)> {
    let (name, labels) = match series.split_once('{') {
        Some((name, labels)) => (name, Some(labels)),
        None => (series, None),
    };
    let (base, is_sum) = if let Some(base) = name.strip_suffix("_sum") {
        (base, true)
    } else {
        (name.strip_suffix("_count")?, false)
    };
    match (base, labels) {
        (PHASE_SERIES, Some(labels)) => {
            let phase = labels.strip_prefix("phase=\"")?.strip_suffix("\"}")?;
            Some((phase.to_owned(), is_sum))
        }
        (REQUEST_SERIES, None) => Some(("request".to_owned(), is_sum)),
        _ => None,
    }
}

/// Sums and counts of the timing histograms, by series key (`phase` label or `request`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    totals: BTreeMap<String, (f64, f64)>,
}

impl Snapshot {
    /// Parses the `_sum` and `_count` lines of the exposition text.
    pub fn parse(text: &str) -> Self {
        let mut totals: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let Some((key, is_sum)) = series_key(series) else {
                continue;
            };
            let entry = totals.entry(key).or_default();
            if is_sum {
                entry.0 = value;
            } else {
                entry.1 = value;
            }
        }
        Self { totals }
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

    fn get(&self, key: &str) -> (f64, f64) {
        self.totals.get(key).copied().unwrap_or_default()
    }
}

/// One row: how often a phase ran in the window and its mean time.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub phase: &'static str,
    pub label: &'static str,
    pub count: f64,
    pub mean_ms: f64,
}

/// The window between two snapshots.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    pub rows: Vec<Row>,
    /// Requests admitted in the window, and their mean time after the key check.
    pub requests: f64,
    pub request_mean_ms: f64,
    /// Mean request time per request not spent in any timed phase inside it: rmcp's
    /// HTTP and JSON-RPC handling, argument parsing, serialising the answer.
    pub rest_ms: f64,
}

fn mean_ms(sum: f64, count: f64) -> f64 {
    if count > 0.0 { sum / count * 1e3 } else { 0.0 }
}

impl Breakdown {
    pub fn between(before: &Snapshot, after: &Snapshot) -> Self {
        let delta = |key: &str| {
            let (sum0, count0) = before.get(key);
            let (sum1, count1) = after.get(key);
            (sum1 - sum0, count1 - count0)
        };
        let rows: Vec<Row> = PHASES
            .iter()
            .map(|(phase, label)| {
                let (sum, count) = delta(phase);
                Row {
                    phase,
                    label,
                    count,
                    mean_ms: mean_ms(sum, count),
                }
            })
            .collect();
        let (request_sum, requests) = delta("request");
        // The key check runs before the request timer starts; every other phase inside it.
        let inside: f64 = PHASES
            .iter()
            .filter(|(phase, _)| *phase != "auth")
            .map(|(phase, _)| delta(phase).0)
            .sum();
        Self {
            rows,
            requests,
            request_mean_ms: mean_ms(request_sum, requests),
            rest_ms: mean_ms(request_sum - inside, requests),
        }
    }

    pub fn to_json(&self) -> Value {
        let phases: serde_json::Map<String, Value> = self
            .rows
            .iter()
            .map(|row| {
                (
                    row.phase.to_owned(),
                    json!({"count": row.count, "mean_ms": (row.mean_ms * 1e3).round() / 1e3}),
                )
            })
            .collect();
        json!({
            "phases": phases,
            "requests": self.requests,
            "request_mean_ms": (self.request_mean_ms * 1e3).round() / 1e3,
            "rest_ms": (self.rest_ms * 1e3).round() / 1e3,
        })
    }

    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "\nWhere a governed call's time goes, as the gateway measures it (means over the measured window):\n\n\
             | phase | count | mean ms |\n| --- | ---: | ---: |\n",
        );
        for row in &self.rows {
            out.push_str(&format!(
                "| {} (`{}`) | {:.0} | {:.3} |\n",
                row.label, row.phase, row.count, row.mean_ms
            ));
        }
        out.push_str(&format!(
            "| rest of the request: rmcp, JSON, HTTP (per request) | {:.0} | {:.3} |\n\
             | whole request after the key check | {:.0} | {:.3} |\n",
            self.requests, self.rest_ms, self.requests, self.request_mean_ms
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
            garbage\n\
            skillgate_call_phase_seconds_sum{phase=\"decide\"} 0.25\n";
        let snapshot = Snapshot::parse(text);
        assert_eq!(snapshot.get("decide"), (0.25, 0.0));
        assert_eq!(snapshot.totals.len(), 1);
    }
}
