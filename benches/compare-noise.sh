#!/usr/bin/env bash
# How often does `mcpbench compare` call noise a regression, and does it still see a real one?
# TRIES times: the same scenario, SIDE runs a side (`run --repeat SIDE`), compared — every
# regression reported is a false alarm; then the same base against runs whose REST backend is
# 50 % slower — a real regression that must be found. Single runs a side (the within-run test)
# are compared the same way, for contrast.
#
#   benches/compare-noise.sh                      # 10 tries, 3 runs a side, the quickstart
#   TRIES=3 SIDE=5 SCENARIO=scenarios/ci.toml benches/compare-noise.sh
#   OUT=results/baselines/compare-noise-$(date +%F).md benches/compare-noise.sh
source "$(dirname "$0")/common.sh"
TRIES=${TRIES:-10}
SIDE=${SIDE:-3}
SCENARIO=${SCENARIO:-scenarios/quickstart.toml}
DURATION=${DURATION:-4s}
trap 'rm -rf "$WORK"' EXIT

run() { # dir [extra args…]
  local dir=$1; shift
  "$BIN" run "$SCENARIO" --repeat "$SIDE" --output "$dir" --quiet --duration "$DURATION" "$@" > /dev/null
}
regressed() { # base current → the number of regressed metrics (compare exits 1 on any)
  "$BIN" compare "$1" "$2" --format json > "$WORK/compare.json" || true
  python3 -c 'import json,sys; print(sum(d["verdict"]=="regressed" for d in json.load(open(sys.argv[1]))["deltas"]))' "$WORK/compare.json"
}

false_between=0; false_within=0; alarms_between=(); alarms_within=()
for t in $(seq "$TRIES"); do
  run "$WORK/a$t"; run "$WORK/b$t"
  n=$(regressed "$WORK/a$t" "$WORK/b$t"); alarms_between+=("$n")
  if [ "$n" -gt 0 ]; then false_between=$((false_between + 1)); fi
  n=$(regressed "$WORK/a$t/run-1" "$WORK/b$t/run-1"); alarms_within+=("$n")
  if [ "$n" -gt 0 ]; then false_within=$((false_within + 1)); fi
  echo "try $t: between runs ${alarms_between[-1]} false regressions, single runs ${alarms_within[-1]}" >&2
done
run "$WORK/slow" --set embedded.backend_latency=1500us
run "$WORK/base" --set embedded.backend_latency=1ms
"$BIN" compare "$WORK/base" "$WORK/slow" --format json > "$WORK/compare.json" || true
found=$(python3 - "$WORK/compare.json" <<'PY'
import json,sys
c=json.load(open(sys.argv[1]))
print(", ".join(f"{d['operation']} {d['metric']} {d['change']*100:+.0f} %" for d in c["deltas"] if d["verdict"]=="regressed"))
PY
)
{
  echo "compare's false alarms on $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), $(date -u +%F)"
  echo
  echo "Command: \`TRIES=$TRIES SIDE=$SIDE SCENARIO=$SCENARIO DURATION=$DURATION benches/compare-noise.sh\`"
  echo
  echo "| comparison | tries with a false regression | regressed metrics per try |"
  echo "|---|---:|---|"
  echo "| $SIDE runs a side (spread between runs) | $false_between of $TRIES | ${alarms_between[*]} |"
  echo "| 1 run a side (spread inside the runs) | $false_within of $TRIES | ${alarms_within[*]} |"
  echo
  echo "A real regression (REST backend 1 ms → 1.5 ms, $SIDE runs a side) found: ${found:-NOTHING}"
} | tee "${OUT:-/dev/null}"
