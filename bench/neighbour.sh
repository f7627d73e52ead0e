#!/usr/bin/env bash
# Blocked fan-out latency with a neighbour on the server's core: rill vs Redis, side by side
# (server on CPU 0, client on CPU 1), each measured alone and with an idle-priority
# (`SCHED_IDLE`) busy loop pinned to CPU 0, rounds alternating. The neighbour stands for
# anything else that may be runnable on a production server's core; at idle priority it should
# cost a server nothing, and a server that hands it the core (as rill's poller once did with
# `sched_yield`) makes requests wait for the next scheduler tick: p99 in milliseconds.
#
#   bench/neighbour.sh [--rounds R] [--secs S] [--redis PATH]
#
# Workload: the harness loadgen's `fanout` (1 producer XADDs 2000/s, 8 groups x 1 blocked
# consumer; bench/harness/README.md). PATH defaults to `redis-server` (Debian's 7.0.15).
# Prints per server and setting the median p50/p99/p999 over rounds, and rill/redis ratios.
set -euo pipefail
ROUNDS=3
SECS=4
REDIS=${REDIS:-redis-server}
source "$(dirname "$0")/lib.sh"
fanout_options "$@"
need_loadgen
start rill 7217 "$RILL" --port 7217 --dir "$WORK/rill" --save '' --appendonly no
start redis 7218 "$REDIS" --port 7218 --bind 127.0.0.1 --save '' --appendonly no

spin() { chrt -i 0 taskset -c 0 bash -c 'while :; do :; done' & SPIN=$!; PIDS+=("$SPIN"); }
: >"$WORK/results"
for r in $(seq "$ROUNDS"); do
    for setting in alone neighbour; do
        if (( r % 2 )); then order="7217 7218"; else order="7218 7217"; fi
        [[ $setting == neighbour ]] && spin
        for port in $order; do
            redis-cli -p "$port" DEL fk >/dev/null
            out=$(taskset -c 1 "$LOADGEN" fanout -p "$port" --key fk --group "g$r$setting" -c 8 \
                --rate 2000 --duration "$SECS")
            pct() { echo "$out" | grep -o "$1=[0-9.]*" | cut -d= -f2; }
            echo "$setting $r $port $(pct p50_ms) $(pct p99_ms) $(pct p999_ms)" >>"$WORK/results"
        done
        [[ $setting == neighbour ]] && { kill "$SPIN"; wait "$SPIN" 2>/dev/null || true; }
    done
done
python3 - "$WORK/results" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
for setting in ("alone", "neighbour"):
    med = {}
    for port, name in (("7217", "rill"), ("7218", "redis")):
        v = [r for r in rows if r[0] == setting and r[2] == port]
        med[name] = [statistics.median(float(r[i]) for r in v) for i in (3, 4, 5)]
    ratio = [a / b for a, b in zip(med["rill"], med["redis"])]
    print(f"{setting:10} rill p50/p99/p999 ms {'/'.join(f'{x:.3f}' for x in med['rill'])}"
          f"  redis {'/'.join(f'{x:.3f}' for x in med['redis'])}"
          f"  rill/redis {'/'.join(f'{x:.2f}' for x in ratio)}")
PY
