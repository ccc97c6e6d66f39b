#!/usr/bin/env bash
# Runs the end-to-end suite against the build `make site` made: starts `skillgate serve` on a free
# loopback port with a fresh SQLite file, reads the one-time admin password it prints,
# adds a viewer and a reviewer through the CLI, then drives Chromium with JavaScript on and off.
# SKILLGATE_BIN names another server binary (e.g. target/release/skillgate after `make build`),
# SKILLGATE_SITE_ROOT another site (the Makefile's, under CARGO_TARGET_DIR when that is set).
# Extra arguments select spec files (default: all of tests/).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(realpath -m "${SKILLGATE_BIN:-$root/target/debug/skillgate}")"
site="$(realpath -m "${SKILLGATE_SITE_ROOT:-$root/target/site}")"
[[ -x "$bin" && -d "$site/pkg" ]] || { echo "run 'make site' first: $bin or $site/pkg is missing" >&2; exit 1; }

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
log="$work/server.log"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  # A spec stopped by its time limit cannot stop the server it started (own_server.js); its
  # files are under $work (TMPDIR below), so whatever still runs from there goes too.
  pkill -f -- "$work/" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

db="sqlite://$work/e2e.db"
"$bin" serve --bind "127.0.0.1:$port" --database-url "$db" --site-root "$site" --demo >"$log" 2>"$work/server.err" &
server_pid=$!

for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then cat "$work/server.err" >&2; exit 1; fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null

admin_password="$(sed -n 's/^  password: //p' "$log" | head -n1)"
[[ -n "$admin_password" ]] || { echo "the server did not print an admin password" >&2; cat "$log" >&2; exit 1; }

viewer_password="viewer-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
printf '%s\n' "$viewer_password" | "$bin" user add viewer --role viewer --database-url "$db" >/dev/null
reviewer_password="reviewer-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
printf '%s\n' "$reviewer_password" | "$bin" user add reviewer --role reviewer --database-url "$db" >/dev/null

mkdir -p "$root/target/e2e-screenshots"
export SKILLGATE_URL="http://127.0.0.1:$port"
export SKILLGATE_ADMIN_PASSWORD="$admin_password"
export SKILLGATE_VIEWER_PASSWORD="$viewer_password"
export SKILLGATE_REVIEWER_PASSWORD="$reviewer_password"
export SKILLGATE_DATABASE_URL="$db"
export SKILLGATE_BIN="$bin"
export SKILLGATE_SITE_ROOT="$site"
export SKILLGATE_SCREENSHOTS="$root/target/e2e-screenshots"
export SKILLGATE_OAUTH_PYTHON="$root/target/e2e-venv/bin/python"
# The specs' own servers and browsers keep their files here, so cleanup finds them.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
cd "$root/end2end"
# A test past its time limit fails, named, instead of hanging the suite.
node --test --test-concurrency=1 --test-timeout="${E2E_TEST_TIMEOUT_MS:-180000}" "${@:-tests/}"
