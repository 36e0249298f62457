#!/usr/bin/env bash
# mcpbench next to general HTTP load generators (wrk, oha) on the same MCP request: the `echo`
# tool over Streamable HTTP (JSON replies, HTTP/1.1 keep-alive), against the reference server in
# another process, one MCP session shared by every connection (what wrk and oha can do: a fixed
# header), closed loop at 1, 16 and 64 connections. Per tool and concurrency: throughput, p50 and
# p99 as the tool reports them, and the generator's own CPU (user + system, from /usr/bin/time)
# per request. The generator and the server share the machine's cores, so a cheaper generator
# leaves more CPU to the server — compare the ratios, one sitting, and repeat (REPEAT=3 prints
# every sitting; quote medians).
#
#   benches/vs-http-tools.sh                     # 5 s per case
#   DURATION=10 REPEAT=3 OUT=results/baselines/vs-http-tools.md benches/vs-http-tools.sh
#
# Needs wrk (apt install wrk) and oha (cargo install oha --locked); a missing tool is skipped.
source "$(dirname "$0")/common.sh"
DURATION=${DURATION:-5}
REPEAT=${REPEAT:-1}
CONCURRENCY=${CONCURRENCY:-"1 16 64"}
PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT --threads 1 > "$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
URL=http://127.0.0.1:$PORT/mcp
BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}'

# One session, opened the way every client opens one.
for _ in $(seq 50); do curl -s -o /dev/null "$URL" -X POST 2>/dev/null && break; sleep 0.1; done
SESSION=$(curl -s -D - -o /dev/null "$URL" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"vs","version":"0"}}}' \
  | tr -d '\r' | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}')
curl -s -o /dev/null "$URL" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H "Mcp-Session-Id: $SESSION" -H 'MCP-Protocol-Version: 2025-11-25' \
  -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
[ -n "$SESSION" ] || { echo "no session from the reference server" >&2; exit 1; }

cat > "$WORK/wrk.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = "$SESSION"
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
wrk.body = '$BODY'
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.3f %.3f\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
LUA

timed() { # writes "user sys" seconds of the command to $WORK/time
  /usr/bin/time -f '%U %S' -o "$WORK/time" "$@"
}

row() { # tool c requests errors p50 p99
  local tool=$1 c=$2 n=$3 err=$4 p50=$5 p99=$6
  read -r user sys < "$WORK/time"
  python3 - "$tool" "$c" "$n" "$err" "$p50" "$p99" "$user" "$sys" "$DURATION" <<'PY'
import sys
tool, c, n, err, p50, p99, user, sys_, dur = sys.argv[1:]
n = int(n)
per = lambda s: float(s) / n * 1e6 if n else 0.0
print(f"| {tool} | {c} | {n / float(dur):.0f} | {float(p50):.2f} | {float(p99):.2f} | {err} | {per(user):.1f} | {per(sys_):.1f} | {per(user) + per(sys_):.1f} |")
PY
}

run_mcpbench() { # c
  local c=$1 workers=$(( $1 < 2 ? 1 : 2 ))
  cat > "$WORK/s.toml" <<TOML
name = "vs"
[target]
url = "$URL"
[load]
concurrency = $c
duration = "${DURATION}s"
timeout = "5s"
workers = $workers
sessions = "shared"
$ECHO_WORKLOAD
TOML
  rm -rf "$WORK/out"
  timed "$BIN" run "$WORK/s.toml" --output "$WORK/out" --quiet > /dev/null
  read -r n err p50 p99 < <(python3 - "$WORK/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
op = next(o for o in s["operations"] if o["name"] == "tools/call:echo")
t = s["totals"]
print(op["started"], t["failed"] + t["cancelled"], op["latency"]["p50_ms"], op["latency"]["p99_ms"])
PY
)
  row mcpbench "$c" "$n" "$err" "$p50" "$p99"
}

run_wrk() { # c
  local c=$1 threads=$(( $1 < 2 ? 1 : 2 ))
  timed wrk -t"$threads" -c"$c" -d"${DURATION}s" -s "$WORK/wrk.lua" "$URL" > "$WORK/wrk.out"
  read -r _ n err p50 p99 < <(grep '^RESULT' "$WORK/wrk.out")
  row wrk "$c" "$n" "$err" "$p50" "$p99"
}

run_oha() { # c
  local c=$1
  timed oha -z "${DURATION}s" -c "$c" -m POST --no-tui --output-format json \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Mcp-Session-Id: $SESSION" -H 'MCP-Protocol-Version: 2025-11-25' \
    -d "$BODY" "$URL" > "$WORK/oha.json"
  read -r n err p50 p99 < <(python3 - "$WORK/oha.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
codes = r.get("statusCodeDistribution", {})
ok = int(codes.get("200", 0))
n = sum(int(v) for v in codes.values()) + sum(int(v) for v in r.get("errorDistribution", {}).values())
p = r["latencyPercentiles"]
print(n, n - ok, p["p50"] * 1000, p["p99"] * 1000)
PY
)
  row oha "$c" "$n" "$err" "$p50" "$p99"
}

tools="mcpbench"
command -v wrk > /dev/null && tools="$tools wrk" || echo "wrk not found: skipped" >&2
command -v oha > /dev/null && tools="$tools oha" || echo "oha not found: skipped" >&2

{
echo "# mcpbench vs wrk vs oha: echo over Streamable HTTP (JSON, HTTP/1.1), $(date -u +%F)"
echo
echo "Reproduce: \`DURATION=$DURATION REPEAT=$REPEAT benches/vs-http-tools.sh\`. Closed loop, one MCP session"
echo "shared by all connections, against \`mcpbench serve --threads 1\` in another process on the same"
echo "machine. CPU per request is the generator's user and system time (/usr/bin/time) over its requests."
for r in $(seq "$REPEAT"); do
  [ "$REPEAT" -gt 1 ] && { echo; echo "sitting $r"; echo; }
  echo "| generator | connections | req/s | p50 ms | p99 ms | errors | user µs/req | sys µs/req | CPU µs/req |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for c in $CONCURRENCY; do
    for t in $tools; do "run_$t" "$c"; done
  done
done
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r);" \
  "server: mcpbench serve --threads 1; ${DURATION}s per case; $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(oha --version 2>/dev/null || true)"
} | tee "${OUT:-/dev/null}"
