#!/usr/bin/env bash
# Every benchmark, one after the other, rill against one Redis: the command the README gives.
#
#   bench/all.sh [--redis PATH] [--quick] [--out DIR]
#
# PATH: the Redis to compare with (default Debian's /usr/bin/redis-server, 7.0.15). The main
# anchor is the newest Redis built from source (see the README, Benchmarks): pass its
# src/redis-server here, then run once more without --redis for continuity with 7.0.15.
# claim.sh runs only against a Redis that has XREADGROUP ... CLAIM (8.4+).
# Each script's output goes to DIR/<script>.txt (default: a new folder under
# ${BENCH_RESULTS:-~/.cache/rill-bench/results}); a summary of which ran lists at the end.
# Everything it needs is in this repository (bench/harness, bench/floor, the loadgen); it builds
# rill-server --release first. Takes about 90 minutes (about 20 with --quick).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REDIS=/usr/bin/redis-server
QUICK=0
OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --redis) REDIS=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -x $REDIS ]] || { echo "no Redis at $REDIS" >&2; exit 2; }
OUT=${OUT:-${BENCH_RESULTS:-$HOME/.cache/rill-bench/results}/all-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
version=$("$REDIS" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
echo "rill vs redis $version ($REDIS); results in $OUT"
(cd "$ROOT" && cargo build --release -q -p rill-server) || exit 1

has_claim() { # whether $REDIS knows XREADGROUP ... CLAIM (8.4+)
    local major minor
    IFS=. read -r major minor _ <<<"$version"
    ((major > 8 || (major == 8 && minor >= 4)))
}
q() { ((QUICK)) && printf '%s\n' "$@"; }

status=()
run() { # NAME SCRIPT ARGS...
    local name=$1 t=$SECONDS
    shift
    echo "== $name"
    if "$@" >"$OUT/$name.txt" 2>&1; then
        status+=("$name: ok ($((SECONDS - t)) s)")
    else
        status+=("$name: FAILED ($((SECONDS - t)) s), see $OUT/$name.txt")
    fi
    tail -n 25 "$OUT/$name.txt"
}

run basic "$ROOT/bench/basic.sh" --redis "$REDIS" $(q --rounds 3 --requests 300000)
run streams "$ROOT/bench/streams.sh" --redis "$REDIS" $(q --quick)
run pel "$ROOT/bench/pel.sh" --redis "$REDIS" $(q --entries 200000 --rounds 3)
run durability "$ROOT/bench/durability.sh" --redis "$REDIS" $(q --quick)
run worker "$ROOT/bench/worker.sh" --redis "$REDIS" $(q --rounds 3)
run policies "$ROOT/bench/policies.sh" --redis "$REDIS" $(q --quick)
run floor "$ROOT/bench/floor.sh" --redis "$REDIS" $(q --rounds 3)
run neighbour "$ROOT/bench/neighbour.sh" --redis "$REDIS" $(q --rounds 3)
run keys "$ROOT/bench/keys.sh" --redis "$REDIS" $(q --keys 300000)
run random "$ROOT/bench/random.sh" --redis "$REDIS" $(q --keys 300000 --fields 100000 --volatile 50000)
if has_claim; then
    run claim "$ROOT/bench/claim.sh" --redis "$REDIS" $(q --rounds 3)
else
    status+=("claim: skipped (redis $version has no XREADGROUP ... CLAIM)")
fi
echo
printf '%s\n' "${status[@]}" | tee "$OUT/summary.txt"
