#!/usr/bin/env bash
# Verification at scale (BENCHMARKS.md, "Verification at scale"): on a database seeded with
# `skillgate-dev seed-audit --events 10000000`, append one 200-event session, sign a
# checkpoint, append 10,000 more events, then time the whole walk, the walk since the
# checkpoint, and the console's timeline of the 200-event session.
#   DB=sqlite:///tmp/v10m/audit.db docs/bench/verify_scale.sh
#   DB=postgres://postgres@127.0.0.1:PORT/bench10m docs/bench/verify_scale.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/skillgate}
DEV=${DEV:-target/release/skillgate-dev}
DB=${DB:?the seeded database URL}
PORT=${PORT:-3997}
WORK=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
PID=""
# One key across runs: a checkpoint another key signed would be reported as forged.
KEY=${KEY:-/tmp/skillgate-bench-audit-signing.key}

audit() { "$BIN" audit --database-url "$DB" --audit-signing-key "$KEY" "$@"; }
timed() { local label=$1; shift; /usr/bin/time -f "$label: %e s wall, %U s user, %S s sys, %M KB peak" "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; exit 1; }; grep -v sqlx "$WORK/err"; head -2 "$WORK/out"; }

"$DEV" seed-audit --database-url "$DB" --events 200 --per-session 400 --concurrent 1 --days 1 --seed 11 >/dev/null
"$BIN" audit --database-url "$DB" --audit-signing-key "$KEY" public-key >/dev/null
audit checkpoint
"$DEV" seed-audit --database-url "$DB" --events 10000 --days 1 --seed 12 >/dev/null

for run in 1 2; do timed "whole walk $run" "$BIN" audit --database-url "$DB" --audit-signing-key "$KEY" verify; done
for run in 1 2 3; do
  timed "since the checkpoint $run" "$BIN" audit --database-url "$DB" --audit-signing-key "$KEY" verify --since-checkpoint
done

"$BIN" serve --bind "127.0.0.1:$PORT" --database-url "$DB" --audit-signing-key "$KEY" \
  --site-root target/site >"$WORK/serve.log" 2>"$WORK/serve.err" &
PID=$!
for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
PW=$(sed -n 's/^  password: //p' "$WORK/serve.log" | head -n1)
[[ -n "$PW" ]] || { echo "no admin password printed (the database already has users)" >&2; exit 1; }
JAR="$WORK/cookies"
TOKEN=$(curl -s -c "$JAR" "http://127.0.0.1:$PORT/login" | grep -o 'name="csrf_token"[^>]*value="[^"]*"' | sed 's/.*value="//;s/"$//')
curl -s -b "$JAR" -c "$JAR" -o /dev/null -H "origin: http://127.0.0.1:$PORT" -H 'sec-fetch-site: same-origin' \
  --data-urlencode "name=admin" --data-urlencode "password=$PW" --data-urlencode "csrf_token=$TOKEN" \
  "http://127.0.0.1:$PORT/login"
# The session seed 11 appended: the newest one with 200 events.
NEWEST_LONG="SELECT session_id FROM audit_session_summaries WHERE events >= 200 ORDER BY first_seq DESC LIMIT 1"
case "$DB" in
  sqlite://*) LONG=$(python3 -c "import sqlite3,sys;print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])" "${DB#sqlite://}" "$NEWEST_LONG") ;;
  *) LONG=$(psql "$DB" -Atc "$NEWEST_LONG") ;;
esac
for u in "/sessions/$LONG" "/sessions"; do
  times=()
  for _ in 1 2 3 4 5 6 7; do
    times+=("$(curl -s -b "$JAR" -o "$WORK/page.html" -w '%{time_total}' "http://127.0.0.1:$PORT$u")")
  done
  events=$(grep -o 'class="event ' "$WORK/page.html" | wc -l || true)
  python3 -c "import sys,statistics;t=[float(x)*1000 for x in sys.argv[3:][1:]];print(f'{sys.argv[1]} ({sys.argv[2]} events shown): median {statistics.median(t):.1f} ms, min {min(t):.1f}, max {max(t):.1f} (6 after one warm-up)')" "$u" "$events" "${times[@]}"
done
