#!/usr/bin/env bash
# Failover under load, many rounds: three rill nodes, three real Sentinels, redis-py's
# Sentinel client pipelining XADD and consuming with XREADGROUP/XACK, each acknowledged write
# followed by WAIT 1; the primary killed with SIGKILL at a random moment each round. Prints per
# round what was acknowledged and how long the promotion took, and fails if an acknowledged
# XADD or XACK is missing on the new primary. The test command runs 3 rounds; this runs 20.
#
#   bench/failover.sh [ROUNDS]      (after scripts/install-deps.sh and a debug or release build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${RILL_BIN:-}"
if [ -z "$BIN" ]; then
    if [ -x target/release/rill-server ]; then BIN=target/release/rill-server; else BIN=target/debug/rill-server; fi
fi
[ -x "$BIN" ] || { echo "build rill-server first (cargo build -p rill-server)" >&2; exit 1; }
exec .deps/venv/bin/python tests/clients/sentinel_failover.py "$BIN" "${1:-20}"
