#!/usr/bin/env bash
# XREADGROUP ... CLAIM over a PEL of N entries, rill vs a Redis that has CLAIM (8.4+; Debian's
# 7.0.15 and the 8.2.3 wheel do not), side by side (server on CPU 0, client on CPU 1), rounds
# alternating, reporting the median per-round ratio rill/redis.
#
#   bench/claim.sh [--entries N] [--rounds R] [--redis PATH]
#
# PATH defaults to a Redis source tree (8.4+, e.g. the newest unstable) built in
# /work/redis-src (`make -j2 BUILD_TLS=no`, ~70 s; it uses libc malloc, which matters for
# memory, not for this throughput test).
#
# Setup per server: N entries in one stream, all read by consumer c1 (a PEL of N entries),
# then a pause longer than min-idle. Workload (redis-benchmark, 10 clients):
#   claim100      XREADGROUP GROUP g cX COUNT 100 CLAIM 50 STREAMS pel >   claims the 100
#                 oldest idle entries (they become non-idle, so the next call takes the next
#                 100: the claim walks the whole PEL in delivery-time order)
set -euo pipefail
ENTRIES=1000000
ROUNDS=3
REDIS=${REDIS:-/work/redis-src/src/redis-server}
while [[ $# -gt 0 ]]; do
    case $1 in
        --entries) ENTRIES=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -x $REDIS ]] || { echo "no Redis with CLAIM at $REDIS (see the header)" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
start rill 7215 "$RILL" --port 7215 --dir "$WORK/rill" --save '' --appendonly no
start redis 7216 "$REDIS" --port 7216 --bind 127.0.0.1 --save '' --appendonly no

pel_fill_resp "$ENTRIES" >"$WORK/fill.resp"

for port in 7215 7216; do pel_fill "$port" "$WORK/fill.resp" "$ENTRIES"; done
sleep 0.2   # every entry is now idle longer than the 50 ms min-idle

run() { # port round -> rps
    taskset -c 1 redis-benchmark -p "$1" -n 5000 -c 10 --csv \
        XREADGROUP GROUP g "c$2" COUNT 100 CLAIM 50 STREAMS pel '>' 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2 }'
}
: >"$WORK/results"
# 5000 calls x 100 = 500k claims per run: with the default 1M entries the rounds never run out
# of claimable entries within a run (claimed ones become claimable again after 50 ms).
for r in $(seq "$ROUNDS"); do
    if (( r % 2 )); then order="7215 7216"; else order="7216 7215"; fi
    for port in $order; do echo "xreadgroup_claim $r $port $(run "$port" "$r")" >>"$WORK/results"; done
done
pending() { redis-cli -p "$1" XPENDING pel g | head -1; }
echo "PEL after: rill $(pending 7215), redis $(pending 7216) (both started at $ENTRIES)"
ratio_table "$WORK/results" 7215 7216 calls/s
