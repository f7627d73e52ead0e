#!/usr/bin/env bash
# End-to-end consumer throughput, rill vs redis-server in one run: entries/s produced, handled
# (no-op handler) and XACKed by 4 rill-worker workers plus one pipelined producer
# (crates/rill-worker/examples/throughput.rs). Server pinned to CPU 0, client to CPU 1, rounds
# alternating; prints the median entries/s of each server and the ratio rill/redis.
#
#   bench/worker.sh [--rounds N] [--entries N] [--workers N] [--redis PATH]
set -euo pipefail
ROUNDS=3
ENTRIES=200000
WORKERS=4
REDIS=${REDIS:-/usr/bin/redis-server}
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --entries) ENTRIES=$2; shift 2 ;;
        --workers) WORKERS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
source "$(dirname "$0")/lib.sh"
(cd "$ROOT" && cargo build --release -q -p rill-worker --example throughput)
CLIENT="$ROOT/target/release/examples/throughput"

RILL_PORT=$(free_port)
REDIS_PORT=$(free_port)
start rill "$RILL_PORT" "$RILL" --port "$RILL_PORT" --bind 127.0.0.1 --dir "$WORK/rill" --save '' --appendonly no
start redis "$REDIS_PORT" "$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no

: >"$WORK/results"
for r in $(seq "$ROUNDS"); do
    if (( r % 2 )); then order="rill redis"; else order="redis rill"; fi
    for name in $order; do
        port=$RILL_PORT; [[ $name == redis ]] && port=$REDIS_PORT
        eps=$(taskset -c 1 "$CLIENT" "redis://127.0.0.1:$port/" "$ENTRIES" "$WORKERS" |
            sed -n 's/.*entries_per_sec=\([0-9]*\).*/\1/p')
        echo "round $r $name: $eps entries/s"
        echo "$name $eps" >>"$WORK/results"
    done
done

median() { grep "^$1 " "$WORK/results" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rill_eps=$(median rill)
redis_eps=$(median redis)
echo
echo "produce -> handle -> XACK, $WORKERS workers, $ENTRIES entries, median of $ROUNDS rounds"
printf 'redis-server %s: %s entries/s\n' "$("$REDIS" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')" "$redis_eps"
printf 'rill-server:  %s entries/s\n' "$rill_eps"
awk -v a="$rill_eps" -v b="$redis_eps" 'BEGIN { printf "ratio rill/redis: %.2f\n", a / b }'
