#!/usr/bin/env bash
# Consumer-group PEL at scale, rill vs redis-server side by side (server on CPU 0, client on
# CPU 1): memory per pending entry, and XAUTOCLAIM / XCLAIM throughput over a PEL of N entries.
#
#   bench/pel.sh [--entries N] [--redis PATH] [--rounds R]
#
# Fills one stream with N tick entries (redis-cli --pipe), reads them all into one consumer's
# PEL with XREADGROUP, and reports (used_memory and RSS after) - (before) divided by N. Then
# runs redis-benchmark loops of XAUTOCLAIM ... COUNT 100 and XCLAIM of one id, alternating
# servers per round, and prints the median per-round ratio rill/redis.
set -euo pipefail
ENTRIES=1000000
ROUNDS=3
REDIS=${REDIS:-/usr/bin/redis-server}
while [[ $# -gt 0 ]]; do
    case $1 in
        --entries) ENTRIES=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
source "$(dirname "$0")/lib.sh"
start rill 7213 "$RILL" --port 7213 --dir "$WORK/rill" --save '' --appendonly no
start redis 7214 "$REDIS" --port 7214 --bind 127.0.0.1 --save '' --appendonly no

pel_fill_resp "$ENTRIES" >"$WORK/fill.resp"

mem() { # port -> "used rss"
    local used pid rss
    used=$(redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}')
    pid=$(redis-cli -p "$1" info server | tr -d '\r' | awk -F: '$1=="process_id"{print $2}')
    rss=$(awk '/VmRSS/{print $2*1024}' "/proc/$pid/status")
    echo "$used $rss"
}
declare -A PER
for port in 7213 7214; do
    taskset -c 1 redis-cli -p "$port" --pipe <"$WORK/fill.resp" >/dev/null
    read -r u0 r0 < <(mem "$port")
    # In chunks, so a giant reply buffer does not inflate RSS.
    for _ in $(seq $(( (ENTRIES + 9999) / 10000 ))); do
        taskset -c 1 redis-cli -p "$port" XREADGROUP GROUP g c1 COUNT 10000 STREAMS pel '>' >/dev/null
    done
    sleep 1
    read -r u1 r1 < <(mem "$port")
    pending=$(redis-cli -p "$port" XPENDING pel g | head -1)
    [[ $pending == "$ENTRIES" ]] || { echo "port $port: pending=$pending, expected $ENTRIES" >&2; exit 1; }
    PER[$port]=$(awk -v u=$(( u1 - u0 )) -v r=$(( r1 - r0 )) -v n="$ENTRIES" 'BEGIN { printf "%.1f %.1f", u / n, r / n }')
done
read -r ua ra <<<"${PER[7213]}"; read -r ub rb <<<"${PER[7214]}"
echo "PEL of $ENTRIES entries, bytes per pending entry: rill used_memory $ua RSS $ra | redis used_memory $ub RSS $rb"
awk -v a="$ua" -v b="$ub" -v c="$ra" -v d="$rb" 'BEGIN { printf "ratio rill/redis: used_memory %.2f  RSS %.2f\n", a/b, c/d }'

run() { # port test -> rps
    local cmd
    case $2 in
        xautoclaim) cmd=(XAUTOCLAIM pel g c2 0 0-0 COUNT 100 JUSTID) ;;
        xautoclaim_full) cmd=(XAUTOCLAIM pel g c2 0 0-0 COUNT 100) ;;
        xclaim) cmd=(XCLAIM pel g c3 0 "__rand_int__-1" JUSTID) ;;
    esac
    taskset -c 1 redis-benchmark -p "$1" -n 20000 -c 10 -r "$ENTRIES" --csv "${cmd[@]}" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2 }'
}
: >"$WORK/results"
for test in xautoclaim xautoclaim_full xclaim; do
    for r in $(seq "$ROUNDS"); do
        if (( r % 2 )); then order="7213 7214"; else order="7214 7213"; fi
        for port in $order; do echo "$test $r $port $(run "$port" "$test")" >>"$WORK/results"; done
    done
done
ratio_table "$WORK/results" 7213 7214 ops/s
