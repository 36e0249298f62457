#!/usr/bin/env bash
# What does each gateway add? The same upstream (the reference server) called directly and
# through each gateway, under identical load, in alternating slices (mcpbench's own A/B mode):
# added p50 and p99 and the throughput ratio at 1 and 32 users, 95 % confidence intervals.
#
#   benches/gateways.sh                              # every gateway that is installed
#   GATEWAYS="reference supergateway" benches/gateways.sh
#   OUT=results/baselines/gateways-$(date +%F).md benches/gateways.sh
#   MODE=probe benches/gateways.sh                   # tenant isolation instead: each gateway
#                                                    # checked by `mcpbench probe --tenants`
#
# Gateways and how each fronts the upstream:
#   reference     mcpbench serve --upstream (HTTP → HTTP), tools as ref__<tool>
#   socat         a TCP relay (no MCP at all): the floor of one extra loopback hop
#   tokio-relay   the same relay on one current-thread tokio runtime (examples/tokio_relay.rs):
#                 the floor of one hop taken through tokio, before any HTTP or MCP work
#   supergateway  npm supergateway 4.0.0 (interop/setup.sh), stdio server → Streamable HTTP;
#                 "direct" is then the stdio server itself
#   mcp-proxy-rs  crate mcp-proxy 0.6.0 (joshrotenberg/mcp-proxy, Rust on tower-mcp), HTTP → HTTP,
#                 tools as ref__<tool>, endpoint at /; built once into .cache/bench-bin/ by
#                 cargo install
#   mcp-proxy     PyPI mcp-proxy 0.13.0 with mcp 1.30.0, stdio server → Streamable HTTP
#   contextforge  PyPI mcp-contextforge-gateway 1.1.0 (Python 3.12), the upstream registered
#                 as a gateway and exposed by a virtual server, tools as ref-<tool>, JWT auth
# The Python gateways are installed in .cache/bench-venvs/ on first use (pinned). Everything
# binds 127.0.0.1. One generator thread; the servers get one thread each where they can be
# told. Machine: see the env note in the output.
source "$(dirname "$0")/common.sh"
ROOT=$(pwd)
GATEWAYS=${GATEWAYS:-"reference socat tokio-relay mcp-proxy-rs supergateway mcp-proxy contextforge"}
MODE=${MODE:-ab}
SLICE=${SLICE:-2s}
PAIRS=${PAIRS:-5}
LEVELS=${LEVELS:-"1, 32"}
VENVS="$ROOT/.cache/bench-venvs"
PIDS=()
# KEEP=DIR keeps every A/B run's results there.
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

UP_PORT=$(free_port)
"$BIN" serve --listen 127.0.0.1:$UP_PORT --threads 1 > "$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT"
BACKEND=$(sed -n 's/.*(backend \(http[^)]*\)).*/\1/p' "$WORK/upstream.log" | head -1)
STDIO_CMD="$BIN serve --stdio --threads 1 --backend $BACKEND"

# scenario NAME DIRECT-TARGET-TOML VIA-TARGET-TOML → runs the A/B, prints the ab.json path
ab() {
  local name=$1 direct=$2 via=$3
  cat > "$WORK/$name.toml" <<EOF
name = "gateway-$name"
[[targets]]
name = "direct"
$direct
[[targets]]
name = "$name"
$via
[ab]
slice = "$SLICE"
pairs = $PAIRS
levels = [$LEVELS]
[load]
concurrency = 1
duration = "20s"
timeout = "10s"
workers = 1
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "hello" }
EOF
  (cd "$WORK" && "$BIN" run "$name.toml" --output "$WORK/out-$name" > "$WORK/$name.log" 2>&1) \
    || { echo "$name: the A/B run failed, see below" >&2; tail -5 "$WORK/$name.log" >&2; return 1; }
  echo "$WORK/out-$name/ab.json"
}

