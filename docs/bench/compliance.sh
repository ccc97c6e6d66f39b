#!/usr/bin/env bash
# Compliance measurements on the seeded 1M-event database.
set -euo pipefail
BIN=${BIN:-target/release/skillgate}
DB=${DB:-sqlite:///tmp/compliance-1m.db}
PORT=3998
cd "$(dirname "$0")/../.."
$BIN serve --bind 127.0.0.1:$PORT --database-url $DB --site-root target/site >/tmp/bench-serve.log 2>/tmp/bench-serve.err &
PID=$!
trap 'kill $PID' EXIT
for i in $(seq 1 100); do curl -fsS http://127.0.0.1:$PORT/healthz >/dev/null 2>&1 && break; sleep 0.1; done
PW=${ADMIN_PASSWORD:?the admin password printed by the first serve of the file}
# The sign-in form carries a form token, and the console checks where the post came from.
TOKEN=$(curl -s -c /tmp/bench-cj "http://127.0.0.1:$PORT/login" | grep -o 'name="csrf_token"[^>]*value="[^"]*"' | sed 's/.*value="//;s/"$//')
curl -s -b /tmp/bench-cj -c /tmp/bench-cj -o /dev/null -H "origin: http://127.0.0.1:$PORT" -H 'sec-fetch-site: same-origin' \
  --data-urlencode "name=admin" --data-urlencode "password=$PW" --data-urlencode "csrf_token=$TOKEN" \
  "http://127.0.0.1:$PORT/login"
LONG=$(python3 -c "import sqlite3;print(sqlite3.connect('${DB#sqlite://}').execute('select session_id from audit_session_summaries order by events desc limit 1').fetchone()[0])")
CURSOR=$(curl -s -b /tmp/bench-cj "http://127.0.0.1:$PORT/sessions" | grep -o 'before=[0-9]*' | head -1)
echo "pid $PID long session $LONG cursor $CURSOR"
for u in "/sessions" "/sessions?$CURSOR" "/sessions?outcome=violation&key=support-bot" "/sessions?q=refund&tool=issue_refund&from=2026-11-20" "/sessions?scope=ops&role=billing-admin&outcome=error" "/sessions?q=no-such-text" "/sessions/$LONG" "/"; do
  times=()
  for i in 1 2 3 4 5 6; do
    t=$(curl -s -b /tmp/bench-cj -o /tmp/bench-page.html -w "%{time_total}" "http://127.0.0.1:$PORT$u")
    times+=("$t")
  done
  code=$(curl -s -b /tmp/bench-cj -o /dev/null -w "%{http_code}" "http://127.0.0.1:$PORT$u")
  python3 -c "import sys,statistics;t=[float(x)*1000 for x in sys.argv[2:][1:]];print(f'{sys.argv[1]} | {statistics.median(t):.1f} ms median | {min(t):.1f} min | {max(t):.1f} max | http $code')" "$u" "${times[@]}"
done
grep VmHWM /proc/$PID/status
/usr/bin/time -f "%e s elapsed" curl -s -b /tmp/bench-cj -o /tmp/bench-export.jsonl -w "export jsonl: %{time_total} s, %{size_download} bytes\n" "http://127.0.0.1:$PORT/console/export/sessions.jsonl"
grep VmHWM /proc/$PID/status
wc -l /tmp/bench-export.jsonl
curl -s -b /tmp/bench-cj -o /dev/null -w "export csv: %{time_total} s, %{size_download} bytes\n" "http://127.0.0.1:$PORT/console/export/sessions.csv"
curl -s -b /tmp/bench-cj -o /dev/null -w "export filtered (outcome=violation) jsonl: %{time_total} s, %{size_download} bytes\n" "http://127.0.0.1:$PORT/console/export/sessions.jsonl?outcome=violation"
grep VmHWM /proc/$PID/status
curl -s -b /tmp/bench-cj -o /dev/null -w "full verification page: %{time_total} s\n" "http://127.0.0.1:$PORT/audit?run=1"
