#!/usr/bin/env bash
# The stream benchmarks in one command: rill vs redis-server side by side with the
# harness (bench/harness: compare.sh for throughput/latency of the six Streams workloads,
# memory.sh for bytes per entry). Server pinned to CPU 0, load generator to CPU 1.
#
#   bench/streams.sh [--quick] [--only w1,w2] [--redis PATH] [--entries N]
#
# Prints the harness tables (ratios rill/redis; see bench/harness/README.md for how to read
# them). Builds rill-server --release first.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH_DIR:-$ROOT/bench/harness}
REDIS_BIN=${REDIS:-redis-server}
QUICK=()
ONLY=()
ENTRIES=1000000
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=(--quick); shift ;;
        --only) ONLY=(--only "$2"); shift 2 ;;
        --redis) REDIS_BIN=$2; shift 2 ;;
        --entries) ENTRIES=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -x $BENCH/compare.sh ]] || { echo "bench harness not found at $BENCH (set BENCH_DIR)" >&2; exit 2; }
(cd "$ROOT" && cargo build --release -q -p rill-server)
REDIS_CMD="$REDIS_BIN --port \$PORT --bind 127.0.0.1 --save \"\" --appendonly no"
OURS="$ROOT/target/release/rill-server --port \$PORT --bind 127.0.0.1 --appendonly no --save ''"
NAME_B="redis-$("$REDIS_BIN" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')"
OUT=${BENCH_OUT:-$(mktemp -d)}
cd "$BENCH"
./compare.sh --a "$OURS" --b "$REDIS_CMD" --name-a rill --name-b "$NAME_B" "${QUICK[@]}" "${ONLY[@]}" --out "$OUT/compare"
./memory.sh --a "$OURS" --b "$REDIS_CMD" --name-a rill --name-b "$NAME_B" --entries "$ENTRIES" --out "$OUT/memory"
echo "results: $OUT"
