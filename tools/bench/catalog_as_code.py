#!/usr/bin/env python3
"""Catalog as code, timed on this machine: export, apply to an empty database, the no-op
re-apply (the same-run baseline), and for `serve --catalog` the time from saving the file
to the server reporting it applied. For the demo catalog and a synthetic one of N tools.

Usage: tools/bench/catalog_as_code.py SKILLGATE_BIN [TOOLS] [ROUNDS]
(the synthetic catalog comes from `skillgate-dev seed-catalog`, the binary beside SKILLGATE_BIN)
"""
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.path.abspath(sys.argv[1])
DEV_BIN = os.path.join(os.path.dirname(BIN), "skillgate-dev")
TOOLS = sys.argv[2] if len(sys.argv) > 2 else "1000"
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5


def run(*args, binary=BIN):
    start = time.monotonic()
    subprocess.run([binary, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def median_of(rounds, fn):
    return statistics.median(fn() for _ in range(rounds))


def served_latency(file, edit_from, edit_to, work):
    """Median milliseconds from writing an edit of `file` to the server's `Applied` line."""
    text = open(file).read()
    assert edit_from in text, edit_from
    served = os.path.join(work, "served.yaml")
    open(served, "w").write(text)
    db = f"sqlite://{work}/served.db"
    server = subprocess.Popen(
        [BIN, "--database-url", db, "serve", "--catalog", served, "--bind", "127.0.0.1:0",
         "--site-root", work],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put((time.monotonic(), l)) for l in server.stdout],
                     daemon=True).start()
    try:
        while "listening" not in lines.get(timeout=60)[1]:
            pass
        took = []
        for i in range(ROUNDS):
            start = time.monotonic()
            open(served, "w").write(text.replace(edit_from, f"{edit_to} {i}."))
            while True:
                at, line = lines.get(timeout=60)
                if line.startswith("Applied"):
                    took.append(at - start)
                    break
        return statistics.median(took) * 1000
    finally:
        server.terminate()
        server.wait()


def measure(name, source_db, edit_from, edit_to, work):
    file = os.path.join(work, f"{name}.yaml")
    export = median_of(ROUNDS, lambda: run("--database-url", source_db, "catalog", "export",
                                           "--output", file))
    size = os.path.getsize(file)
    fresh = iter(range(ROUNDS))
    to_empty = median_of(ROUNDS, lambda: run(
        "--database-url", f"sqlite://{work}/{name}-empty-{next(fresh)}.db",
        "catalog", "apply", file))
    again = median_of(ROUNDS, lambda: run("--database-url", f"sqlite://{work}/{name}-empty-0.db",
                                          "catalog", "apply", file))
    latency = served_latency(file, edit_from, edit_to, work)
    print(f"| {name} | {size:,} | {export * 1000:.0f} | {to_empty * 1000:.0f} | "
          f"{again * 1000:.0f} | {to_empty / again:.2f} | {latency:.0f} |")


def main():
    with tempfile.TemporaryDirectory() as work:
        demo = f"sqlite://{work}/demo.db"
        seed = subprocess.Popen([BIN, "--database-url", demo, "serve", "--demo", "--bind",
                                 "127.0.0.1:0", "--site-root", work],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in seed.stdout:
            if "listening" in line:
                break
        seed.terminate()
        seed.wait()
        big = f"sqlite://{work}/big.db"
        run("seed-catalog", "--database-url", big, "--tools", TOOLS, binary=DEV_BIN)
        print(f"catalog as code, {BIN}, median of {ROUNDS} (ms; ratio: apply to an empty "
              "database over the no-op re-apply of the same file)")
        print("| catalog | file bytes | export | apply to empty | re-apply (no changes) | ratio "
              "| serve --catalog: save to applied |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        measure("demo", demo, "description: Customer-facing support agents.",
                "description: Edit", work)
        measure(f"synthetic-{TOOLS}", big,
                "description: Synthetic role 0 with one skill and one limit.",
                "description: Edit", work)


if __name__ == "__main__":
    main()
