#!/usr/bin/env bash
# A local Skillgate cluster to try: a PostgreSQL server in a temporary directory, three
# replicas of the server on it and HAProxy in front, serving the console and /mcp on one
# address. `make cluster` builds what it needs and runs this; docs/operations.md, "Running
# several replicas on PostgreSQL", walks through it.
#
#   scripts/cluster.sh           start everything, print the addresses, serve until Ctrl-C
#   scripts/cluster.sh --check   start everything, check the balancer spreads requests over
#                                every replica, stop, exit 0 (or 1 saying what failed)
#
# Environment (all optional):
#   SKILLGATE_BIN        the server binary (target/debug/skillgate, what `make server` builds)
#   SKILLGATE_SITE_ROOT  the console assets (target/site, what `make site` builds)
#   SKILLGATE_PG_BIN     the PostgreSQL binaries (default: the newest /usr/lib/postgresql/*/bin)
#   CLUSTER_PG_PORT      PostgreSQL's port on 127.0.0.1 (5433: Debian's own cluster has 5432)
#   CLUSTER_PORT         the balancer's port (3000); the replicas take the next ones (3001…)
#   CLUSTER_REPLICAS     how many replicas (3)
#   CLUSTER_KEEP=1       keep the temporary directory (logs, data) after the cluster stopped
#
# Nothing outlives the script: on exit, Ctrl-C or SIGTERM it stops the replicas (SIGTERM,
# so each signs its final audit checkpoint), HAProxy and PostgreSQL, and removes the
# temporary directory.
set -euo pipefail

usage() { sed -n '2,22s/^# \{0,1\}//p' "$0"; }

check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  -h | --help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(realpath -m "${SKILLGATE_BIN:-$root/target/debug/skillgate}")"
site_root="$(realpath -m "${SKILLGATE_SITE_ROOT:-$root/target/site}")"
host=127.0.0.1
pg_port="${CLUSTER_PG_PORT:-5433}"
lb_port="${CLUSTER_PORT:-3000}"
replicas="${CLUSTER_REPLICAS:-3}"
public="http://$host:$lb_port"

say() { printf '%s\n' "$*"; }
fail() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

# --- What it needs -----------------------------------------------------------------------

if [[ -n "${SKILLGATE_PG_BIN:-}" ]]; then
  pg_bin="$SKILLGATE_PG_BIN"
else
  pg_bin="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
fi
for tool in initdb pg_ctl pg_isready createdb; do
  [[ -x "$pg_bin/$tool" ]] \
    || fail "no PostgreSQL binaries (${pg_bin:-/usr/lib/postgresql/*/bin}/$tool): run 'make deps-postgres'"
done
haproxy="$(command -v haproxy || echo /usr/sbin/haproxy)"
[[ -x "$haproxy" ]] || fail "no haproxy: run 'make deps-postgres'"
command -v curl >/dev/null || fail "no curl: run 'make deps-e2e'"
[[ -x "$bin" ]] || fail "$bin is missing: run 'make cluster' (or 'make server')"
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || fail "CLUSTER_REPLICAS must be a positive number"
if [[ ! -d "$site_root/pkg" ]]; then
  say "note: $site_root has no console assets ('make site' builds them): pages will not hydrate" >&2
fi

# Whether something listens on 127.0.0.1:$1.
listening() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

replica_ports=()
for ((i = 1; i <= replicas; i++)); do replica_ports+=("$((lb_port + i))"); done
for port in "$pg_port" "$lb_port" "${replica_ports[@]}"; do
  listening "$port" && fail "port $port on $host is in use (see CLUSTER_PG_PORT and CLUSTER_PORT)"
done

# initdb refuses to run as root: as root, PostgreSQL runs as the `postgres` user.
as_postgres() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# --- Teardown ----------------------------------------------------------------------------

umask 077
# As root in /tmp: the postgres user must reach its directory, which a private $TMPDIR
# would not let it.
if [[ $EUID -eq 0 ]]; then tmp=/tmp; else tmp="${TMPDIR:-/tmp}"; fi
work="$(mktemp -d "$tmp/skillgate-cluster.XXXXXX")"
pg_dir="$work/postgres"
replica_pids=()
haproxy_pid=""
pg_started=0

