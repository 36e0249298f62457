#!/usr/bin/env bash
# Soak: a long high-rate run against the reference server in another process, with the
# generator's and the server's resident set size (VmRSS) and open file descriptors sampled
# from /proc every 10 s. Flat means constant memory and no leaked descriptors on either side:
# histograms, buffers and sessions are allocated at start and reused, per-interval snapshots
# are written out and recycled, the server reaps what its clients leave behind.
#
# The load mixes what wears a server down: open-loop `echo` calls at RATE/s (Poisson) on
# per-user sessions, and CHURN sessions/s opened and closed by a second generator
# (per-request sessions: connections and sessions come and go all the time).
#
#   benches/soak.sh                                        # 20 000/s + 200 sessions/s, 10 min
#   RATE=5000 MINUTES=2 OUT=results/baselines/soak.md benches/soak.sh
source "$(dirname "$0")/common.sh"
RATE=${RATE:-20000}
CHURN=${CHURN:-200}
MINUTES=${MINUTES:-10}
PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT > "$WORK/serve.log" 2>&1 &
SERVER=$!
RUN=
CHURNER=
trap 'kill $SERVER $RUN $CHURNER 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 0.5
cat > "$WORK/s.toml" <<TOML
name = "soak"
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
cat > "$WORK/churn.toml" <<TOML
name = "soak-churn"
[target]
url = "http://127.0.0.1:$PORT/mcp"
[load]
model = "open"
rate = $CHURN
max_in_flight = 64
sessions = "per-request"
duration = "${MINUTES}m"
timeout = "5s"
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "churn" }
TOML
"$BIN" run "$WORK/s.toml" --output "$WORK/out" --quiet --workers 1 > "$WORK/run.log" 2>&1 &
RUN=$!
"$BIN" run "$WORK/churn.toml" --output "$WORK/churn" --quiet --workers 1 > "$WORK/churn.log" 2>&1 &
CHURNER=$!
start=$(date +%s)
rss() { awk '$1=="VmRSS:"{printf "%.1f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "-"; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
REPORT=$WORK/report.md
{
echo "# Soak: $MINUTES minutes at $RATE calls/s plus $CHURN sessions/s, $(date -u +%F)"
echo
echo "Reproduce: \`RATE=$RATE CHURN=$CHURN MINUTES=$MINUTES benches/soak.sh\`: \`echo\` calls with a random"
echo "16-character argument, Poisson arrivals, max_in_flight 256, one worker thread, against"
echo "\`mcpbench serve\` in another process; beside it a second generator opens and closes $CHURN"
echo "sessions/s (per-request sessions). VmRSS and open descriptors (/proc/PID/fd) of the main"
echo "generator and of the server, every 10 s."
echo
echo "| elapsed | generator RSS MiB | generator fds | server RSS MiB | server fds |"
echo "|---:|---:|---:|---:|---:|"
END=$((MINUTES * 60 - 5))
for at in $(seq 10 10 "$END"); do
  while [ $(( $(date +%s) - start )) -lt "$at" ]; do sleep 0.2; done
  kill -0 "$RUN" 2>/dev/null || break
  echo "| ${at}s | $(rss $RUN) | $(fds $RUN) | $(rss $SERVER) | $(fds $SERVER) |"
done
} > "$REPORT"
wait "$RUN" || true
RUN=
wait "$CHURNER" || true
CHURNER=
sleep 1
{
echo
echo "After both runs ended: server RSS $(rss $SERVER) MiB, $(fds $SERVER) descriptors."
python3 - "$WORK/out/summary.json" "$WORK/churn/summary.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    s = json.load(open(path))
    t = s["totals"]
    print()
    print(f"{s['scenario']['name']}: {t['started']} calls, {t['throughput']:.0f} ok/s, dropped {t['dropped']}, "
          f"failed {t['failed']}, unaccounted {t['unaccounted']}; sessions opened {s['sessions']['opened']}, "
          f"connections {s['sessions']['connections']}")
PY
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
} >> "$REPORT"
cat "$REPORT"
[ -z "${OUT:-}" ] || cp "$REPORT" "$OUT"
