#!/usr/bin/env bash
# Side-by-side redis-benchmark of rill-server and redis-server: PING, SET, GET with pipeline 16
# (and without), server pinned to CPU 0, client to CPU 1, rounds alternating A,B,B,A,...
# Prints the median per-round throughput ratio rill/redis for each test.
#
#   bench/basic.sh [--rounds N] [--requests N] [--redis PATH] [--tests LIST | --types]
#
# --tests takes redis-benchmark's names, comma-separated; --types runs the data-type set the
# data-types issue measures (set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,
# lrange_100,mset).
#
# Builds rill-server with --release first. Uses ports 7211 (rill) and 7212 (redis).
set -euo pipefail
ROUNDS=5
REQUESTS=1000000
REDIS=${REDIS:-/usr/bin/redis-server}
TESTS="ping_inline,ping_mbulk,set,get"
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        --tests) TESTS=$2; shift 2 ;;
        --types) TESTS="set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset"; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: apt-get install redis-tools" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
start rill 7211 "$RILL" --port 7211 --dir "$WORK/rill" --save '' --appendonly no
start redis 7212 "$REDIS" --port 7212 --bind 127.0.0.1 --save '' --appendonly no

pid_of() { if [[ $1 == 7211 ]]; then echo "${PIDS[0]}"; else echo "${PIDS[1]}"; fi; }
run() { # port pipeline -> "test rps us_per_op" lines, one redis-benchmark run per test so the
        # server CPU of each can be read from /proc (the last line counts: lrange_100 first
        # prints the LPUSH that fills its list)
    local pid t before after rps
    pid=$(pid_of "$1")
    for t in ${TESTS//,/ }; do
        before=$(cpu_ticks "$pid")
        rps=$(taskset -c 1 redis-benchmark -p "$1" -t "$t" -n "$REQUESTS" -P "$2" -c 50 --csv 2>/dev/null |
            awk -F'","' 'NR>1 { gsub(/"/,"",$2); rps = $2 } END { print rps }')
        after=$(cpu_ticks "$pid")
        echo "${t^^} $rps $(awk -v d=$((after - before)) -v n="$REQUESTS" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')"
    done
}

: >"$WORK/results"
for pipeline in ${PIPELINES:-16 1}; do
    n=$REQUESTS; [[ $pipeline == 1 ]] && REQUESTS=$((n / 5))
    for r in $(seq "$ROUNDS"); do
        if (( r % 2 )); then order="7211 7212"; else order="7212 7211"; fi
        for port in $order; do
            run "$port" "$pipeline" | while read -r test rps us; do echo "P$pipeline $r $port $test $rps $us"; done >>"$WORK/results"
        done
    done
    REQUESTS=$n
done
echo "rill vs $("$REDIS" --version | awk '{print $3}'): median of per-round throughput ratios (rill/redis)"
python3 - "$WORK/results" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
v = {}
for p, r, port, test, rps, us in rows:
    v.setdefault((p, test), {}).setdefault(r, {})[port] = (float(rps), float(us))
print("eff = redis server CPU per op / rill server CPU per op (> 1: rill needs less CPU; robust when the client saturates)")
for (p, test), rounds in sorted(v.items()):
    pairs = [(x["7211"], x["7212"]) for x in rounds.values() if "7211" in x and "7212" in x and x["7212"][0] > 0]
    if not pairs:
        continue
    ratios = sorted(a[0] / b[0] for a, b in pairs)
    effs = sorted(b[1] / a[1] for a, b in pairs if a[1] > 0)
    print(f"{p:4} {test:12} rill {statistics.median(a[0] for a, _ in pairs):10.0f} rps  redis {statistics.median(b[0] for _, b in pairs):10.0f} rps"
          f"  ratio {statistics.median(ratios):.2f} ({ratios[0]:.2f}..{ratios[-1]:.2f})"
          f"  us/op {statistics.median(a[1] for a, _ in pairs):.3f} vs {statistics.median(b[1] for _, b in pairs):.3f}"
          f"  eff {statistics.median(effs) if effs else 0:.2f}")
PY
