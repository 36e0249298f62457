#!/usr/bin/env bash
# mcpbench next to general HTTP load generators (wrk, oha) on the same MCP request: the `echo`
# tool over Streamable HTTP (JSON replies, HTTP/1.1 keep-alive), against the reference server in
# another process, one MCP session shared by every connection (what wrk and oha can do: a fixed
# header). Three tables: closed loop at 1, 16, 64 and 256 connections (mcpbench's workers'
# event loop, and a task per virtual user beside it: `engine = "tasks"`); open loop at RATE
# requests/s (mcpbench Poisson and uniform arrivals, and Poisson at release_interval 0 and 200 µs;
# mcpbench closed loop paced by think time
# to the same throughput, the reference for what pacing costs; oha -q with latency correction);
# HTTP/2 at 16 concurrent streams (mcpbench, oha --http2) next to HTTP/1.1. Per row: throughput,
# p50 and p99 as the tool reports them, and the generator's own CPU (user + system, from
# /usr/bin/time) per request. The generator and the server share the machine's cores, so a
# cheaper generator leaves more CPU to the server — compare the ratios, one sitting, and repeat
# (REPEAT=3 prints every sitting; quote medians).
#
#   benches/vs-http-tools.sh                     # 5 s per case
#   DURATION=10 REPEAT=3 OUT=results/baselines/vs-http-tools.md benches/vs-http-tools.sh
#   CONCURRENCY="16" SECTIONS="closed" benches/vs-http-tools.sh   # one table, one level
#
# Needs wrk (apt install wrk) and oha (cargo install oha --locked); a missing tool is skipped.
source "$(dirname "$0")/common.sh"
DURATION=${DURATION:-5}
REPEAT=${REPEAT:-1}
CONCURRENCY=${CONCURRENCY:-"1 16 64 256"}
RATE=${RATE:-20000}
SECTIONS=${SECTIONS:-"closed open http2"}
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
print(f"| {tool} | {c} | {n / float(dur):.0f} | {float(p50):.2f} | {float(p99):.2f} | {err} | {per(user):.2f} | {per(sys_):.2f} | {per(user) + per(sys_):.2f} |")
PY
}

# mcpbench with extra [target] and [load] lines; the row is labelled `label`.
mcpbench_case() { # label c target_extra load_extra
  local label=$1 c=$2 workers="workers = $(( $2 < 2 ? 1 : 2 ))" users="concurrency = $2"
  # Open loop: max_in_flight instead of users, and the default workers (one per 50 000/s).
  case "$4" in *'model = "open"'*) users="" workers="" ;; esac
  cat > "$WORK/s.toml" <<TOML
name = "vs"
[target]
url = "$URL"
$3
[load]
$users
duration = "${DURATION}s"
timeout = "5s"
$workers
sessions = "shared"
$4
$ECHO_WORKLOAD
TOML
  rm -rf "$WORK/out"
  timed "$BIN" run "$WORK/s.toml" --output "$WORK/out" --quiet > /dev/null
  read -r n err p50 p99 late < <(python3 - "$WORK/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
op = next(o for o in s["operations"] if o["name"] == "tools/call:echo")
t = s["totals"]
late = (s["generator"].get("lateness") or {}).get("p99_ms", "-")
print(op["started"], t["failed"] + t["cancelled"] + t["dropped"], op["latency"]["p50_ms"], op["latency"]["p99_ms"], late)
PY
)
  row "$label" "$c" "$n" "$err" "$p50" "$p99"
  LATE=$late
}

run_mcpbench() { # c
  mcpbench_case mcpbench "$1" "" ""
}

run_wrk() { # c
  local c=$1 threads=$(( $1 < 2 ? 1 : 2 ))
  timed wrk -t"$threads" -c"$c" -d"${DURATION}s" -s "$WORK/wrk.lua" "$URL" > "$WORK/wrk.out"
  read -r _ n err p50 p99 < <(grep '^RESULT' "$WORK/wrk.out")
  row wrk "$c" "$n" "$err" "$p50" "$p99"
}

run_oha() { # c [extra oha flags…]
  local c=$1 label=oha
  shift
  [ $# -gt 0 ] && label="oha $*"
  timed oha -z "${DURATION}s" -c "$c" "$@" -m POST --no-tui --output-format json \
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
  row "$label" "$c" "$n" "$err" "$p50" "$p99"
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
header() {
  echo
  echo "$1"
  echo
  echo "| generator | connections | req/s | p50 ms | p99 ms | errors | user µs/req | sys µs/req | CPU µs/req |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
}
for r in $(seq "$REPEAT"); do
  [ "$REPEAT" -gt 1 ] && { echo; echo "## sitting $r"; }
  case " $SECTIONS " in *" closed "*)
    header "Closed loop, HTTP/1.1 keep-alive, one connection per virtual user:"
    for c in $CONCURRENCY; do
      for t in $tools; do "run_$t" "$c"; done
      # The same load with a task per virtual user instead of the workers' event loop.
      mcpbench_case "mcpbench, engine = tasks" "$c" "" 'engine = "tasks"'
    done
  esac
  case " $SECTIONS " in *" open "*)
    # Up to 64 in flight. The paced closed loop: 1 ms think time, which tokio's 1 ms timer ticks
    # stretch to ~2.3 ms a cycle here, so RATE/430 users make about RATE (its req/s column says
    # what it made).
    users=$(( RATE / 430 ))
    header "Open loop at $RATE/s (errors include dropped arrivals), and a closed loop paced to the same rate:"
    # Poisson and uniform at the default release_interval (100 µs), then Poisson releasing
    # every arrival on its own and at most every 200 µs: the generator's cost against its
    # lateness.
    for variant in "poisson 100us" "uniform 100us" "poisson 0us" "poisson 200us"; do
      read -r arrival release <<< "$variant"
      mcpbench_case "mcpbench open $arrival, release $release" 64 "" "model = \"open\"
rate = $RATE
arrival = \"$arrival\"
release_interval = \"$release\"
max_in_flight = 64"
      echo "  (mcpbench open $arrival, release $release: release lateness p99 $LATE ms)"
    done
    mcpbench_case "mcpbench closed, think 1ms" "$users" "" "think = \"1ms\""
    case " $tools " in *" oha "*) run_oha 64 -q "$RATE" --latency-correction ;; esac
  esac
  case " $SECTIONS " in *" http2 "*)
    header "HTTP/2 (prior knowledge), one connection per worker, 16 streams in flight; HTTP/1.1 beside it:"
    mcpbench_case "mcpbench HTTP/2" 16 "http = \"2\"" ""
    run_mcpbench 16
    case " $tools " in *" oha "*) run_oha 16 --http2 ;; esac
  esac
done
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r);" \
  "server: mcpbench serve --threads 1; ${DURATION}s per case; $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(oha --version 2>/dev/null || true)"
} | tee "${OUT:-/dev/null}"
