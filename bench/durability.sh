#!/usr/bin/env bash
# Durability side by side, rill vs redis-server, both with the append-only log on. Reports
# ratios rill/redis (medians of per-round ratios, rounds alternating rill,redis,redis,rill,...):
#
#   1. pipelined XADD throughput (redis-benchmark -P 16 -c 50) under appendfsync always
#      (goal: >= 2x Redis, from group commit) and everysec (goal: >= 1.3x);
#   2. restart time after kill -9 with N entries in the log (default 1M; everysec, written
#      with auto-aof-rewrite-percentage 0 on both so the log is replayed, not a snapshot),
#      from spawning the process until PING answers PONG and INFO persistence says loading:0
#      (goal: <= 0.5x Redis);
#   3. the kill test (crates/rill-server/examples/killtest.rs, the harness of
#      tests/it/durability.rs at bench size): ROUNDS kill -9 rounds per server and policy, with
#      every acknowledged XADD, delivery and XACK checked after each restart: PASS/FAIL.
#
#   bench/durability.sh [--quick] [--rounds N] [--kill-rounds N] [--entries N]
#                       [--only throughput,restart,kill] [--seed N] [--redis PATH]
#
# Full run ~12 min (throughput 5 rounds ~2 min, restart 5 rounds ~2 min, kill test 4 x 20
# rounds ~8 min); --quick ~1.5 min.
#
# RILL_BIN overrides the rill binary (RILL_BIN=/usr/bin/redis-server: Redis on both sides, a
# self-check of the harness; the ratios should then be ~1). REDIS overrides redis-server.
# Servers are pinned to CPU 0 and redis-benchmark to CPU 1 in parts 1-2; the kill test is not
# pinned. Ports 7221 (rill) and 7222 (redis) on 127.0.0.1; the kill test takes free ports.
# Data dirs are fresh per run, under one mktemp -d (so $TMPDIR picks the filesystem, which
# matters for fsync cost; the script prints it), deleted at exit. Builds --release first.
set -euo pipefail
ROUNDS=5 KILL_ROUNDS=20 ENTRIES=1000000 N_ALWAYS=300000 N_EVERYSEC=2000000 RESTART_ROUNDS=5
ONLY=throughput,restart,kill SEED=${RILL_KILLTEST_SEED:-$(date +%s%N)}
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) ROUNDS=1 KILL_ROUNDS=3 ENTRIES=300000 N_ALWAYS=150000 N_EVERYSEC=500000 RESTART_ROUNDS=3; shift ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --kill-rounds) KILL_ROUNDS=$2; shift 2 ;;
        --entries) ENTRIES=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: apt-get install redis-tools" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
(cd "$ROOT" && cargo build --release -q -p rill-server --example killtest)
KILLTEST="$ROOT/target/release/examples/killtest"
RILL=${RILL_BIN:-$RILL}
REDIS=${REDIS:-/usr/bin/redis-server}
PORT_RILL=7221 PORT_REDIS=7222
for port in $PORT_RILL $PORT_REDIS; do
    if ss -ltn "sport = :$port" | grep -q LISTEN; then echo "port $port is taken" >&2; exit 1; fi
done
: >"$WORK/results"; : >"$WORK/flags"

bin_of() { if [[ $1 == rill ]]; then echo "$RILL"; else echo "$REDIS"; fi; }
port_of() { if [[ $1 == rill ]]; then echo $PORT_RILL; else echo $PORT_REDIS; fi; }
order() { if (( $1 % 2 )); then echo "rill redis"; else echo "redis rill"; fi; }

