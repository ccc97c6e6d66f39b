//! The benchmark tool the demo upstream serves with `--bench-tools`: `bench_payload`
//! answers a text of the size asked for, so a benchmark can weigh what the size of a
//! result costs a gateway, and takes an `amount` a cumulative cap can count, so the same
//! tool can be measured with and without limits. It touches no books.

use serde_json::json;
use skillgate_core::model::ToolSpec;

use super::args::Args;
use super::error::ToolError;

pub const BENCH_PAYLOAD: &str = "bench_payload";

/// The largest payload it answers: a benchmark's figure, not a way to exhaust memory.
const MAX_BYTES: i64 = 4 * 1024 * 1024;

pub fn specs() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: BENCH_PAYLOAD.to_owned(),
        description: "Benchmark tool: answers an order listing of exactly `bytes` bytes of \
                      text. `amount` is counted by cumulative caps and otherwise ignored."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES,
                          "description": "The size of the answer's text, in bytes."},
                "amount": {"type": "number", "exclusiveMinimum": 0,
                           "description": "An amount in USD (two decimals at most) for \
                                           cumulative caps to add up."},
            },
            "required": ["bytes"],
            "additionalProperties": false,
        }),
        output_schema: None,
        annotations: None,
        sensitive_args: Vec::new(),
    }]
}

/// The answer's text: order lines, each different, cut to exactly `bytes` bytes (ASCII).
pub fn payload(args: &Args<'_>) -> Result<String, ToolError> {
    let bytes = args.int_in("bytes", 1, MAX_BYTES)?;
    if args.has("amount") {
        args.money("amount")?;
    }
    let bytes = usize::try_from(bytes).unwrap_or(0);
    Ok(skillgate_core::demo::bench::order_lines(bytes))
}
