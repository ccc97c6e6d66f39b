//! The text of the demo upstream's benchmark tool (`bench_payload`, `demo-upstream
//! --bench-tools`), here so that the inspectors' benchmark reads the very answer
//! `make bench-peers` sends through the gateway.

use std::fmt::Write as _;

/// Order lines, each different (nothing downstream can fold them into one), cut to exactly
/// `bytes` bytes; ASCII.
pub fn order_lines(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 96);
    let mut line = 0u32;
    while text.len() < bytes {
        let _ = writeln!(
            text,
            "O-{:06}  2026-{:02}-{:02}  {:<9}  {} items  {}.{:02} USD  customer C-{:04}",
            100_000 + line,
            1 + line % 12,
            1 + line % 28,
            ["shipped", "delivered", "returned", "pending"][(line % 4) as usize],
            1 + line % 7,
            10 + (line * 37) % 990,
            (line * 13) % 100,
            1000 + line % 9000,
        );
        line += 1;
    }
    text.truncate(bytes);
    text
}
