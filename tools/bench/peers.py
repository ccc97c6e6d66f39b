#!/usr/bin/env python3
"""Skillgate beside its peers, on this machine, with one load tool for all.

Three targets answer the same MCP `tools/call` of `lookup_customer` on the same demo
upstream:

  direct        the demo upstream itself (`skillgate demo-upstream --http`)
  skillgate     the Skillgate gateway, governed: `call_tool` in a session that learned
                the role granting the tool, every call audited durably (the default)
  contextforge  IBM ContextForge 1.1.0 with the demo upstream registered as a gateway

and three more loads of the same gateway weigh what a call's shape costs it, with the
demo upstream's benchmark tool `bench_payload` (`demo-upstream --bench-tools`), which
answers as many bytes of text as asked:

  skillgate-1k      a 1 KB answer, in a role that puts no limit on the tool
  skillgate-capped  the same call in a role with a cumulative cap on its `amount` and a
                    step guard (`lookup_customer` first), so every call reads and
                    reserves the session's usage
  skillgate-64k     a 64 KB answer, no limit

Before the rounds it times this disk's durability floor (a 4 KiB append and `fdatasync`),
which a governed call pays twice in series.

`wrk` drives each (keep-alive connections, one fixed JSON-RPC body), at 32 connections
and at 1, alternating targets within each round so that drift of a busy machine spreads
over all of them. The table shows medians over the rounds. Server CPU per call is the
utime+stime the target's processes (the whole process tree for ContextForge's
uvicorn master and workers) used during the run, divided by the calls completed.

Usage: tools/bench/peers.py SKILLGATE_BIN [--duration S] [--rounds N] [--json FILE]
                            [--warmup S] [--contextforge-workers N]
                            [--contextforge-regex-workers N] [--targets direct,skillgate,...]

Python 3 standard library only. ContextForge is installed into target/peers/venv on
first use (needs a Python 3.12 or 3.13 and PyPI); `wrk` from apt when missing.
"""
import argparse
import glob
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV = os.path.join(REPO, "target", "peers", "venv")
CONTEXTFORGE = "mcp-contextforge-gateway==1.1.0"
TOOL = "lookup_customer"
ARGUMENTS = {"customer_id": "C-1001"}
# The demo catalog's role whose skills grant lookup_customer (dev/src/load.rs).
ROLE = "tier-1-support"
SCOPE = "support"
CONNECTIONS = (32, 1)
# The loads of `bench_payload` through the gateway: target name -> (label, role, arguments).
# Both 1 KB loads send the same arguments, so they differ in the role's limits alone.
BENCH_TOOL = "bench_payload"
BENCH_SCOPE = "bench"
BENCH_LOADS = {
    "skillgate-1k": ("Skillgate, 1 KB result, no limit", "bench-open",
                     {"bytes": 1024, "amount": 0.01}),
    "skillgate-capped": ("Skillgate, 1 KB result, cumulative cap and step guard",
                         "bench-capped", {"bytes": 1024, "amount": 0.01}),
    "skillgate-64k": ("Skillgate, 64 KB result, no limit", "bench-open",
                      {"bytes": 65536, "amount": 0.01}),
}
# What the catalog file gains for them (YAML; the tool's definition is added as JSON, as
# the upstream lists it, so its pin is the upstream's).
BENCH_SKILL = """- slug: bench
  description: Benchmark calls.
  instructions: Look up the customer, then call `bench_payload`.
  tools:
  - lookup_customer
  - bench_payload
"""
BENCH_ROLES = """- slug: bench-capped
  title: Bench, capped and guarded
  description: The benchmark tool under a cumulative cap and a step guard.
  instructions: Look up the customer before anything else.
  skills:
  - bench
  limits:
  - kind: sum_cap
    tool: bench_payload
    arg: amount
    max: 1000000000
  - kind: requires
    tool: bench_payload
    after:
    - lookup_customer
- slug: bench-open
  title: Bench, no limit
  description: The benchmark tool, unlimited.
  instructions: Call the tool.
  skills:
  - bench
  limits: []
"""
BENCH_SCOPES = """- slug: bench
  description: Benchmark agents.
  roles:
  - bench-open
  - bench-capped
"""
MCP_HEADERS = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Failure(Exception):
    """A setup step failed; the message says which and why."""


