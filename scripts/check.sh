#!/usr/bin/env bash
# `make check`: what to run before every commit. The fmt check, clippy with -D warnings,
# and the Rust tests (on SQLite, under nextest) of the crates the change touched and of the
# workspace crates that depend on them. `make test` runs everything before a push.
#
# The change is the working tree against HEAD (staged, unstaged and new files); on a clean
# tree, the last commit. CHECK_BASE=<rev> compares with another revision instead.
set -euo pipefail
cd "$(dirname "$0")/.."

phase() { printf '\n== %s (%s s so far)\n' "$1" "$SECONDS"; }

changed="$(git diff --name-only "${CHECK_BASE:-HEAD}"; git ls-files --others --exclude-standard)"
if [[ -z "$changed" && -z "${CHECK_BASE:-}" ]]; then
  echo "check: a clean tree; checking the last commit"
  changed="$(git diff --name-only HEAD~1 HEAD)"
fi

# The workspace packages the changed files belong to, and every workspace package that
# depends on one of them (a core change can break the server's tests). Files of the whole
# build (Cargo.toml, Cargo.lock, .cargo/, .config/) select every package; the SQL
# migrations belong to the core, which embeds them.
packages="$(cargo metadata --no-deps --format-version 1 | CHANGED="$changed" python3 -c '
import json, os, sys
meta = json.load(sys.stdin)
root = meta["workspace_root"]
dirs = {p["name"]: os.path.relpath(os.path.dirname(p["manifest_path"]), root) for p in meta["packages"]}
deps = {p["name"]: {d["name"] for d in p["dependencies"] if d.get("path")} for p in meta["packages"]}
touched = set()
for path in filter(None, os.environ["CHANGED"].split("\n")):
    if path in ("Cargo.toml", "Cargo.lock") or path.startswith((".cargo/", ".config/")):
        touched |= set(dirs)
    elif path.startswith("migrations/"):
        touched.add("skillgate-core")
    else:
        touched |= {name for name, d in dirs.items() if path.startswith(d + "/")}
grew = True
while grew:
    grown = {name for name, uses in deps.items() if uses & touched}
    grew = not grown <= touched
    touched |= grown
print(" ".join(sorted(touched)))
')"

phase "fmt"
cargo fmt --all --check

phase "clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
if [[ " $packages " == *" skillgate-app "* ]]; then
  cargo clippy -p skillgate-app --lib --target wasm32-unknown-unknown --no-default-features \
    --features hydrate --quiet -- -D warnings
fi

if [[ -z "$packages" ]]; then
  phase "tests"
  echo "check: no Rust crate changed; no Rust tests to run (make test runs the other suites)"
else
  phase "tests of ${packages// /, }"
  # --workspace with a filter, not -p: building a subset of the workspace unifies features
  # differently and rebuilds the core for it.
  filter="$(printf 'package(%s) | ' $packages)"
  # The tests' own build, which makes the PostgreSQL runner too.
  cargo build --quiet --workspace --tests
  "${CARGO_TARGET_DIR:-target}/debug/skillgate-testpg" -- cargo nextest run --cargo-quiet --workspace -E "${filter% | }"
fi
phase "check passed"
