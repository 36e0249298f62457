#!/usr/bin/env bash
# What the live dashboard costs: the same closed-loop run (echo over Streamable HTTP, JSON,
# HTTP/1.1, 16 virtual users, one generator thread) against `mcpbench serve --threads 1`, with
# the dashboard and with `--no-tui --quiet`, both in a 120×40 tmux pane (a real terminal that
# renders what it is sent). Paired and interleaved (the order alternates), PAIRS pairs; prints
# the medians of throughput, generator CPU per request (worker threads) and process CPU per
# request (user + system of the whole process: the drawing thread included), and the ratios.
#
#   benches/dashboard.sh                     # PAIRS=5 DURATION=8
#   BIN=/path/to/mcpbench PAIRS=3 benches/dashboard.sh
#
# Needs tmux.
source "$(dirname "$0")/common.sh"
PAIRS=${PAIRS:-5}
DURATION=${DURATION:-8}
command -v tmux >/dev/null || { echo "needs tmux (apt-get install tmux)"; exit 1; }
PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$PORT --threads 1 > "$WORK/serve.log" 2>&1 &
SERVER=$!
SOCK="$WORK/tmux.sock"
trap 'kill $SERVER 2>/dev/null; tmux -S "$SOCK" kill-server 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do grep -q listening "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done
cat > "$WORK/s.toml" <<TOML
name = "dashboard-cost"
[target]
url = "http://127.0.0.1:$PORT/mcp"
[load]
concurrency = 16
duration = "${DURATION}s"
warmup = "1s"
timeout = "5s"
workers = 1
$ECHO_WORKLOAD
TOML

# One run in the tmux pane; prints "ok/s worker-cpu-us/req process-cpu-us/req".
one() { # label flags…
  local label=$1; shift
  local out="$WORK/out-$label"
  rm -rf "$out" "$WORK/done" "$WORK/cpu"
  tmux -S "$SOCK" kill-server 2>/dev/null || true
  tmux -S "$SOCK" new-session -d -x 120 -y 40 \
    "TIMEFORMAT='%U %S'; { time $BIN run $WORK/s.toml --output $out $* 2>/dev/null; } 2> $WORK/cpu; touch $WORK/done"
  while [ ! -e "$WORK/done" ]; do sleep 0.2; done
  python3 - "$out/summary.json" "$WORK/cpu" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
user, sys_ = (float(x) for x in open(sys.argv[2]).read().split())
started = s["totals"]["started"] + s["session_opening"]["started"] + sum(w["started"] for w in s["warmup"])
print(f'{s["totals"]["throughput"]:.0f} {s["generator"]["cpu_us_per_request"]:.2f} {(user + sys_) * 1e6 / started:.2f}')
PY
}

declare -a TUI PLAIN
for i in $(seq "$PAIRS"); do
  if (( i % 2 )); then
    TUI+=("$(one tui --exit-on-finish)"); PLAIN+=("$(one plain --no-tui --quiet)")
  else
    PLAIN+=("$(one plain --no-tui --quiet)"); TUI+=("$(one tui --exit-on-finish)")
  fi
done

python3 - "${TUI[@]}" -- "${PLAIN[@]}" <<'PY'
import statistics, sys
args = sys.argv[1:]
cut = args.index("--")
tui = [list(map(float, a.split())) for a in args[:cut]]
plain = [list(map(float, a.split())) for a in args[cut + 1:]]
med = lambda rows, k: statistics.median(r[k] for r in rows)
print("| run | ok/s (median) | worker CPU µs/req | process CPU µs/req | pairs |")
print("|---|---:|---:|---:|---:|")
for name, rows in (("dashboard", tui), ("--no-tui --quiet", plain)):
    print(f"| {name} | {med(rows, 0):.0f} | {med(rows, 1):.2f} | {med(rows, 2):.2f} | {len(rows)} |")
print()
print(f"dashboard / plain: throughput {med(tui, 0) / med(plain, 0):.3f}, "
      f"worker CPU per request {med(tui, 1) / med(plain, 1):.3f}, "
      f"process CPU per request {med(tui, 2) / med(plain, 2):.3f}")
print("each pair: " + ", ".join(f"{t[0]:.0f}/{p[0]:.0f}" for t, p in zip(tui, plain)) + " ok/s (dashboard/plain)")
PY
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F); ${DURATION}s runs, echo c16, one worker, serve --threads 1"