# --- processes ------------------------------------------------------------------------

class Processes:
    """Every process the script starts, each in its own process group, so that stopping
    the group also stops what it forked (uvicorn workers)."""

    def __init__(self):
        self.started = []

    def start(self, cmd, log, *, env=None, cwd=None, wait_for=None, timeout=60):
        """Starts `cmd` with stderr (and stdout, unless waiting on it) to `log`. With
        `wait_for`, waits for a stdout line starting with it and returns the rest."""
        out = open(log, "ab")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if wait_for else out, stderr=out,
                                env=env, cwd=cwd, start_new_session=True)
        self.started.append(proc)
        if not wait_for:
            return proc, None
        found = []
        ready = threading.Event()

        def read():
            # Keep draining stdout for the process's whole life so it never blocks on
            # a full pipe; lines after the one we wait for go to the log.
            for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                if not found and line.startswith(wait_for):
                    found.append(line[len(wait_for):].strip())
                    ready.set()
                out.write(raw)
                out.flush()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(timeout)
        if not found:
            self.stop(proc)
            raise Failure(f"{' '.join(cmd)} did not print {wait_for!r} within {timeout}s; "
                          f"its log is {log}:\n{tail(log)}")
        return proc, found[0]

    def stop(self, proc):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        # Forked children that outlived the leader (a worker) are still in the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop_all(self):
        for proc in reversed(self.started):
            self.stop(proc)
        self.started.clear()
        # Reap the orphans (ContextForge's forked sandbox workers) that came to us as
        # subreaper, so none is left as a zombie.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    time.sleep(0.1)
            except ChildProcessError:
                break