SERVER_PID=
spawn() { # side dir fsync : start pinned to CPU 0 in dir (kept), don't wait; sets SERVER_PID
    local side=$1 dir=$2 fsync=$3 bin port
    bin=$(bin_of "$side"); port=$(port_of "$side")
    local args=(--port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly yes
                --appendfsync "$fsync" --auto-aof-rewrite-percentage 0)
    [[ $(basename "$bin") == *redis* ]] && args+=(--daemonize no --logfile '')
    mkdir -p "$dir"
    (cd "$dir" && exec taskset -c 0 "$bin" "${args[@]}" >>"$dir.log" 2>&1) &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
ready() { # side : wait until PONG and loading:0, print the ms it waited
    "$KILLTEST" wait-ready --port "$(port_of "$1")" --timeout-secs 300 || { tail -20 "$2.log" >&2; exit 1; }
}
kill9() { kill -9 "$1"; wait "$1" 2>/dev/null || true; }
xlen() { redis-cli -p "$(port_of "$1")" XLEN bench; }
aof_enabled() { redis-cli -p "$(port_of "$1")" INFO persistence | tr -d '\r' | grep -qx 'aof_enabled:1'; }
cpu_ticks() { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$1/stat"; } # incl. reaped children

fs=$(df -T "$WORK" | awk 'NR == 2 { print $2 " on " $1 " (" $7 ")" }')
echo "rill: $RILL"
echo "redis: $REDIS ($("$REDIS" --version | awk '{ print $3 }'))"
echo "data dirs under $WORK: $fs"

# --- 1. throughput -----------------------------------------------------------------------------
if [[ ,$ONLY, == *,throughput,* ]]; then
    for fsync in always everysec; do
        n=$N_ALWAYS; [[ $fsync == everysec ]] && n=$N_EVERYSEC
        for r in $(seq "$ROUNDS"); do
            for side in $(order "$r"); do
                dir="$WORK/tp-$side-$fsync-$r"
                spawn "$side" "$dir" "$fsync"; ready "$side" "$dir" >/dev/null
                aof_enabled "$side" || echo "xadd_$fsync $r $side log-off" >>"$WORK/flags"
                before=$(cpu_ticks "$SERVER_PID")
                rps=$(taskset -c 1 redis-benchmark -p "$(port_of "$side")" -P 16 -c 50 -n "$n" --csv \
                        XADD bench '*' symbol NVDA.OQ price 1187.2500 seq 42 2>/dev/null |
                      awk -F'","' 'NR > 1 { gsub(/"/, "", $2); print $2 }')
                after=$(cpu_ticks "$SERVER_PID")
                len=$(xlen "$side")
                (( len >= n )) || echo "WARNING: $side $fsync round $r: XLEN $len after $n XADDs" >&2
                us=$(awk -v d=$((after - before)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')
                echo "xadd_$fsync $r $side $rps $us" >>"$WORK/results"
                echo "  XADD appendfsync $fsync round $r $side: $rps ops/s, $us us CPU/op" >&2
                kill9 "$SERVER_PID"; rm -rf "$dir"
            done
        done
    done
fi

# --- 2. restart time ---------------------------------------------------------------------------
if [[ ,$ONLY, == *,restart,* ]]; then
    for r in $(seq "$RESTART_ROUNDS"); do
        for side in $(order "$r"); do
            dir="$WORK/rs-$side-$r"
            spawn "$side" "$dir" everysec; ready "$side" "$dir" >/dev/null
            taskset -c 1 redis-benchmark -p "$(port_of "$side")" -P 64 -c 8 -n "$ENTRIES" -r 1000000000 \
                XADD bench '*' symbol NVDA.OQ price 1187.2500 seq __rand_int__ >/dev/null 2>&1
            # redis-benchmark rounds -n up to whole pipelines: the log holds XLEN entries
            before=$(xlen "$side")
            (( before >= ENTRIES )) || { echo "$side: XLEN $before after filling $ENTRIES" >&2; exit 1; }
            sleep 2 # everysec: the last second reaches the file
            size=$(du -sk "$dir" | awk '{ print $1 }')
            kill9 "$SERVER_PID"
            t0=$(date +%s%N)
            spawn "$side" "$dir" everysec; ready "$side" "$dir" >/dev/null
            ms=$(( ($(date +%s%N) - t0) / 1000000 ))
            len=$(xlen "$side")
            if [[ $len != "$before" ]]; then
                echo "WARNING: $side lost entries: XLEN $len after restart, $before before" >&2
                echo "restart $r $side lost-entries" >>"$WORK/flags"
            fi
            echo "restart $r $side $ms $size" >>"$WORK/results"
            echo "  restart round $r $side: $ms ms ($before entries, data dir $((size / 1024)) MB, XLEN after $len)" >&2
            kill9 "$SERVER_PID"; rm -rf "$dir"
        done
    done
fi

# --- 3. kill test ------------------------------------------------------------------------------
if [[ ,$ONLY, == *,kill,* ]]; then
    for fsync in always everysec; do
        for side in rill redis; do
            echo "  kill test $side appendfsync $fsync, $KILL_ROUNDS rounds (seed $SEED) ..." >&2
            out="$WORK/kill-$side-$fsync.out"
            # --max-rate keeps 20 rounds' worth of log (replayed at every restart) moderate
            if "$KILLTEST" run --bin "$(bin_of "$side")" --fsync "$fsync" --rounds "$KILL_ROUNDS" \
                    --seed "$SEED" --max-rate 40000 --work "$WORK/kill-$side-$fsync" >"$out" 2>&1; then
                rc=0
            else
                rc=1; sed 's/^/    /' "$out" >&2
            fi
            rm -rf "$WORK/kill-$side-$fsync"
            echo "kill $fsync $side $(tail -1 "$out" | tr ' ' '_') $rc" >>"$WORK/results"
        done
    done
fi

echo "($((SECONDS / 60)) min $((SECONDS % 60)) s)"
python3 - "$WORK/results" "$WORK/flags" "$(basename "$RILL")" "$("$REDIS" --version | awk '{ print $3 }' | tr -d 'v=')" "$fs" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
flags = {}
for l in open(sys.argv[2]):
    kind, _, side, what = l.split()
    flags.setdefault(kind, set()).add(f"{side}: {what}")
rill_name, redis_version, fs = sys.argv[3], sys.argv[4], sys.argv[5]
print(f"\ndurability: {rill_name} (rill side) vs redis {redis_version}; data on {fs}")
print("ratios are rill/redis, median of per-round ratios (min..max)")
def paired(kind, col):
    by = {}
    for row in rows:
        if row[0] == kind:
            by.setdefault(row[1], {})[row[2]] = float(row[col])
    return [(v["rill"], v["redis"]) for v in by.values() if "rill" in v and "redis" in v and v["redis"] > 0]
def line(label, kind, pairs, unit, goal, better_high):
    if not pairs:
        return
    if kind in flags:
        print(f"{label:38} INVALID ({', '.join(sorted(flags[kind]))}): not a comparison of two logs")
        return
    ratios = sorted(a / b for a, b in pairs)
    med = statistics.median(ratios)
    met = med >= goal if better_high else med <= goal
    print(f"{label:38} rill {statistics.median(a for a, _ in pairs):10.0f} {unit:5} redis {statistics.median(b for _, b in pairs):10.0f} {unit:5}"
          f" ratio {med:5.2f} ({ratios[0]:.2f}..{ratios[-1]:.2f})  goal {'>=' if better_high else '<='} {goal}: {'met' if met else 'NOT met'}")
for fsync, goal in (("always", 2.0), ("everysec", 1.3)):
    line(f"XADD -P16 -c50 appendfsync {fsync}", f"xadd_{fsync}", paired(f"xadd_{fsync}", 3), "ops/s", goal, True)
    pairs = paired(f"xadd_{fsync}", 4)
    if pairs:
        effs = sorted(b / a for a, b in pairs if a > 0)
        print(f"{'':38} server CPU/op: rill {statistics.median(a for a, _ in pairs):.3f} us, redis {statistics.median(b for _, b in pairs):.3f} us (eff redis/rill {statistics.median(effs):.2f})")
line("restart after kill -9 (ms)", "restart", paired("restart", 3), "ms", 0.5, False)
for row in rows:
    if row[0] == "kill":
        print(f"kill test appendfsync {row[1]:8} {row[2]:5}: {row[3].replace('_', ' ')}")
PY