cleanup() {
  local status=$?
  set +e
  trap - EXIT INT TERM
  for pid in "${replica_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  # Each replica signs its final checkpoint and exits; give them 15 s.
  for _ in $(seq 1 150); do
    local alive=0
    for pid in "${replica_pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${replica_pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  if [[ -n "$haproxy_pid" ]]; then kill -TERM "$haproxy_pid" 2>/dev/null; fi
  wait 2>/dev/null
  if ((pg_started)); then
    (cd "$pg_dir" && as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w -t 30 stop >/dev/null)
  fi
  if [[ "${CLUSTER_KEEP:-0}" == 1 ]]; then
    say "kept $work (logs: replica-*.log, haproxy.log, postgres/postgres.log)" >&2
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- PostgreSQL --------------------------------------------------------------------------

mkdir -p "$pg_dir"
if [[ $EUID -eq 0 ]]; then
  chmod 0711 "$work" # the postgres user reaches its own directory, and reads nothing else
  chown postgres:postgres "$pg_dir"
fi
say "Starting PostgreSQL on $host:$pg_port ($pg_dir)"
(cd "$pg_dir" && as_postgres "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U postgres \
  -E UTF8 --locale=C >"$pg_dir/initdb.log" 2>&1) \
  || { cat "$pg_dir/initdb.log" >&2; fail "initdb failed"; }
pg_started=1
(cd "$pg_dir" && as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/postgres.log" -w -t 30 \
  -o "-p $pg_port -k $pg_dir -c listen_addresses=$host -c max_connections=200" start >/dev/null) \
  || { cat "$pg_dir/postgres.log" >&2; fail "PostgreSQL did not start"; }
"$pg_bin/createdb" -h "$host" -p "$pg_port" -U postgres skillgate
database_url="postgres://postgres@$host:$pg_port/skillgate"

# --- The replicas ------------------------------------------------------------------------

# Every replica: the same database, the same audit signing key (a checkpoint one replica
# signs must verify with the key of the others) and the balancer's address as the public
# one (the OAuth issuer, and the origin the console's pages post from).
start_replica() {
  local n=$1
  shift
  local port="${replica_ports[n - 1]}"
  "$bin" serve \
    --bind "$host:$port" \
    --database-url "$database_url" \
    --site-root "$site_root" \
    --public-url "$public" \
    --public-origin "$public" \
    --audit-signing-key "$work/audit-signing.key" \
    "$@" >"$work/replica-$n.out" 2>"$work/replica-$n.log" &
  replica_pids+=("$!")
}

# Waits up to 3 minutes for replica $1's /healthz (the first start migrates the database).
wait_healthy() {
  local n=$1 port="${replica_ports[$1 - 1]}" pid="${replica_pids[$1 - 1]}"
  for _ in $(seq 1 1800); do
    curl -fsS -o /dev/null "http://$host:$port/healthz" 2>/dev/null && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$work/replica-$n.log" >&2
      fail "replica $n exited before it was healthy (its log is above)"
    fi
    sleep 0.1
  done
  tail -n 30 "$work/replica-$n.log" >&2
  fail "replica $n was not healthy on $host:$port within 3 minutes"
}

cd "$root"
# The first replica migrates the database, creates the console's admin and seeds the demo
# catalog; the others start once it is healthy, on a database that has all that already.
say "Starting replica 1 on $host:${replica_ports[0]} (migrations, the admin user, the demo catalog)"
start_replica 1 --demo
wait_healthy 1
for ((n = 2; n <= replicas; n++)); do
  say "Starting replica $n on $host:${replica_ports[n - 1]}"
  start_replica "$n"
done
for ((n = 2; n <= replicas; n++)); do wait_healthy "$n"; done

# --- HAProxy -----------------------------------------------------------------------------

{
  cat <<EOF
global
    log stderr format raw local0 info
    maxconn 4096

defaults
    mode http
    # The replicas see the balancer's address; this tells them the client's. It also keeps
    # /metrics, which answers only unproxied loopback requests, off the balancer: scrape
    # each replica directly.
    option forwardfor
    # A replica that refuses the connection (stopped, not yet seen down by the health
    # checks): try another. Only connection failures are retried, so no request runs twice.
    retries 2
    option redispatch 1
    timeout connect 5s
    timeout http-request 30s
    timeout http-keep-alive 60s
    # Streamed MCP responses (SSE) may stay open, quiet, for a long time.
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h

frontend skillgate
    bind $host:$lb_port
    log global
    option httplog
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /healthz
    http-check send hdr Host $host:$lb_port
    http-check expect status 200
    default-server check inter 2s fall 2 rise 1
EOF
  for ((n = 1; n <= replicas; n++)); do
    printf '    server replica-%d %s:%s\n' "$n" "$host" "${replica_ports[n - 1]}"
  done
  cat <<EOF

# The statistics page (CSV at /;csv), on a socket in the temporary directory only.
listen stats
    bind unix@$work/haproxy-stats.sock
    stats enable
    stats uri /
EOF
} >"$work/haproxy.cfg"

"$haproxy" -c -q -f "$work/haproxy.cfg" || fail "HAProxy refused $work/haproxy.cfg"
say "Starting HAProxy on $host:$lb_port"
"$haproxy" -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
haproxy_pid=$!

# The statistics of the replicas' backend, one `name,column…` line per replica.
replica_stats() {
  curl -fsS --unix-socket "$work/haproxy-stats.sock" "http://haproxy/;csv" 2>/dev/null \
    | awk -F, -v cols="$1" '
        NR == 1 { sub(/^# /, ""); for (i = 1; i <= NF; i++) at[$i] = i; n = split(cols, want, " "); next }
        $1 == "replicas" && $2 ~ /^replica-/ {
          line = $2; for (i = 1; i <= n; i++) line = line "," $(at[want[i]]); print line
        }'
}

# Until HAProxy's health checks see every replica up (30 s).
up=0
for _ in $(seq 1 300); do
  up="$(replica_stats status | grep -c ',UP$' || true)"
  ((up == replicas)) && break
  kill -0 "$haproxy_pid" 2>/dev/null || { cat "$work/haproxy.log" >&2; fail "HAProxy exited"; }
  sleep 0.1
done
((up == replicas)) || { replica_stats status >&2; fail "HAProxy sees $up of $replicas replicas up"; }

# The first replica's one-time output: the admin's password and the demo key. The key's
# client configuration names the replica it was created on; point it at the balancer.
first_mcp="http://$host:${replica_ports[0]}/mcp"
say ""
grep -v '^Skillgate is listening on' "$work/replica-1.out" \
  | sed "s#\"url\": \"$first_mcp\"#\"url\": \"$public/mcp\"#" || true

# --- Check mode --------------------------------------------------------------------------

if ((check)); then
  rounds=$((replicas * 3))
  for ((i = 0; i < rounds; i++)); do
    curl -fsS -o /dev/null "$public/healthz" || fail "GET $public/healthz failed"
  done
  body="$(curl -fsS "$public/healthz")" || fail "GET $public/healthz failed"
  [[ "$body" == *'"status":"ok"'* ]] || fail "GET $public/healthz answered $body"
  # /mcp is the gateway's, through the balancer: without a key it is 401.
  mcp_status="$(curl -s -o /dev/null -w '%{http_code}' -X POST \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$public/mcp")"
  [[ "$mcp_status" == 401 ]] || fail "POST $public/mcp without a key answered $mcp_status, not 401"
  # Every replica answered some of those requests (HAProxy's per-server totals).
  while IFS=, read -r name sessions responses_2xx; do
    say "  $name: $sessions requests, $responses_2xx answered 2xx"
    ((sessions > 0 && responses_2xx > 0)) || fail "$name served no request through the balancer"
  done < <(replica_stats "stot hrsp_2xx")
  served="$(replica_stats stot | wc -l)"
  ((served == replicas)) || fail "HAProxy lists $served replicas, not $replicas"
  say "cluster check passed: $replicas replicas on $database_url behind $public"
  exit 0
fi

# --- Serve until Ctrl-C ------------------------------------------------------------------

say ""
say "Skillgate cluster:"
say "  console and MCP   $public  (MCP endpoint $public/mcp)"
for ((n = 1; n <= replicas; n++)); do
  say "  replica $n         http://$host:${replica_ports[n - 1]}  (log $work/replica-$n.log)"
done
say "  PostgreSQL        $database_url  (log $pg_dir/postgres.log)"
say "  HAProxy           $work/haproxy.cfg  (log $work/haproxy.log)"
say "Ctrl-C stops everything and removes $work."

# Until Ctrl-C or HAProxy exits. A replica that exits is reported and HAProxy routes around
# it; when none is left, the cluster stops.
live=("${replica_pids[@]}")
while true; do
  set +e
  wait -n "${live[@]}" "$haproxy_pid"
  set -e
  kill -0 "$haproxy_pid" 2>/dev/null || fail "HAProxy exited: $(tail -n 5 "$work/haproxy.log")"
  live=()
  for ((n = 1; n <= replicas; n++)); do
    pid="${replica_pids[n - 1]}"
    if kill -0 "$pid" 2>/dev/null; then
      live+=("$pid")
    elif [[ ! -e "$work/replica-$n.gone" ]]; then
      : >"$work/replica-$n.gone"
      say "replica $n exited (log $work/replica-$n.log); HAProxy routes around it" >&2
    fi
  done
  ((${#live[@]} > 0)) || fail "every replica exited; stopping the cluster"
done
