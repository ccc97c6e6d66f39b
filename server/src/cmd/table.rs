//! Plain-text output of the one-shot commands: tables and times as a person reads them.

use chrono::{DateTime, Utc};

/// `at` to the minute in UTC, or `none` when there is no time.
pub fn when(at: Option<DateTime<Utc>>, none: &str) -> String {
    at.map_or_else(
        || none.to_owned(),
        |at| at.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// `rows` under `header`, each column as wide as its widest cell.
pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut widths = vec![0usize; header.len()];
    for row in std::iter::once(&header).chain(&rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}
