#!/usr/bin/env bash
# Generator instructions per request, counted by callgrind (repeatable, unlike seconds on a
# shared machine): closed-loop `echo` over Streamable HTTP (JSON, HTTP/1.1) at 16 virtual users
# on one worker thread, against `mcpbench serve` in another process (not under valgrind). Two
# runs of N1 and N2 requests; the difference divided by N2 - N1 is the marginal cost of one
# request, with start-up and shut-down cancelled out. Prints one Markdown row per binary.
#
#   benches/instructions.sh                               # this checkout
#   BINS="/tmp/mcpbench-old target/release/mcpbench" benches/instructions.sh   # side by side
#   N1=20000 N2=40000 TRANSPORT=websocket benches/instructions.sh
#   SIDE=gateway benches/instructions.sh    # the reference gateway's instructions per proxied
#                                           # call instead (it runs under callgrind, fronting
#                                           # the upstream; the generator runs outside, c=1)
#
# Needs valgrind (apt install valgrind).
source "$(dirname "$0")/common.sh"
N1=${N1:-20000}
N2=${N2:-40000}
BINS=${BINS:-$BIN}
PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT > "$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do grep -q listening "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done
case ${TRANSPORT:-streamable-http} in
  websocket) URL="ws://127.0.0.1:$PORT/ws" ;;
  *) URL="http://127.0.0.1:$PORT/mcp" ;;
esac

instructions() { # binary requests → total instructions of the run (all threads)
  cat > "$WORK/s.toml" <<TOML
name = "instructions"
[target]
url = "$URL"
[load]
concurrency = 16
requests = $2
workers = 1
timeout = "60s"
$ECHO_WORKLOAD
TOML
  rm -rf "$WORK/out"
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" \
    "$1" run "$WORK/s.toml" --output "$WORK/out" --quiet > /dev/null 2> "$WORK/cg.log"
  python3 - "$WORK/out/summary.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ok = s["totals"]["ok"]
# Every request of the count must have succeeded, or the difference measures errors.
assert s["totals"]["failed"] == 0 and s["totals"]["cancelled"] == 0, s["totals"]
PY
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$WORK/cg.log"
}

# gateway_instructions binary requests → the instructions of a gateway process (all threads,
# start to shutdown) that proxied that many calls to the upstream.
gateway_instructions() {
  local gp
  gp=$(free_port)
  valgrind --tool=callgrind --callgrind-out-file="$WORK/gw.out" "$1" serve \
    --listen 127.0.0.1:$gp --threads 1 --upstream ref=$URL > "$WORK/gw.log" 2> "$WORK/gw.err" &
  local gw=$!
  for _ in $(seq 300); do grep -q listening "$WORK/gw.log" 2>/dev/null && break; sleep 0.1; done
  cat > "$WORK/g.toml" <<TOML
name = "gateway-instructions"
[target]
url = "http://127.0.0.1:$gp/mcp"
[load]
concurrency = 1
requests = $2
workers = 1
timeout = "60s"
[[workload]]
method = "tools/call"
tool = "ref__echo"
arguments = { message = "hello" }
TOML
  rm -rf "$WORK/out"
  "$BIN" run "$WORK/g.toml" --output "$WORK/out" --quiet > /dev/null 2>&1
  python3 - "$WORK/out/summary.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
assert t["failed"] == 0 and t["cancelled"] == 0, t
PY
  kill -INT $gw
  wait $gw || true
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$WORK/gw.err"
}

# marginal COUNTER WHAT NOTE: a row per binary of $BINS (COUNTER at N1 and N2 requests, and the
# difference per request), then the machine and NOTE.
marginal() {
  echo "| binary | $2 at $N1 | at $N2 | per request (marginal) |"
  echo "|---|---:|---:|---:|"
  for b in $BINS; do
    a=$("$1" "$b" "$N1")
    c=$("$1" "$b" "$N2")
    echo "| $b | $a | $c | $(( (c - a) / (N2 - N1) )) |"
  done
  echo
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); valgrind $(valgrind --version); $3"
}

if [ "${SIDE:-generator}" = gateway ]; then
  N1=${N1_GATEWAY:-2000}
  N2=${N2_GATEWAY:-6000}
  marginal gateway_instructions "gateway instructions" \
    "the gateway (--threads 1) in front of $URL, c=1, echo; a request is a proxied call"
else
  marginal instructions "instructions" "c16, one worker thread, $URL"
fi