ROWS=()
row() { # name ab.json
  ROWS+=("$(python3 - "$1" "$2" <<'PY'
import json, sys
name, path = sys.argv[1:]
r = json.load(open(path))
cells = []
for lv in r["levels"]:
    c = next(c for c in lv["comparisons"] if c["operation"] == "tools/call:echo")
    d = {x["metric"]: x["added_ms"] for x in c["deltas"]}
    t = c["throughput_ratio"]
    fmt = lambda e: f'{e["mean"]*1000:+.0f} µs (±{(e["high"]-e["mean"])*1000:.0f})' if e else "—"
    ratio = f'×{t["mean"]:.2f} (±{t["high"]-t["mean"]:.2f})' if t else "—"
    bound = " ⚠ upstream-bound" if lv.get("upstream_bound") else ""
    cells.append(f'{fmt(d.get("p50"))} | {fmt(d.get("p99"))} | {ratio}{bound}')
print(f"| {name} | " + " | ".join(cells) + " |")
PY
)")
}

# Two tenants for MODE=probe (a gateway without authentication ignores their tokens).
TENANTS="$WORK/tenants.toml"
printf '[[tenant]]\nname = "alpha"\ntoken = "${ALPHA_TOKEN}"\n[[tenant]]\nname = "beta"\ntoken = "${BETA_TOKEN}"\n' > "$TENANTS"
export ALPHA_TOKEN=alpha-bench-token BETA_TOKEN=beta-bench-token
printf '[[tenant]]\nname = "alpha"\ntokens = ["%s"]\n[[tenant]]\nname = "beta"\ntokens = ["%s"]\ntools = ["ref__echo"]\n' \
  "$ALPHA_TOKEN" "$BETA_TOKEN" > "$WORK/policy.toml"
PROBES=()

# measure NAME LABEL DIRECT-TOML VIA-TOML [UPSTREAM-URL]: the A/B row, or (MODE=probe) the
# tenant-isolation table, with the passthrough check when the gateway fronts $UP_PORT over HTTP.
measure() {
  local name=$1 label=$2 direct=$3 via=$4 upstream=${5:-}
  if [ "$MODE" = probe ]; then
    local url
    url=$(sed -n 's/^url = "\(.*\)"$/\1/p' <<< "$via")
    local extra=() table
    [ -n "$upstream" ] && extra=(--upstream "$upstream")
    # Exit 1 when a check fails: that is the finding, not an error of this script.
    table=$("$BIN" probe --tenants "$TENANTS" "$url" "${extra[@]}" 2>&1) || true
    PROBES+=("### $label" "" '```' "\$ mcpbench probe --tenants tenants.toml ${url} ${extra[*]}"
      "$table" '```' "")
    return 0
  fi
  local f
  f=$(ab "$name" "$direct" "$via") && row "$label" "$f"
}

HTTP_DIRECT="url = \"http://127.0.0.1:$UP_PORT/mcp\""
STDIO_DIRECT="command = [$(printf '"%s", ' $STDIO_CMD | sed 's/, $//')]"

for g in $GATEWAYS; do
  case $g in
    reference)
      P=$(free_port)
      POLICY=(); [ "$MODE" = probe ] && POLICY=(--policy "$WORK/policy.toml")
      "$BIN" serve --listen 127.0.0.1:$P --threads 1 --upstream ref=http://127.0.0.1:$UP_PORT/mcp \
        "${POLICY[@]}" > "$WORK/reference.log" 2>&1 &
      PIDS+=($!); wait_port "$P"
      measure reference "mcpbench reference gateway (HTTP→HTTP)" "$HTTP_DIRECT" "url = \"http://127.0.0.1:$P/mcp\"
