#!/usr/bin/env bash
# The restart fuzz for an hour (issue 26): crates/rill-server/examples/restart_fuzz.rs runs one
# seed after another, each a fresh data directory, random commands of every type over all 16
# databases with rewrites, saves, appendonly/appendfsync toggles, kill -9 and SHUTDOWN, and
# after every restart compares the keyspace with every acknowledged write (the model is in
# crates/rill-server/tests/restart_fuzz/mod.rs). Prints every seed's result, then the seeds
# tried and those with findings; the data directory of a seed with a finding is kept.
#
#   bench/restart_fuzz.sh [--minutes 60] [--seed FIRST] [--rounds 8] [--steps 600] [--out DIR]
#
# Builds rill-server and the fuzz --release first. A finding is reproduced with
# target/release/examples/restart_fuzz --count 1 --seed N (add RILL_FUZZ_TRACE=1 to see every
# command and both pictures). Exits 1 if any seed found something.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINUTES=60 SEED=$(date +%s) ROUNDS=8 STEPS=600 OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --minutes) MINUTES=$2; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --steps) STEPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
OUT=${OUT:-${BENCH_RESULTS:-$HOME/.cache/rill-bench/results}/restart-fuzz-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
(cd "$ROOT" && cargo build --release -q -p rill-server --bins --example restart_fuzz) || exit 1
echo "restart fuzz: $MINUTES min from seed $SEED ($ROUNDS rounds of $STEPS steps per seed); report in $OUT/report.txt"
"$ROOT/target/release/examples/restart_fuzz" --minutes "$MINUTES" --seed "$SEED" --rounds "$ROUNDS" \
    --steps "$STEPS" --keep "$OUT/findings" 2>"$OUT/servers.log" | tee "$OUT/report.txt"
exit "${PIPESTATUS[0]}"
