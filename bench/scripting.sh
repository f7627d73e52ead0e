#!/usr/bin/env bash
# Side-by-side redis-benchmark of scripts on rill-server and redis-server, server pinned to
# CPU 0, client to CPU 1, rounds alternating A,B,B,A,...:
#   evalsha3   EVALSHA of a 3-command script (XADD + HSET + EXPIRE on keys of its own)
#   evalsha1   EVALSHA of `return redis.call('incr', KEYS[1])`
#   eval0      EVAL of `return 1` (the script sent in full each time, cached by its SHA1)
# each with one request in flight (P1) and 16 (P16), 50 clients; P1 runs a quarter of the
# requests (--requests, 800,000 by default: about 2 s per measurement at P1, where 50,000
# spread ±15 % from round to round). Prints per test the median throughput and the median
# per-round ratio rill/redis, and the server CPU µs per script.
#
#   bench/scripting.sh [--rounds N] [--requests N] [--redis PATH]
#
# Builds rill-server with --release first. The newest Redis built from source is the anchor
# (../shared/conformance/README.md says how to build it); Debian's 7.0.15 by default.
set -euo pipefail
ROUNDS=3
REQUESTS=800000
REDIS=${REDIS:-/usr/bin/redis-server}
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: apt-get install redis-tools" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
A=$(free_port)
B=$(free_port)
start rill "$A" "$RILL" --port "$A" --bind 127.0.0.1 --dir "$WORK/rill" --save '' --appendonly no
start redis "$B" "$REDIS" --port "$B" --bind 127.0.0.1 --save '' --appendonly no

THREE="redis.call('xadd', KEYS[1], 'MAXLEN', '~', '1000', '*', 'f', ARGV[1]) \
redis.call('hset', KEYS[2], 'last', ARGV[1]) return redis.call('expire', KEYS[2], 100)"
ONE="return redis.call('incr', KEYS[1])"
for port in "$A" "$B"; do
    SHA3=$(redis-cli -p "$port" SCRIPT LOAD "$THREE")
    SHA1=$(redis-cli -p "$port" SCRIPT LOAD "$ONE")
done

pid_of() { if [[ $1 == "$A" ]]; then echo "${PIDS[0]}"; else echo "${PIDS[1]}"; fi; }
bench() { # port pipeline test args... -> "test rps us_per_op"
    local port=$1 pipeline=$2 test=$3 pid before after rps n=$REQUESTS
    shift 3
    [[ $pipeline == 1 ]] && n=$((REQUESTS / 4))
    pid=$(pid_of "$port")
    before=$(cpu_ticks "$pid")
    rps=$(taskset -c 1 redis-benchmark -p "$port" -n "$n" -P "$pipeline" -c 50 -r 1000 --csv "$@" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2 }')
    after=$(cpu_ticks "$pid")
    echo "$test $rps $(awk -v d=$((after - before)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')"
}
run() { # port pipeline
    bench "$1" "$2" evalsha3 EVALSHA "$SHA3" 2 'events:__rand_int__' 'state:__rand_int__' v
    bench "$1" "$2" evalsha1 EVALSHA "$SHA1" 1 'n:__rand_int__'
    bench "$1" "$2" eval0 EVAL 'return 1' 0
}

: >"$WORK/results"
for pipeline in 1 16; do
    for r in $(seq "$ROUNDS"); do
        if (( r % 2 )); then order="$A $B"; else order="$B $A"; fi
        for port in $order; do
            run "$port" "$pipeline" | while read -r test rps us; do echo "P$pipeline $r $port $test $rps $us"; done >>"$WORK/results"
        done
    done
done
echo "rill vs $("$REDIS" --version | awk '{print $3}'): median of per-round ratios (rill/redis)"
python3 - "$WORK/results" "$A" "$B" <<'PY'
import sys, statistics
path, a, b = sys.argv[1:4]
v = {}
for line in open(path):
    p, r, port, test, rps, us = line.split()
    v.setdefault((p, test), {}).setdefault(r, {})[port] = (float(rps), float(us))
for (p, test), rounds in v.items():
    pairs = [(x[a], x[b]) for x in rounds.values() if a in x and b in x]
    tput = sorted(x[0] / y[0] for x, y in pairs)
    cpu = sorted(y[1] / x[1] for x, y in pairs if x[1] > 0)
    print(f"{p:4} {test:9} rill {statistics.median(x[0] for x, _ in pairs):9.0f}/s  redis {statistics.median(y[0] for _, y in pairs):9.0f}/s"
          f"  throughput {statistics.median(tput):.2f} ({tput[0]:.2f}..{tput[-1]:.2f})"
          + (f"  CPU efficiency {statistics.median(cpu):.2f}" if cpu else ""))
PY
