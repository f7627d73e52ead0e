# shellcheck shell=bash
# Shared by bench/basic.sh and bench/pel.sh: build rill-server --release, a scratch dir, and
# servers started pinned to CPU 0 that are killed (by pid) when the script exits. Source it.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(cd "$ROOT" && cargo build --release -q -p rill-server)
RILL="$ROOT/target/release/rill-server"
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

start() { # name port cmd... : start pinned to CPU 0, wait for PING
    local name=$1 port=$2; shift 2
    mkdir -p "$WORK/$name"
    (cd "$WORK/$name" && exec taskset -c 0 "$@" >"$WORK/$name.log" 2>&1) &
    PIDS+=($!)
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "$name did not start" >&2; cat "$WORK/$name.log" >&2; exit 1
}
