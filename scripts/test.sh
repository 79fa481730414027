#!/usr/bin/env bash
# The README's test command: everything the suite needs on a fresh Debian machine, then pytest.
#   - a virtual environment in .venv with the project and its dev extras;
#   - PostgreSQL answering at 127.0.0.1:5432 and Redis at 127.0.0.1:6379 (started when they
#     do not answer: the suite uses both, and fails rather than skips without them);
#   - Chromium for the browser tests (Debian's package; no browser is downloaded at run time);
#   - the MCP Inspector CLI from npm in ~/.cache/citeledger/mcp-inspector/<version> (tests/inspector_support.py
#     pins them; CITELEDGER_TOOL_CACHE moves that folder).
# Arguments are passed to pytest (e.g. `bash scripts/test.sh tests/test_search.py -x`).
# The suite writes only into temporary folders (the console pictures: scripts/console_screenshots.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "test.sh: $*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

ensure_postgres() {
  pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null && return 0
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    say "PostgreSQL is not installed: installing Debian's postgresql"
    (as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q postgresql) \
      >/dev/null 2>&1 || { say "could not install postgresql"; return 0; }
  fi
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  [ -n "$version" ] && as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null && return 0; sleep 1; done
  say "PostgreSQL does not answer at 127.0.0.1:5432; the PostgreSQL tests will fail"
}

ensure_redis() {
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && return 0
  if ! command -v redis-server >/dev/null 2>&1; then
    say "Redis is not installed: installing Debian's redis-server"
    (as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q redis-server) \
      >/dev/null 2>&1 || { say "could not install redis-server"; return 0; }
  fi
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && return 0; sleep 1; done
  say "Redis does not answer at 127.0.0.1:6379; the Redis tests will fail"
}

ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  say "Chromium is missing: installing Debian's chromium for the browser tests"
  (as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q chromium) \
    >/dev/null 2>&1 || say "could not install chromium; the browser tests will fail"
}

ensure_inspector() {
  # Every version tests/inspector_support.py pins, each in $TOOL_CACHE/mcp-inspector/<version>.
  local versions version
  versions=$(sed -n 's/^[A-Z_]* = "\([0-9][0-9.]*\)".*/\1/p' tests/inspector_support.py)
  for version in $versions; do
    grep -qs "\"version\": \"$version\"" \
      "$TOOL_CACHE/mcp-inspector/$version/node_modules/@modelcontextprotocol/inspector/package.json" && continue
    command -v npm >/dev/null 2>&1 || {
      say "npm is missing: installing Debian's npm for the MCP Inspector tests"
      (as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q npm) \
        >/dev/null 2>&1 || { say "could not install npm; the MCP Inspector tests will fail"; return 0; }
    }
    mkdir -p "$TOOL_CACHE/mcp-inspector/$version"
    npm install --prefix "$TOOL_CACHE/mcp-inspector/$version" --no-audit --no-fund --silent \
      "@modelcontextprotocol/inspector@$version" >/dev/null 2>&1 \
      || say "could not install the MCP Inspector $version; its test will fail"
  done
}

# Tools the suite needs that are not Python packages live outside the checkout, made once per
# machine: a fresh clone does not download them again.
TOOL_CACHE=${CITELEDGER_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/citeledger}
export CITELEDGER_TOOL_CACHE=$TOOL_CACHE
mkdir -p "$TOOL_CACHE"
# One set-up at a time per machine: two runs starting together (a second checkout, a CI job
# beside a developer) would otherwise remove and rebuild the same tool folders under each other.
exec 9>"$TOOL_CACHE/.setup-lock"
flock 9

ensure_postgres
ensure_redis
ensure_chromium
ensure_inspector

# The environment is made and filled by uv (a pinned major, in its own small venv under the tool
# cache, made once per machine): pip spent ~95 s of CPU resolving and unpacking the dev extras on
# every fresh clone, uv ~5 s from its cache. The project still installs with plain pip (README).
ensure_uv() {
  UV=$TOOL_CACHE/uv/bin/uv
  "$UV" --version >/dev/null 2>&1 && return 0
  say "installing uv (the package installer) into $TOOL_CACHE/uv"
  rm -rf "$TOOL_CACHE/uv"
  python3 -m venv "$TOOL_CACHE/uv" && "$TOOL_CACHE/uv/bin/pip" install -q 'uv>=0.9,<1'
}
ensure_uv
[ -x .venv/bin/python ] || "$UV" venv -q --python python3 .venv
# --compile-bytecode: pip wrote the packages' .pyc files at install and uv does not by default;
# with PYTHONDONTWRITEBYTECODE=1 every worker, server and CLI subprocess would compile them again.
"$UV" pip install -q --compile-bytecode --python .venv/bin/python -e '.[dev]'
# PYTHONDONTWRITEBYTECODE=1 (set on this machine kind) would make every server and CLI subprocess
# of the suite compile the project's modules again (~20% of a server's start-up CPU): compile
# them once, into the gitignored __pycache__/ folders.
.venv/bin/python -m compileall -q -j 0 ledger projections bootstrap api cli client witness tests
flock -u 9
exec 9>&-
# Three workers (pytest-xdist) on this 2-core machine kind: much of the suite waits on real
# servers, subprocesses and PostgreSQL, so a third worker fills the cores; every test has its
# own directories, schemas and ports. CITELEDGER_TEST_WORKERS=0 runs in one process.
# A module at a time per worker, in collection order (tests/conftest.py puts the longest first), so
# a module's shared servers are made once.
exec .venv/bin/python -m pytest -q -n "${CITELEDGER_TEST_WORKERS:-3}" --dist loadscope --no-loadscope-reorder "$@"
