#!/usr/bin/env bash
# What one proxied call costs the relay in CPU, split into user and kernel time: the reference
# gateway (one or more builds) beside socat, fronting the same upstream (`mcpbench serve
# --threads 1`), closed loop at one virtual user (c=1), interleaved rounds. The relay's CPU is
# read from /proc/<pid>/stat (utime+stime, with its reaped children for socat's forks) before
# and after each run; the latency is the run's p50 and the upstream's own p50 called directly.
#
#   benches/relay-cpu.sh                                  # this checkout's gateway
#   GATEWAYS="/tmp/mcpbench-old /tmp/mcpbench-new" benches/relay-cpu.sh   # builds side by side
#   ROUNDS=5 REQUESTS=40000 benches/relay-cpu.sh
#
# The generator, the upstream and socat are the same in every round ($BIN); only the gateway
# binary changes. Needs socat (apt install socat).
source "$(dirname "$0")/common.sh"
GATEWAYS=${GATEWAYS:-$BIN}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-20000}
command -v socat > /dev/null || { echo "socat: not installed (apt install socat)" >&2; exit 2; }
TICK=$(getconf CLK_TCK)

UP_PORT=$(free_port)
SOCAT_PORT=$(free_port)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
"$BIN" serve --listen 127.0.0.1:$UP_PORT --threads 1 > "$WORK/upstream.log" 2>&1 &
UP=$!
PIDS+=($UP)
socat TCP-LISTEN:$SOCAT_PORT,bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:$UP_PORT,nodelay &
SOCAT=$!
PIDS+=($SOCAT)
wait_port "$UP_PORT"
wait_port "$SOCAT_PORT"

scenario() { # port tool → scenario file
  cat > "$WORK/$2-$1.toml" <<TOML
name = "relay-cpu"
[target]
url = "http://127.0.0.1:$1/mcp"
[load]
concurrency = 1
requests = $REQUESTS
workers = 1
timeout = "60s"
[[workload]]
method = "tools/call"
tool = "$2"
arguments = { message = "hello" }
TOML
  echo "$WORK/$2-$1.toml"
}
ticks() { awk '{print $14 + $16, $15 + $17}' "/proc/$1/stat"; }

# measure LABEL PID SCENARIO: one run, one Markdown row (p50, throughput, the relay's CPU).
measure() {
  local before after
  before=$(ticks "$2")
  rm -rf "$WORK/out"
  "$BIN" run "$3" --output "$WORK/out" --quiet > /dev/null 2>&1
  sleep 0.3 # socat's child for the connection is reaped
  after=$(ticks "$2")
  python3 - "$WORK/out/summary.json" "$1" "$before" "$after" "$TICK" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
label, (u0, s0), (u1, s1), tick = sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), int(sys.argv[5])
n = t["ok"]
assert n > 0 and t["failed"] == 0, t
per = lambda a, b: (int(b) - int(a)) / tick / n * 1e6
cpu = "— | —" if label == "direct" else f"{per(u0, u1):.1f} | {per(s0, s1):.1f}"
print(f"| {label} | {t['latency']['p50_ms'] * 1000:.0f} | {t['throughput']:.0f} | {cpu} |")
PY
}

DIRECT=$(scenario "$UP_PORT" echo)
VIA_SOCAT=$(scenario "$SOCAT_PORT" echo)
echo "Relay CPU per call on $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)), c=1, $REQUESTS calls a run"
for r in $(seq "$ROUNDS"); do
  echo
  echo "Round $r"
  echo
  echo "| path | p50 µs | calls/s | relay user µs/call | relay kernel µs/call |"
  echo "|---|---:|---:|---:|---:|"
  measure direct "$UP" "$DIRECT"
  measure socat "$SOCAT" "$VIA_SOCAT"
  for g in $GATEWAYS; do
    P=$(free_port)
    "$g" serve --listen 127.0.0.1:$P --threads 1 --upstream ref=http://127.0.0.1:$UP_PORT/mcp \
      > "$WORK/gateway.log" 2>&1 &
    GW=$!
    PIDS+=($GW)
    wait_port "$P"
    measure "gateway $(basename "$g")" "$GW" "$(scenario "$P" ref__echo)"
    kill "$GW"
    wait "$GW" 2> /dev/null || true
  done
done
