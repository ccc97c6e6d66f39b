#!/usr/bin/env python3
"""Before/after of a change to the governed call path, in one sitting.

Runs `skillgate-dev load --json` of two builds in alternation (A, B, A, B, ...) at each
session count, so both see the same machine, and prints the median of each figure per
build: gateway CPU per governed call, governed calls/s, the latency the gateway adds at
p50 and p99, and governed/direct throughput.

    python3 tools/bench/ab.py /tmp/before/skillgate-dev target/release/skillgate-dev \
        --sessions 1,32 --rounds 3 --duration 8

Each build is its `skillgate-dev` binary, which runs the `skillgate` binary beside it (copy
both when keeping a build). Each run starts its own demo upstream and gateway on loopback
(see `skillgate-dev load`).
"""

import argparse
import json
import statistics
import subprocess
import sys


def run_once(binary, sessions, duration, warmup):
    out = subprocess.run(
        [
            binary,
            "load",
            "--json",
            "--sessions",
            str(sessions),
            "--duration",
            str(duration),
            "--warmup",
            str(warmup),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    report = json.loads(out)
    governed = report["governed"]
    if governed["errors"] or report["direct"]["errors"]:
        sys.exit(f"{binary}: the run had errors: {out}")
    return {
        "cpu_ms_per_call": 1000.0 * governed["gateway_cpu_s"] / governed["calls"],
        "calls_per_s": governed["calls_per_s"],
        "added_p50_ms": report["gateway_added_p50_ms"],
        "added_p99_ms": report["gateway_added_p99_ms"],
        "governed_over_direct": report["throughput_ratio_governed_over_direct"],
    }


FIGURES = [
    ("cpu_ms_per_call", "gateway CPU per call ms", 3),
    ("calls_per_s", "governed calls/s", 0),
    ("added_p50_ms", "added p50 ms", 2),
    ("added_p99_ms", "added p99 ms", 2),
    ("governed_over_direct", "governed / direct", 3),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="the build before the change")
    parser.add_argument("b", help="the build after the change")
    parser.add_argument("--sessions", default="1,32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--json", help="also write every run's figures to this file")
    args = parser.parse_args()
    counts = [int(n) for n in args.sessions.split(",")]
    runs = {(label, n): [] for label in "AB" for n in counts}
    for round_no in range(1, args.rounds + 1):
        for n in counts:
            for label, binary in (("A", args.a), ("B", args.b)):
                figures = run_once(binary, n, args.duration, args.warmup)
                runs[(label, n)].append(figures)
                print(
                    f"round {round_no} {label} sessions={n}: "
                    + ", ".join(f"{k}={v:.3f}" for k, v in figures.items()),
                    file=sys.stderr,
                    flush=True,
                )
    print(f"A = {args.a}, B = {args.b}; medians of {args.rounds} alternated rounds\n")
    print("| sessions | build | " + " | ".join(title for _, title, _ in FIGURES) + " |")
    print("| ---: | --- |" + " ---: |" * len(FIGURES))
    for n in counts:
        for label in "AB":
            cells = []
            for key, _, digits in FIGURES:
                values = [run[key] for run in runs[(label, n)]]
                spread = f" ({min(values):.{digits}f}–{max(values):.{digits}f})"
                cells.append(f"{statistics.median(values):.{digits}f}{spread}")
            print(f"| {n} | {label} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {f"{label}:{n}": runs[(label, n)] for (label, n) in runs}, out, indent=2
            )


if __name__ == "__main__":
    main()
