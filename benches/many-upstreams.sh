#!/usr/bin/env bash
# The reference gateway in front of 100 upstreams (one reference server under 100 names, so
# the upstream side stays cheap and the gateway's own scaling shows): start-up (every upstream
# connected and its tools listed), then scenarios/many-upstreams.toml — tools/list over 909
# tools and calls spread over the upstreams.
#
#   benches/many-upstreams.sh                 # N=100 by default
#   N=300 benches/many-upstreams.sh
source "$(dirname "$0")/common.sh"
N=${N:-100}
UP=$(free_port)
GW=$(free_port)
"$BIN" serve --listen 127.0.0.1:$UP --threads 1 > "$WORK/upstream.log" 2>&1 &
UPID=$!
trap 'kill $UPID $GWID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q listening "$WORK/upstream.log" && break; sleep 0.1; done
ARGS=()
for i in $(seq 0 $((N - 1))); do
  ARGS+=(--upstream "$(printf 'u%03d' "$i")=http://127.0.0.1:$UP/mcp")
done
"$BIN" serve --listen 127.0.0.1:$GW --threads 1 "${ARGS[@]}" > "$WORK/gateway.out" 2> "$WORK/gateway.err" &
GWID=$!
for _ in $(seq 600); do grep -q listening "$WORK/gateway.out" && break; sleep 0.1; done
echo "gateway start-up: $(grep 'upstreams ready' "$WORK/gateway.err")"
sed "s/127.0.0.1:9090/127.0.0.1:$GW/" scenarios/many-upstreams.toml > "$WORK/many.toml"
(cd "$WORK" && "$BIN" run many.toml --output "$WORK/out") | grep -E "^(operation|tools/)"
echo "gateway RSS: $(ps -o rss= -p $GWID) KiB, threads: $(ls /proc/$GWID/task | wc -l)"