tool_prefix = \"ref__\"" "http://127.0.0.1:$UP_PORT/mcp"
      ;;
    socat)
      command -v socat > /dev/null || { echo "socat: not installed (apt install socat), skipped" >&2; continue; }
      P=$(free_port)
      socat TCP-LISTEN:$P,bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:$UP_PORT,nodelay &
      PIDS+=($!); wait_port "$P"
      measure socat "socat TCP relay (floor of one hop)" "$HTTP_DIRECT" \
        "url = \"http://127.0.0.1:$P/mcp\"" "http://127.0.0.1:$UP_PORT/mcp"
      ;;
    tokio-relay)
      RELAY=${RELAY_BIN:-$(dirname "$BIN")/examples/tokio_relay}
      if [ ! -x "$RELAY" ]; then
        cargo build --release -q --example tokio_relay
        RELAY=$(realpath "${CARGO_TARGET_DIR:-target}")/release/examples/tokio_relay
      fi
      P=$(free_port)
      "$RELAY" "$P" "$UP_PORT" &
      PIDS+=($!); wait_port "$P"
      measure tokio-relay "tokio TCP relay (floor of one hop through tokio)" "$HTTP_DIRECT" \
        "url = \"http://127.0.0.1:$P/mcp\"" "http://127.0.0.1:$UP_PORT/mcp"
      ;;
    mcp-proxy-rs)
      MPR="$ROOT/.cache/bench-bin/mcp-proxy-rs"
      if [ ! -x "$MPR/bin/mcp-proxy" ]; then
        echo "mcp-proxy-rs: building crate mcp-proxy 0.6.0 (once, a few minutes)" >&2
        cargo install -q mcp-proxy --version 0.6.0 --locked --root "$MPR" \
          || { echo "mcp-proxy-rs: cargo install failed, skipped" >&2; continue; }
      fi
      P=$(free_port)
      cat > "$WORK/mcp-proxy-rs-config.toml" <<EOF
[proxy]
name = "bench"
separator = "__"
[proxy.listen]
host = "127.0.0.1"
port = $P
[[backends]]
name = "ref"
transport = "http"
url = "http://127.0.0.1:$UP_PORT/mcp"
EOF
      # Its log at warn: by default it logs every request at debug, a cost no deployment keeps.
      RUST_LOG=warn "$MPR/bin/mcp-proxy" --config "$WORK/mcp-proxy-rs-config.toml" \
        > "$WORK/mcp-proxy-rs-server.log" 2>&1 &
      PIDS+=($!); wait_port "$P"
      measure mcp-proxy-rs "mcp-proxy 0.6.0 (Rust, tower-mcp; HTTP→HTTP)" "$HTTP_DIRECT" \
        "url = \"http://127.0.0.1:$P/\"
tool_prefix = \"ref__\"" "http://127.0.0.1:$UP_PORT/mcp"
      ;;
    supergateway)
      SG="$ROOT/interop/node_modules/.bin/supergateway"
      [ -x "$SG" ] || { echo "supergateway: run interop/setup.sh first, skipped" >&2; continue; }
      P=$(free_port)
      NODE_OPTIONS="--require $ROOT/interop/loopback.cjs" "$SG" --stdio "$STDIO_CMD" \
        --outputTransport streamableHttp --stateful --port $P > "$WORK/supergateway.log" 2>&1 &
      PIDS+=($!); wait_port "$P"
      measure supergateway "supergateway 4.0.0 (stdio→HTTP)" "$STDIO_DIRECT" \
        "url = \"http://127.0.0.1:$P/mcp\""
      ;;
    mcp-proxy)
      if [ ! -x "$VENVS/mcp-proxy/bin/mcp-proxy" ]; then
        python3 -m venv "$VENVS/mcp-proxy"
        "$VENVS/mcp-proxy/bin/pip" install -q --disable-pip-version-check 'mcp-proxy==0.13.0' 'mcp==1.30.0'
      fi
      P=$(free_port)
      "$VENVS/mcp-proxy/bin/mcp-proxy" --host 127.0.0.1 --port $P -- $STDIO_CMD \
        > "$WORK/mcp-proxy.log" 2>&1 &
      PIDS+=($!); wait_port "$P"
      measure mcp-proxy "mcp-proxy 0.13.0 (stdio→HTTP)" "$STDIO_DIRECT" \
        "url = \"http://127.0.0.1:$P/mcp\""
      ;;
    contextforge)
      CF="$VENVS/contextforge"
      if [ ! -x "$CF/bin/mcpgateway" ]; then
        PYENV_VERSION=3.12.1 python3.12 -m venv "$CF"
        "$CF/bin/pip" install -q --disable-pip-version-check 'mcp-contextforge-gateway==1.1.0'
      fi
      P=$(free_port)
      D="$WORK/cf"; mkdir -p "$D"
      cat > "$D/.env" <<EOF
