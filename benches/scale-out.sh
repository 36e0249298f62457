#!/usr/bin/env bash
# What a split run costs and what one generator core sustains, for sizing N (docs/scale-out.md).
# One open-loop scenario (echo over Streamable HTTP, Poisson arrivals at RATE/s for DURATION s)
# against the reference server in another process (`serve --threads 1`), run unsplit and as
# SHARDS shard processes started together (--start-at) and merged. Per case: arrivals, ok/s,
# p50/p99, and the generator's CPU per request (worker threads, from each run's summary; for
# the split, every shard's CPU over every shard's requests). The server shares the cores: read
# the ratios of one sitting, repeat (REPEAT=3), quote medians.
#
#   benches/scale-out.sh                          # 4000/s for 10 s, 2 shards
#   RATE=8000 SHARDS=4 REPEAT=3 benches/scale-out.sh
source "$(dirname "$0")/common.sh"
RATE=${RATE:-4000}
DURATION=${DURATION:-10}
SHARDS=${SHARDS:-2}
REPEAT=${REPEAT:-1}
PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT --threads 1 > "$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/mcp" -X POST 2>/dev/null && break; sleep 0.1; done

cat > "$WORK/s.toml" <<TOML
name = "scale-out"
[target]
url = "http://127.0.0.1:$PORT/mcp"
[load]
model = "open"
rate = $RATE
max_in_flight = 256
duration = "${DURATION}s"
warmup = "1s"
$ECHO_WORKLOAD
TOML

# Prints one table row from summary.json files: the first is the result, all are the cost.
row() {
  python3 - "$@" <<'PY'
import json, sys
label, result, *runs = sys.argv[1:]
s = json.load(open(result))
t = s["totals"]
cpu = sum(json.load(open(r))["generator"].get("cpu_seconds", 0) for r in runs)
started = 0
for r in runs:
    x = json.load(open(r))
    started += x["totals"]["started"] + x["session_opening"]["started"] + sum(w["started"] for w in x["warmup"])
lat = t.get("latency") or {}
print(f"| {label} | {t['started'] + t['dropped']} | {t['throughput']:.0f} | {lat.get('p50_ms', 0):.2f} | "
      f"{lat.get('p99_ms', 0):.2f} | {cpu * 1e6 / max(started, 1):.1f} |")
PY
}

echo "| run | arrivals | ok/s | p50 ms | p99 ms | generator CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|"
for r in $(seq "$REPEAT"); do
  out="$WORK/$r"
  "$BIN" run "$WORK/s.toml" --workers 1 --quiet --output "$out/whole" > /dev/null
  row "unsplit, 1 worker" "$out/whole/summary.json" "$out/whole/summary.json"
  at=$(date -u -d '+3 sec' +%Y-%m-%dT%H:%M:%SZ)
  pids=()
  for i in $(seq 0 $((SHARDS - 1))); do
    "$BIN" run "$WORK/s.toml" --shard "$i/$SHARDS" --start-at "$at" --workers 1 --quiet \
      --output "$out/shards/$i" > /dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  "$BIN" merge "$out/shards" --output "$out/merged" > /dev/null
  row "$SHARDS shards, merged" "$out/merged/summary.json" "$out"/shards/*/summary.json
done
