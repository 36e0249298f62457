#!/usr/bin/env bash
# Throughput per transport: the `echo` tool at 16 virtual users, against the reference server
# in another process (stdio: child processes), one sitting, same machine; the generator's CPU
# per request and the server's (watched with --target-pid; stdio children by themselves).
# Prints a Markdown table; `OUT=file.md` also writes it there.
#
#   benches/transports.sh                 # 5 s per case
#   DURATION=10s benches/transports.sh
source "$(dirname "$0")/common.sh"
DURATION=${DURATION:-5s}
PORT_JSON=$(free_port)
PORT_SSE=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT_JSON > "$WORK/serve-json.log" 2>&1 &
S1=$!
"$BIN" serve --listen 127.0.0.1:$PORT_SSE --response sse > "$WORK/serve-sse.log" 2>&1 &
S2=$!
trap 'kill $S1 $S2 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 0.5

case_run() { # label, [target] body, extra [load] lines, server pid (none: stdio)
  local label=$1 target=$2 extra=${3:-} pid=${4:-}
  cat > "$WORK/s.toml" <<TOML
name = "transport"
[target]
$target
[load]
concurrency = 16
duration = "$DURATION"
warmup = "1s"
timeout = "5s"
$extra
$ECHO_WORKLOAD
TOML
  rm -rf "$WORK/out"
  "$BIN" run "$WORK/s.toml" --output "$WORK/out" --quiet ${pid:+--target-pid $pid} > /dev/null
  python3 - "$label" "$WORK/out/summary.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))
op = next(o for o in s["operations"] if o["name"] == "tools/call:echo")
lat = op["latency"]
t = s["totals"]
server = sum(p.get("cpu_us_per_request", 0) for p in s.get("target_processes", []))
print(f"| {label} | {s['target']['protocol_negotiated']} | {t['throughput']:.0f} | {lat['p50_ms']:.2f} | {lat['p99_ms']:.2f} | {t['failed'] + t['cancelled']} | {s['generator'].get('cpu_us_per_request', 0):.1f} | {server:.1f} |")
PY
}

{
echo "| transport | revision | ok/s | p50 ms | p99 ms | errors | generator CPU µs/req | server CPU µs/req |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
case_run "streamable-http, JSON, HTTP/1.1" "url = \"http://127.0.0.1:$PORT_JSON/mcp\"" "" $S1
case_run "streamable-http, SSE, HTTP/1.1" "url = \"http://127.0.0.1:$PORT_SSE/mcp\"" "" $S2
case_run "streamable-http, JSON, HTTP/2" "url = \"http://127.0.0.1:$PORT_JSON/mcp\"
http = \"2\"" "" $S1
case_run "streamable-http, JSON, 2026-07-28" "url = \"http://127.0.0.1:$PORT_JSON/mcp\"
protocol = \"2026-07-28\"" "" $S1
case_run "legacy HTTP+SSE" "transport = \"sse\"
url = \"http://127.0.0.1:$PORT_JSON/sse\"" "" $S1
case_run "websocket, per-VU" "url = \"ws://127.0.0.1:$PORT_JSON/ws\"" "" $S1
case_run "websocket, shared per worker" "url = \"ws://127.0.0.1:$PORT_JSON/ws\"" 'sessions = "shared"' $S1
case_run "stdio, child per VU" "command = [\"$BIN\", \"serve\", \"--stdio\"]"
case_run "stdio, shared child per worker" "command = [\"$BIN\", \"serve\", \"--stdio\"]" 'sessions = "shared"'
} | tee "${OUT:-/dev/null}"
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r); duration $DURATION per case, 16 VUs, echo"