HOST=127.0.0.1
PORT=$P
DATABASE_URL=sqlite:///$D/mcp.db
CACHE_TYPE=memory
AUTH_REQUIRED=true
MCP_CLIENT_AUTH_ENABLED=true
MCPGATEWAY_UI_ENABLED=false
MCPGATEWAY_ADMIN_API_ENABLED=true
PLUGINS_ENABLED=false
SSRF_ALLOW_LOCALHOST=true
RATE_LIMITING_ENABLED=false
LOG_LEVEL=ERROR
EOF
      (cd "$D" && "$CF/bin/python" -m mcpgateway.scripts.init_secrets --stdout >> .env)
      (cd "$D" && exec "$CF/bin/mcpgateway" --host 127.0.0.1 --port $P > "$WORK/contextforge.log" 2>&1) &
      PIDS+=($!); wait_port "$P"
      TOKEN=$(cd "$D" && "$CF/bin/python" -m mcpgateway.utils.create_jwt_token --username admin@example.com --exp 600 --admin 2>/dev/null | tail -1)
      H=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")
      curl -sf "${H[@]}" -X POST "http://127.0.0.1:$P/gateways" \
        -d "{\"name\":\"ref\",\"url\":\"http://127.0.0.1:$UP_PORT/mcp\",\"transport\":\"STREAMABLEHTTP\"}" > "$D/gateway.json" \
        || { echo "contextforge: registering the upstream failed, skipped" >&2; continue; }
      TOOL=$(curl -sf "${H[@]}" "http://127.0.0.1:$P/tools" | python3 -c 'import json,sys; print(next(t["id"] for t in json.load(sys.stdin) if t["name"].endswith("echo")))')
      SID=$(curl -sf "${H[@]}" -X POST "http://127.0.0.1:$P/servers" \
        -d "{\"server\":{\"name\":\"bench\",\"associated_tools\":[\"$TOOL\"]}}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
      PREFIX=$(curl -sf "${H[@]}" "http://127.0.0.1:$P/tools" | python3 -c 'import json,sys; n=next(t["name"] for t in json.load(sys.stdin) if t["name"].endswith("echo")); print(n[:-4])')
      export CF_TOKEN="$TOKEN"
      if [ "$MODE" = probe ]; then
        # Two tenants: the admin and a second user (made an admin too, so that it may use the
        # virtual server), each with a JWT of its own.
        export ALPHA_TOKEN="$TOKEN"
        curl -sf "${H[@]}" -X POST "http://127.0.0.1:$P/auth/email/admin/users" \
          -d '{"email":"beta@example.com","password":"Quartz-Lantern-Moss-7319-Ridge!","full_name":"Second tenant","is_admin":true}' > /dev/null \
          || echo "contextforge: creating the second user failed" >&2
        BETA_TOKEN=$(cd "$D" && "$CF/bin/python" -m mcpgateway.utils.create_jwt_token --username beta@example.com --exp 600 --admin 2>/dev/null | tail -1)
        export BETA_TOKEN
      fi
      measure contextforge "IBM ContextForge 1.1.0 (HTTP→HTTP, virtual server, JWT)" "$HTTP_DIRECT" \
        "url = \"http://127.0.0.1:$P/servers/$SID/mcp\"
tool_prefix = \"$PREFIX\"
headers = { Authorization = \"Bearer \${CF_TOKEN}\" }" "http://127.0.0.1:$UP_PORT/mcp"
      ;;
    *) echo "unknown gateway $g" >&2 ;;
  esac
done

if [ "$MODE" = probe ]; then
  {
    echo "Tenant isolation of each gateway, $(date -u +%F): \`mcpbench probe --tenants\` with two"
    echo "tenants' tokens; the passthrough check where the gateway fronts \`mcpbench serve\` over HTTP."
    echo
    printf '%s\n' "${PROBES[@]}"
  } | tee "${OUT:-/dev/null}"
  exit 0
fi

{
  echo "Gateways on $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)), echo over Streamable HTTP JSON, slices of $SLICE × $PAIRS pairs, one generator thread"
  echo
  echo "| gateway | c=1 added p50 | c=1 added p99 | c=1 throughput | c=32 added p50 | c=32 added p99 | c=32 throughput |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${ROWS[@]}"
} | tee "${OUT:-/dev/null}"
