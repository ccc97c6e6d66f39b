//! The result inspectors on a 2 KB tool result and on three large ones (a JSON listing, 64 KB
//! of plain order lines, and 64 KB of English prose with typography beyond ASCII): what they
//! add to a call's gateway CPU.
//!
//! `serialize` (serde_json of the same result, which the gateway does anyway) is the
//! baseline the inspectors are compared with.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;
use skillgate_core::demo::bench::order_lines;
use skillgate_core::inspect::Inspectors;
use skillgate_core::model::Inspector;

const BOTH: [Inspector; 2] = [Inspector::Secrets, Inspector::Injection];

/// A typical support-desk answer of about 2 KB: prose, ids, a hash, a short JSON record.
fn benign_result() -> CallToolResult {
    let text = "Ticket #48213 (priority: normal) opened by Dana Whitfield <dana.whitfield@example.com>.\n\
        Summary: the billing export for March shows duplicate rows for invoices INV-2291 and INV-2292.\n\
        Steps: open Reports > Billing, choose March, export as CSV; rows 114-118 repeat 119-123.\n\
        Customer id 3f2b8c1e-4a5d-4e6f-9a7b-8c9d0e1f2a3b, account tier Gold since 2021-04-12.\n\
        Last deploy: commit 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12 (release 4.18.2), checksum\n\
        sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.\n\
        Agent notes: reproduced on staging; the export job runs twice when the previous page of\n\
        results is still cached. Workaround: clear the report cache, then export again. Please\n\
        do not share customer exports outside the finance team. Next review on Thursday.\n";
    let mut text = text.repeat(2);
    text.truncate(1500);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({
        "ticket": 48213,
        "status": "open",
        "assignee": "m.okafor",
        "tags": ["billing", "export", "duplicate-rows"],
        "customer": {"id": "3f2b8c1e-4a5d-4e6f-9a7b-8c9d0e1f2a3b", "tier": "gold", "region": "eu-west-1"},
        "updated_at": "2026-11-30T14:02:11Z",
        "next_page_token": "Q2hhcnRlcjpwYWdlOjI",
        "thumbnail": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    }));
    result
}

fn result_with_secret() -> CallToolResult {
    let mut result = benign_result();
    if let Some(ContentBlock::Text(text)) = result.content.first_mut() {
        text.text
            .push_str("\nTemporary deploy credentials: AKIAQ3EGUWB6CMRXNL2T (rotate after use).");
    }
    result
}

/// A page of 440 orders, 55 KB of JSON, as structured content and again as its text.
fn listing_result() -> CallToolResult {
    let statuses = ["shipped", "delivered", "returned", "pending"];
    let orders: Vec<_> = (0..440)
        .map(|i| {
            json!({
                "order_id": format!("O-{}", 100_000 + i),
                "placed": format!("2026-{:02}-{:02}", 1 + i % 12, 1 + i % 28),
                "status": statuses[i % 4],
                "items": 1 + i % 7,
                "total": format!("{}.{:02}", 10 + (i * 37) % 990, (i * 13) % 100),
                "customer_id": format!("C-{}", 1000 + i % 9000),
            })
        })
        .collect();
    let structured = json!({"orders": orders, "next_page_token": "Q2hhcnRlcjpwYWdlOjI"});
    let mut result = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
    result.structured_content = Some(structured);
    result
}

/// About 64 KB of prose: this repository's architecture guide, whose dashes, arrows and
/// quotes are beyond ASCII and which says "ignore" (so the other languages' patterns run).
fn prose_result() -> CallToolResult {
    let guide = include_str!("../../docs/architecture.md");
    let mut end = 64 * 1024;
    while !guide.is_char_boundary(end) {
        end -= 1;
    }
    CallToolResult::success(vec![ContentBlock::text(&guide[..end])])
}

/// 64 KB of plain order lines: the answer of `make bench-peers`'s 64 KB load.
fn order_lines_result() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(order_lines(64 * 1024))])
}

fn inspect_large(c: &mut Criterion) {
    let inspectors = Inspectors::shared();
    for (name, result) in [
        ("json_listing", listing_result()),
        ("order_lines", order_lines_result()),
        ("prose", prose_result()),
    ] {
        let size = serde_json::to_vec(&result).unwrap().len();
        let mut group = c.benchmark_group(format!("inspect_{size}_byte_{name}"));
        group.bench_function("serialize (baseline)", |b| {
            b.iter(|| serde_json::to_vec(black_box(&result)).unwrap())
        });
        group.bench_function("inspect_result (secrets+injection)", |b| {
            b.iter(|| inspectors.inspect_result(black_box(&result), &BOTH))
        });
        group.finish();
    }
}

fn inspect(c: &mut Criterion) {
    let inspectors = Inspectors::shared();
    let benign = benign_result();
    let size = serde_json::to_vec(&benign).unwrap().len();
    assert!(inspectors.inspect_result(&benign, &BOTH).is_empty());
    let mut group = c.benchmark_group(format!("inspect_{size}_byte_result"));
    group.bench_function("serialize (baseline)", |b| {
        b.iter(|| serde_json::to_vec(black_box(&benign)).unwrap())
    });
    group.bench_function("inspect_result benign (secrets+injection)", |b| {
        b.iter(|| inspectors.inspect_result(black_box(&benign), &BOTH))
    });
    let secret = result_with_secret();
    assert_eq!(inspectors.inspect_result(&secret, &BOTH).len(), 1);
    group.bench_function("redact_result one secret (secrets+injection)", |b| {
        b.iter_batched_ref(
            || secret.clone(),
            |result| inspectors.redact_result(black_box(result), &BOTH),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, inspect, inspect_large);
criterion_main!(benches);