def become_subreaper():
    """Makes orphaned descendants children of this script rather than of PID 1 (which in
    a container may never reap them). Linux only; harmless where unavailable."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_cpu_seconds(root):
    """utime+stime of `root` and all its descendants, plus what reaped children used
    (cutime+cstime), from /proc. Threads are included in their process's numbers."""
    stats = {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue  # exited meanwhile
        # Fields after the command name, which is in parentheses and may hold spaces.
        fields = text.rsplit(")", 1)[1].split()
        pid = int(path.split("/")[2])
        # ppid is field 4 of the line, utime..cstime 14..17: 1 and 11..14 here.
        stats[pid] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
            todo.extend(child for child, (ppid, _) in stats.items() if ppid == pid)
    return total / CLK_TCK


# --- MCP over HTTP with urllib (setup and the checks before each load) -----------------

def post(url, message, headers):
    """POSTs one JSON-RPC message; returns (response headers, the JSON-RPC answer or
    None for a notification). Reads plain JSON and SSE (`data:` lines) alike."""
    request = urllib.request.Request(url, data=json.dumps(message).encode(),
                                     headers={**MCP_HEADERS, **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read().decode()
            got = response.headers
    except urllib.error.HTTPError as e:
        raise Failure(f"POST {url} {message.get('method')}: HTTP {e.code}: "
                      f"{e.read().decode(errors='replace')[:500]}") from None
    if "id" not in message:
        return got, None
    candidates = [body] if body.lstrip().startswith("{") else [
        line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
    for text in candidates:
        try:
            answer = json.loads(text)
        except ValueError:
            continue
        if isinstance(answer, dict) and answer.get("id") == message["id"]:
            return got, answer
    raise Failure(f"POST {url} {message['method']}: no JSON-RPC answer in {body[:500]!r}")


def rpc(method, params, id_=1):
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def call_body(name, arguments):
    return rpc("tools/call", {"name": name, "arguments": arguments})


def handshake(url, headers):
    """The MCP `initialize` handshake; returns the headers later requests need (the
    session id, when the server keeps sessions, and the protocol version)."""
    got, answer = post(url, rpc("initialize", {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "skillgate-bench-peers", "version": "1"}}, 0), headers)
    if "result" not in answer:
        raise Failure(f"initialize at {url} failed: {answer}")
    headers = {**headers, "MCP-Protocol-Version": answer["result"]["protocolVersion"]}
    if got.get("Mcp-Session-Id"):
        headers["Mcp-Session-Id"] = got["Mcp-Session-Id"]
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    return headers


def check_call(target):
    """One call with the load body; a protocol or tool error stops the benchmark rather
    than being measured as a fast answer."""
    _, answer = post(target["url"], json.loads(target["body"]), target["headers"])
    result = answer.get("result")
    if not result or result.get("isError"):
        raise Failure(f"{target['name']}: the call to be loaded fails: {json.dumps(answer)[:800]}")
    return result


# --- targets ---------------------------------------------------------------------------

def start_upstream(procs, skillgate, work):
    proc, url = procs.start([skillgate, "demo-upstream", "--http", "127.0.0.1:0",
                             "--bench-tools"],
                            os.path.join(work, "upstream.log"),
                            wait_for="demo upstream listening on ")
    return proc, url


def direct_target(upstream_proc, upstream_url):
    # The demo upstream keeps MCP sessions: all connections share the one handshake's.
    headers = handshake(upstream_url, {})
    return {"name": "direct", "label": "demo upstream, direct", "url": upstream_url,
            "headers": headers, "body": json.dumps(call_body(TOOL, ARGUMENTS)),
            "pid": upstream_proc.pid,
            "settings": "`skillgate demo-upstream --http`, MCP session per handshake"}


def listed_tool(upstream_url, name):
    """The upstream's own definition of `name`, from `tools/list`."""
    headers = handshake(upstream_url, {})
    _, answer = post(upstream_url, rpc("tools/list", {}, 2), headers)
    for tool in (answer.get("result") or {}).get("tools", []):
        if tool.get("name") == name:
            return tool
    raise Failure(f"the demo upstream does not list {name}: {json.dumps(answer)[:500]}")


def with_bench_entries(text, tool):
    """The exported catalog with the benchmark tool, skill, roles and scope added at the
    end of their lists (each top-level list ends where the next top-level key starts)."""
    entry = (f"- name: {tool['name']}\n  upstream: demo\n"
             f"  description: {json.dumps(tool['description'])}\n"
             f"  input_schema: {json.dumps(tool['inputSchema'])}\n")
    for key, block in (("skills", entry), ("roles", BENCH_SKILL), ("scopes", BENCH_ROLES),
                       ("keys", BENCH_SCOPES)):
        marker = re.compile(rf"^{key}:", re.M)
        if not marker.search(text):
            raise Failure(f"no top-level `{key}:` in the exported catalog")
        text = marker.sub(lambda m: block + m.group(0), text, 1)
    return text


def governed_sessions(url, headers, role, count, first_call=None):
    """`count` governance sessions that learned `role` (and made `first_call` once, when
    given: a step guard's prerequisite); their ids."""
    sessions = []
    for _ in range(count):
        _, init = post(url, call_body("init_skilder", {}), headers)
        session = ((init.get("result") or {}).get("structuredContent") or {}).get("session_id")
        if not session:
            raise Failure(f"init_skilder returned no session: {json.dumps(init)[:800]}")
        _, learned = post(url, call_body("learn", {"path": f"/roles/{role}",
                                                   "session_id": session}), headers)
        if not learned.get("result") or learned["result"].get("isError"):
            raise Failure(f"learn /roles/{role} was refused: {json.dumps(learned)[:800]}")
        if first_call:
            tool, arguments = first_call
            _, called = post(url, call_body("call_tool", {
                "tool": tool, "arguments": arguments, "session_id": session}), headers)
            if not called.get("result") or called["result"].get("isError"):
                raise Failure(f"{tool} was refused: {json.dumps(called)[:800]}")
        sessions.append(session)
    return sessions


def agent_key(skillgate, db, scope):
    out = run([skillgate, "key", "create", "--database-url", db, "--name", f"bench-{scope}",
               "--scope", scope])
    key = re.search(r"\bsgk_\w+", out)
    if not key:
        raise Failure(f"`skillgate key create` printed no key:\n{out}")
    return key.group(0)


def skillgate_targets(procs, skillgate, work, upstream_url, wanted):
    db = f"sqlite://{work}/sg.db"
    site = os.path.join(work, "site")
    os.makedirs(site, exist_ok=True)
    log = os.path.join(work, "skillgate.log")
    # 1. `serve --demo` seeds the demo catalog (its `demo` upstream is stdio); stop it
    #    once it listens.
    seeder, _ = procs.start([skillgate, "serve", "--demo", "--database-url", db,
                             "--bind", "127.0.0.1:0", "--site-root", site], log,
                            wait_for="Skillgate is listening on ")
    procs.stop(seeder)
    # 2. Point the `demo` upstream at the HTTP demo upstream and add the benchmark's
    #    tool, roles and scope, through the catalog file.
    catalog = os.path.join(work, "catalog.yaml")
    run([skillgate, "catalog", "export", "--database-url", db, "--output", catalog])
    with open(catalog) as f:
        text = f.read()
    # The exported entry: `- name: demo` then `transport: stdio`, `command:`, `args:`
    # and its list, up to the next upstream or top-level key.
    entry = re.compile(r"^- name: demo\n  transport: stdio\n(?:  .*\n)*?(?=- |\S)", re.M)
    if not entry.search(text):
        raise Failure(f"no stdio `demo` upstream in the exported catalog {catalog}")
    text = entry.sub(f"- name: demo\n  transport: http\n  url: {upstream_url}\n", text, 1)
    text = with_bench_entries(text, listed_tool(upstream_url, BENCH_TOOL))
    with open(catalog, "w") as f:
        f.write(text)
    run([skillgate, "catalog", "apply", catalog, "--database-url", db])
    # 3. Agent keys: the demo scope whose roles grant lookup_customer, and the bench scope.
    key = agent_key(skillgate, db, SCOPE)
    bench_key = agent_key(skillgate, db, BENCH_SCOPE)
    # 4. The gateway, with the defaults (durable audit of every call).
    proc, base = procs.start([skillgate, "serve", "--database-url", db,
                              "--bind", "127.0.0.1:0", "--site-root", site], log,
                             wait_for="Skillgate is listening on ")
    url = f"{base}/mcp"
    # 5. Governed sessions that learned the role, one per connection: calls of one session
    #    are serialised by design (its usage is decided and reserved in order), so 32
    #    connections in one session would measure that queue, not the gateway.
    settings = ("`skillgate serve` defaults: SQLite, durable hash-chained audit of every "
                "call, agent key (bearer), governed `call_tool`, one session per connection")
    loads = [("skillgate", "Skillgate, governed", key, ROLE, TOOL, ARGUMENTS,
              f"{settings}, each having learned /roles/{ROLE}; no limit in the demo "
              f"catalog on {TOOL}")]
    for name, (label, role, arguments) in BENCH_LOADS.items():
        limits = ("a cumulative cap on `amount` and a step guard (lookup_customer first, "
                  "made once per session before the load)") if role == "bench-capped" \
            else "no limit"
        loads.append((name, label, bench_key, role, BENCH_TOOL, arguments,
                       f"{settings}, each having learned /roles/{role}: {limits}; "
                       f"`{BENCH_TOOL}` {json.dumps(arguments)}"))
    targets = []
    for name, label, key_, role, tool, arguments, about in loads:
        if name not in wanted:
            continue
        headers = {"Authorization": f"Bearer {key_}"}
        first = (TOOL, ARGUMENTS) if role == "bench-capped" else None
        sessions = governed_sessions(url, headers, role, max(CONNECTIONS), first)
        bodies = [json.dumps(call_body("call_tool", {"tool": tool, "arguments": arguments,
                                                     "session_id": session}))
                  for session in sessions]
        targets.append({"name": name, "label": label, "url": url, "headers": headers,
                        "body": bodies[0], "bodies": bodies, "pid": proc.pid,
                        "settings": about})
    return targets


def find_python():
    for name in ("python3.12", "python3.13"):
        found = shutil.which(name)
        if found and subprocess.run([found, "-c", "import venv"],
                                    capture_output=True).returncode == 0:
            return found
    for version in ("3.12", "3.13"):
        for path in sorted(glob.glob(os.path.expanduser(
                f"~/.pyenv/versions/{version}*/bin/python3")), reverse=True):
            return path
    return None


def ensure_contextforge():
    """The venv with ContextForge 1.1.0; created on first use."""
    if os.path.exists(os.path.join(VENV, "bin", "mcpgateway")):
        return VENV
    python = find_python()
    if not python:
        raise Failure("ContextForge needs Python 3.12 or 3.13: none found (python3.12, "
                      "python3.13 on PATH, ~/.pyenv/versions/3.12*|3.13*)")
    print(f"installing {CONTEXTFORGE} into {VENV} with {python}", file=sys.stderr)
    shutil.rmtree(VENV, ignore_errors=True)
    os.makedirs(os.path.dirname(VENV), exist_ok=True)
    run([python, "-m", "venv", VENV])
    run([os.path.join(VENV, "bin", "python"), "-m", "pip", "install", "--quiet", CONTEXTFORGE])
    return VENV


def contextforge_target(procs, work, upstream_url, workers, regex_workers):
    venv = ensure_contextforge()
    home = os.path.join(work, "contextforge")
    os.makedirs(home, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Its secrets are refused when weak or placeholders (what init_secrets generates).
    for name in ("JWT_SECRET_KEY", "AUTH_ENCRYPTION_SECRET", "BASIC_AUTH_PASSWORD",
                 "PLATFORM_ADMIN_PASSWORD", "DEFAULT_USER_PASSWORD"):
        env[name] = secrets.token_urlsafe(32)
    admin = "admin@example.com"
    settings = {
        "DATABASE_URL": f"sqlite:///{home}/contextforge.db",
        "PLATFORM_ADMIN_EMAIL": admin,
        "AUTH_REQUIRED": "true",           # the default: bearer JWT on every request
        "MCP_CLIENT_AUTH_ENABLED": "true",  # the default: JWT on /mcp too
        "SSRF_ALLOW_LOCALHOST": "true",    # the demo upstream is on loopback
        # The default rate limiter caps MCP at 100 requests a minute per client.
        "RATE_LIMITING_ENABLED": "false",
        "LOG_LEVEL": "ERROR",              # the default; no request logging
        "LOG_REQUESTS": "false",
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "true",  # the REST API that registers the upstream
        # Arguments are validated against the tool's JSON Schema in a pool of forked
        # processes when the schema has a regex (the demo's customer_id has a pattern).
        # The pool does not queue: with its default of 2, concurrent calls beyond 2 fail
        # with "schema validation sandbox has no free worker".
        "REGEX_WORKERS": str(regex_workers),
    }
    env.update(settings)
    # The working directory is a fresh one, so no stray `.env` is read.
    proc, _ = procs.start([os.path.join(venv, "bin", "mcpgateway"), "--host", "127.0.0.1",
                           "--port", str(port), "--workers", str(workers)],
                          os.path.join(work, "contextforge.log"), env=env, cwd=home)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise Failure(f"ContextForge exited ({proc.returncode}); its log is "
                          f"{work}/contextforge.log:\n{tail(os.path.join(work, 'contextforge.log'))}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise Failure("ContextForge did not answer /health within 180s")
        time.sleep(0.5)
    # A bearer JWT for the platform admin, made by its own tool (exp and jti required).
    token = run([os.path.join(venv, "bin", "python"), "-m", "mcpgateway.utils.create_jwt_token",
                 "--username", admin, "--exp", "1440", "--secret", env["JWT_SECRET_KEY"]],
                env=env, cwd=home).strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {token}"}
    # Register the demo upstream as a federated MCP server ("gateway").
    request = urllib.request.Request(
        f"{base}/gateways", method="POST",
        data=json.dumps({"name": "demo", "url": upstream_url,
                         "transport": "STREAMABLEHTTP"}).encode(),
        headers={**auth, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            json.load(r)
    except urllib.error.HTTPError as e:
        raise Failure(f"ContextForge refused the gateway: HTTP {e.code}: "
                      f"{e.read().decode(errors='replace')[:500]}") from None
    url = f"{base}/mcp"
    headers = handshake(url, auth)
    _, listed = post(url, rpc("tools/list", {}), headers)
    names = [t["name"] for t in listed.get("result", {}).get("tools", [])]
    # It prefixes the gateway's name and slugifies: `demo-lookup-customer`.
    tool = next((n for n in names if n.replace("_", "-").endswith("lookup-customer")), None)
    if not tool:
        raise Failure(f"ContextForge lists no lookup_customer tool: {names}")
    return {"name": "contextforge", "label": "ContextForge 1.1.0", "url": url,
            "headers": headers, "body": json.dumps(call_body(tool, ARGUMENTS)),
            "pid": proc.pid, "tree": True,
            "settings": f"`mcpgateway` (uvicorn) --workers {workers}, REGEX_WORKERS={regex_workers} "
                        f"(default 2), SQLite, auth on "
                        f"(platform-admin bearer JWT), RATE_LIMITING_ENABLED=false, "
                        f"LOG_LEVEL=ERROR, SSRF_ALLOW_LOCALHOST=true, UI off, other settings "
                        f"default; tool `{tool}`"}


def run(cmd, env=None, cwd=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        raise Failure(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


# --- wrk -------------------------------------------------------------------------------

LUA = r"""
wrk.method = "POST"
%(headers)s
-- Each thread takes its own slice of the bodies (one per connection: for Skillgate, one
-- governance session each) and sends them in turn.
local slices = { %(slices)s }
local threads = {}
function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end
local requests, next_one = {}, 0
function init(args)
  for _, body in ipairs(slices[id]) do table.insert(requests, wrk.format(nil, nil, nil, body)) end
end
function request()
  next_one = next_one %% #requests + 1
  return requests[next_one]
end
-- A 200 answer can still carry a JSON-RPC or tool error: count those too.
-- The first failed answer of each thread is kept, to say what went wrong.
bad = 0
first = ""
function response(status, headers, body)
  local failed = status < 200 or status > 299
  if body:find('"isError"%%s*:%%s*true') or body:find('"error"%%s*:%%s*{') then
    bad = bad + 1
    failed = true
  end
  if failed and first == "" then first = status .. " " .. body:sub(1, 300) end
end
function done(summary, latency, requests)
  local n, seen = 0, ""
  for _, t in ipairs(threads) do
    n = n + (t:get("bad") or 0)
    if seen == "" then seen = t:get("first") or "" end
  end
  io.write(string.format("TOOL_ERRORS %%d\n", n))
  if seen ~= "" then io.write("FIRST_ERROR " .. seen:gsub("\n", " ") .. "\n") end
end
"""


def ensure_wrk():
    if shutil.which("wrk"):
        return
    print("installing wrk (apt-get install -y wrk)", file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "wrk"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not shutil.which("wrk"):
        raise Failure("wrk is missing and `apt-get install -y wrk` did not install it")


def threads_for(connections):
    return 1 if connections == 1 else 2


def lua_script(target, connections, work):
    """The wrk script for `connections` connections: the target's bodies (one, or one per
    connection) dealt to wrk's threads in disjoint slices."""
    path = os.path.join(work, f"{target['name']}-{connections}.lua")
    headers = {**MCP_HEADERS, **target["headers"]}
    lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    bodies = target.get("bodies", [target["body"]])[:connections]
    threads = threads_for(connections)
    slices = [bodies[i::threads] or bodies[:1] for i in range(threads)]
    lua_slices = ", ".join(
        "{ " + ", ".join(f"[==[{b}]==]" for b in slice_) + " }" for slice_ in slices)
    with open(path, "w") as f:
        f.write(LUA % {"slices": lua_slices, "headers": lines})
    return path


def to_ms(value, unit):
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def parse_wrk(out):
    def find(pattern, default=None):
        m = re.search(pattern, out)
        return m if m else default

    calls = int(find(r"(\d+) requests in").group(1))
    rate = float(find(r"Requests/sec:\s+([\d.]+)").group(1))
    p50 = find(r"\s50%\s+([\d.]+)(us|ms|s|m)\b")
    p99 = find(r"\s99%\s+([\d.]+)(us|ms|s|m)\b")
    sock = find(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
    non2xx = find(r"Non-2xx or 3xx responses: (\d+)")
    tool = find(r"TOOL_ERRORS (\d+)")
    first = find(r"FIRST_ERROR (.*)")
    return {
        "calls": calls, "calls_per_s": rate,
        "p50_ms": to_ms(*p50.groups()) if p50 else None,
        "p99_ms": to_ms(*p99.groups()) if p99 else None,
        "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "tool_errors": int(tool.group(1)) if tool else 0,
        "first_error": first.group(1) if first else None,
    }


def load(target, connections, duration, script):
    threads = threads_for(connections)
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "30s",
           "--latency", "-s", script, target["url"]]
    measure = tree_cpu_seconds if target.get("tree") else process_cpu_seconds
    before = measure(target["pid"])
    done = subprocess.run(cmd, capture_output=True, text=True)
    cpu = measure(target["pid"]) - before
    if done.returncode != 0 or "requests in" not in done.stdout:
        raise Failure(f"wrk against {target['name']} failed:\n{done.stdout}{done.stderr}")
    result = parse_wrk(done.stdout)
    result["cpu_s"] = cpu
    result["cpu_us_per_call"] = cpu / result["calls"] * 1e6 if result["calls"] else None
    result["errors"] = result["socket_errors"] + result["non_2xx"] + result["tool_errors"]
    return result


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fsync_floor(directory, count=2000):
    """The disk's cost of durability, next to which a governed call's two durable commits
    stand: a 4 KiB append and `fdatasync`, `count` times, in `directory` (where the
    gateway's database is). Returns (median ms, p99 ms, CPU µs per append+sync)."""
    path = os.path.join(directory, "fsync-probe")
    block = b"\0" * 4096
    times = []
    cpu = time.process_time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    cpu = (time.process_time() - cpu) / count * 1e6
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99)], cpu


# --- report ----------------------------------------------------------------------------

def median(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=0):
    return "n/a" if value is None else f"{value:,.{digits}f}"


def report(targets, results, args):
    med = {t["name"]: {c: {k: median(results[t["name"]][c], k)
                           for k in ("calls_per_s", "p50_ms", "p99_ms", "cpu_us_per_call")}
                       for c in CONNECTIONS} for t in targets}
    print(f"\nMedians of {args.rounds} round(s) of {args.duration:g} s per run "
          f"(wrk, keep-alive; 32 connections on 2 threads, 1 on 1).\n")
    print("| target | 32 conn: calls/s | p50 ms | p99 ms | 1 conn: calls/s | p50 ms | p99 ms "
          "| server CPU µs per call (1 conn / 32) | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in targets:
        m, n = med[t["name"]][32], med[t["name"]][1]
        errors = sum(r["errors"] for c in CONNECTIONS for r in results[t["name"]][c])
        print(f"| {t['label']} | {fmt(m['calls_per_s'])} | {fmt(m['p50_ms'], 2)} | "
              f"{fmt(m['p99_ms'], 2)} | {fmt(n['calls_per_s'])} | {fmt(n['p50_ms'], 2)} | "
              f"{fmt(n['p99_ms'], 2)} | {fmt(n['cpu_us_per_call'])} / "
              f"{fmt(m['cpu_us_per_call'])} | {errors} |")

    def ratio(a, b, key, conns):
        x, y = med.get(a, {}).get(conns, {}).get(key), med.get(b, {}).get(conns, {}).get(key)
        return f"{x / y:.2f}×" if x and y else "n/a"

    pairs = [("skillgate", "direct", "governed / direct"),
             ("skillgate-capped", "skillgate-1k", "capped and guarded / no limit (1 KB)"),
             ("skillgate-64k", "skillgate-1k", "64 KB result / 1 KB result"),
             ("skillgate", "contextforge", "Skillgate / ContextForge")]
    pairs = [p for p in pairs if p[0] in med and p[1] in med]
    if pairs:
        print("\n| ratio | 32 conn: calls/s | p50 | p99 | 1 conn: calls/s | p50 | p99 "
              "| CPU per call (1 / 32) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for a, b, label in pairs:
            cells = [ratio(a, b, k, c) for c in CONNECTIONS
                     for k in ("calls_per_s", "p50_ms", "p99_ms")]
            cpu = f"{ratio(a, b, 'cpu_us_per_call', 1)} / {ratio(a, b, 'cpu_us_per_call', 32)}"
            print(f"| {label} | " + " | ".join(cells) + f" | {cpu} |")
    if args.fsync:
        p50, p99, cpu = args.fsync
        print(f"\nDurability floor of this disk (4 KiB append + fdatasync, 2,000 times, in the "
              f"database's directory): p50 {p50:.3f} ms, p99 {p99:.3f} ms, {cpu:.0f} µs of CPU "
              f"each. A governed call makes two commits in series (`call_allowed` before the "
              f"upstream, `call_result` before the answer).")
    print("\nSettings:\n")
    for t in targets:
        print(f"- {t['label']}: {t['settings']}")
    print(f"- load: wrk --timeout 30s --latency, {args.warmup:g} s warm-up per target; a "
          f"JSON-RPC or tool error in a 200 answer counts as an error")
    if any(r["errors"] for t in targets for c in CONNECTIONS for r in results[t["name"]][c]):
        print("\nWARNING: some runs had errors (see the errors column and --json); their "
              "numbers include failed calls.")


# --- main ------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("skillgate", help="the skillgate binary (target/release/skillgate)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per run (wrk takes whole seconds)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2,
                        help="seconds of unmeasured load per target before the rounds")
    parser.add_argument("--contextforge-workers", type=int, default=1,
                        help="uvicorn worker processes of ContextForge")
    parser.add_argument("--contextforge-regex-workers", type=int, default=16,
                        help="ContextForge's schema-validation sandbox processes per worker "
                             "(REGEX_WORKERS, 1..16; its default 2 fails calls under load)")
    names = ["direct", "skillgate", *BENCH_LOADS, "contextforge"]
    parser.add_argument("--targets", default=",".join(names),
                        help=f"comma-separated subset of {','.join(names)}")
    parser.add_argument("--json", metavar="FILE", help="write the per-round numbers here")
    args = parser.parse_args()
    wanted = args.targets.split(",")
    skillgate = os.path.abspath(args.skillgate)
    if not os.access(skillgate, os.X_OK):
        sys.exit(f"not an executable: {skillgate}")

    # SIGTERM ends the script the way Ctrl-C does, through the `finally` below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    become_subreaper()
    procs = Processes()
    work = tempfile.mkdtemp(prefix="skillgate-peers-")
    try:
        ensure_wrk()
        upstream, upstream_url = start_upstream(procs, skillgate, work)
        targets = []
        if "direct" in wanted:
            targets.append(direct_target(upstream, upstream_url))
        if any(name.startswith("skillgate") for name in wanted):
            targets += skillgate_targets(procs, skillgate, work, upstream_url, wanted)
        if "contextforge" in wanted:
            try:
                targets.append(contextforge_target(procs, work, upstream_url,
                                                   args.contextforge_workers,
                                                   args.contextforge_regex_workers))
            except Failure as e:
                print(f"ContextForge left out: {e}", file=sys.stderr)
        if not targets:
            raise Failure("no target to measure")
        scripts = {}
        for t in targets:
            check_call(t)
            scripts[t["name"]] = {c: lua_script(t, c, work) for c in CONNECTIONS}
            if args.warmup > 0:
                load(t, 32, args.warmup, scripts[t["name"]][32])
        args.fsync = fsync_floor(work)
        results = {t["name"]: {c: [] for c in CONNECTIONS} for t in targets}
        for round_ in range(1, args.rounds + 1):
            for connections in CONNECTIONS:
                for t in targets:
                    check_call(t)
                    r = load(t, connections, args.duration, scripts[t["name"]][connections])
                    r["round"] = round_
                    results[t["name"]][connections].append(r)
                    print(f"round {round_} {t['name']:12} {connections:2} conn: "
                          f"{r['calls_per_s']:9.1f} calls/s  p50 {fmt(r['p50_ms'], 2)} ms  "
                          f"p99 {fmt(r['p99_ms'], 2)} ms  CPU {fmt(r['cpu_us_per_call'])} µs/call"
                          f"  errors {r['errors']}", file=sys.stderr)
                    if r["first_error"]:
                        print(f"  first error: {r['first_error']}", file=sys.stderr)
        report(targets, results, args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"duration_s": args.duration, "rounds": args.rounds,
                       "fsync_ms": {"p50": args.fsync[0], "p99": args.fsync[1]},
                           "targets": {t["name"]: {"label": t["label"],
                                                   "settings": t["settings"],
                                                   "runs": {str(c): results[t["name"]][c]
                                                            for c in CONNECTIONS}}
                                       for t in targets}}, f, indent=2)
    except Failure as e:
        sys.exit(f"bench-peers: {e}\n(logs in {work})")
    finally:
        procs.stop_all()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
