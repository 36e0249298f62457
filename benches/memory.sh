#!/usr/bin/env bash
# Generator memory over a long high-rate run: an open-loop run (RATE calls/s of `echo`, Poisson
# arrivals) against the reference server in another process; the generator's resident set size
# (VmRSS, and VmHWM, its peak) is sampled from /proc at 10 s, 1 min and then every minute to
# the end. Flat means constant memory: histograms, buffers and sessions are allocated at start
# and reused, per-interval snapshots are written out and recycled.
#
#   benches/memory.sh                                  # 20 000/s for 5 min
#   RATE=5000 MINUTES=2 OUT=results/baselines/memory.md benches/memory.sh
source "$(dirname "$0")/common.sh"
RATE=${RATE:-20000}
MINUTES=${MINUTES:-5}
PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT > "$WORK/serve.log" 2>&1 &
SERVER=$!
RUN=
trap 'kill $SERVER $RUN 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 0.5
cat > "$WORK/s.toml" <<TOML
name = "memory"
[target]
url = "http://127.0.0.1:$PORT/mcp"
[load]
model = "open"
rate = $RATE
arrival = "poisson"
max_in_flight = 256
duration = "${MINUTES}m"
timeout = "5s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "\${random:16}" }
TOML
"$BIN" run "$WORK/s.toml" --output "$WORK/out" --quiet > "$WORK/run.log" 2>&1 &
RUN=$!
start=$(date +%s)
kb() { awk -v k="$1:" '$1==k{print $2}' "/proc/$RUN/status" 2>/dev/null || echo 0; }
REPORT=$WORK/report.md
{
echo "# Generator memory over a long open-loop run, $(date -u +%F)"
echo
echo "Reproduce: \`RATE=$RATE MINUTES=$MINUTES benches/memory.sh\`: \`echo\` calls with a random 16-character"
echo "argument, Poisson arrivals, max_in_flight 256, against \`mcpbench serve\` in another process;"
echo "VmRSS and VmHWM of the generator process from /proc."
echo
echo "| elapsed | RSS MiB | peak RSS MiB |"
echo "|---:|---:|---:|"
END=$((MINUTES * 60 - 5))
for at in 10 $(seq 60 60 $((END - 1))) "$END"; do
  while [ $(( $(date +%s) - start )) -lt "$at" ]; do sleep 1; done
  kill -0 "$RUN" 2>/dev/null || break
  echo "$at $(kb VmRSS) $(kb VmHWM)" | awk '{printf "| %ds | %.1f | %.1f |\n", $1, $2 / 1024, $3 / 1024}'
done
} > "$REPORT"
wait "$RUN" || true
RUN=
{
python3 - "$WORK/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["totals"]
print()
print(f"{t['started']} calls, {t['throughput']:.0f} ok/s, dropped {t['dropped']}, failed {t['failed']}")
PY
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r); rate $RATE/s for $MINUTES min"
} >> "$REPORT"
cat "$REPORT"
[ -z "${OUT:-}" ] || cp "$REPORT" "$OUT"
