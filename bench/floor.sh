#!/usr/bin/env bash
# Blocked fan-out latency against its floor: rill (default settings), rill in latency mode
# (`--busy-poll-us 1000`), Redis, and `fanout-floor` (bench/floor/), a stand-in server that does
# nothing but park readers and write them each XADD. The floor shows how much of the latency a
# server's own work accounts for: what it measures is the client, the kernel's loopback path and
# the wake-ups of idle CPUs, which no server that sleeps between requests avoids.
#
#   bench/floor.sh [--rounds R] [--secs S] [--redis PATH]
#
# Workload: the harness loadgen's `fanout` (1 producer XADDs 2000/s, 8 groups x 1 blocked
# consumer; bench/harness/README.md); servers on CPU 0, client on CPU 1, the four servers in
# a different order each round. PATH defaults to `redis-server` (Debian's 7.0.15). Prints per
# server the median over rounds of p50/p99/p999 and of its CPU use, and each one's ratios to
# Redis (medians of the per-round ratios).
set -euo pipefail
ROUNDS=5
SECS=4
REDIS=${REDIS:-redis-server}
source "$(dirname "$0")/lib.sh"
fanout_options "$@"
need_loadgen
CARGO_TARGET_DIR="$CACHE/floor-target" cargo build --release -q --manifest-path "$ROOT/bench/floor/Cargo.toml"
FLOOR=$CACHE/floor-target/release/fanout-floor

start rill 7223 "$RILL" --port 7223 --dir "$WORK/rill" --save '' --appendonly no
start latency 7224 "$RILL" --port 7224 --dir "$WORK/latency" --save '' --appendonly no --busy-poll-us 1000
start redis 7225 "$REDIS" --port 7225 --bind 127.0.0.1 --save '' --appendonly no
start floor 7226 "$FLOOR" --port 7226
NAMES=(rill latency redis floor)
declare -A PID
for i in 0 1 2 3; do PID[${NAMES[$i]}]=${PIDS[$i]}; done
port_of() { case $1 in rill) echo 7223 ;; latency) echo 7224 ;; redis) echo 7225 ;; floor) echo 7226 ;; esac; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

: >"$WORK/results"
for r in $(seq "$ROUNDS"); do
    # Rotate the order so each server runs in every position.
    order=("${NAMES[@]:$(( (r - 1) % 4 ))}" "${NAMES[@]:0:$(( (r - 1) % 4 ))}")
    for name in "${order[@]}"; do
        port=$(port_of "$name")
        redis-cli -p "$port" DEL fk >/dev/null
        before=$(ticks "${PID[$name]}")
        out=$(taskset -c 1 "$LOADGEN" fanout -p "$port" --key fk --group "g$r" -c 8 --rate 2000 \
            --duration "$SECS")
        cpu=$(awk -v t=$(( $(ticks "${PID[$name]}") - before )) -v hz="$HZ" -v s="$SECS" \
            'BEGIN { printf "%.1f", t / hz / s * 100 }')
        pct() { echo "$out" | grep -o "$1=[0-9.]*" | cut -d= -f2; }
        echo "$name $r $(pct p50_ms) $(pct p99_ms) $(pct p999_ms) $cpu" >>"$WORK/results"
    done
done
python3 - "$WORK/results" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for name, r, *v in rows:
    by.setdefault(name, {})[r] = [float(x) for x in v]
print(f"{'server':8} {'p50 ms':>7} {'p99 ms':>7} {'p999 ms':>7} {'cpu %':>6}   vs redis: p50  p99  p999")
for name in ("rill", "latency", "floor", "redis"):
    rounds = by[name]
    med = [statistics.median(v[i] for v in rounds.values()) for i in range(4)]
    ratio = [statistics.median(rounds[r][i] / by["redis"][r][i] for r in rounds) for i in range(3)]
    print(f"{name:8} {med[0]:7.3f} {med[1]:7.3f} {med[2]:7.3f} {med[3]:6.1f}"
          f"             {ratio[0]:.2f} {ratio[1]:.2f} {ratio[2]:.2f}")
PY
