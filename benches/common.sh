# Sourced by the side-by-side bench scripts: a release build of mcpbench ($BIN), a scratch
# directory ($WORK, which each script removes on exit), and free loopback ports.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# BIN=path/to/mcpbench measures that binary instead (e.g. a build of another commit, side by
# side with this one); otherwise this checkout is built.
if [ -z "${BIN:-}" ]; then
  cargo build --release -q
  BIN=$(realpath "${CARGO_TARGET_DIR:-target}")/release/mcpbench
fi
WORK=$(mktemp -d)

free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# wait_port PORT: returns once something accepts on 127.0.0.1:PORT (30 s at most, else 1).
wait_port() {
  for _ in $(seq 300); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

# The request every side-by-side script measures: the reference server's `echo` tool.
ECHO_WORKLOAD='[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "hello" }'
