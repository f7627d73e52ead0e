# shellcheck shell=bash
# Shared by the bench/ scripts: build rill-server --release, a scratch dir, and
# servers started pinned to CPU 0 that are killed (by pid) when the script exits. Source it.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(cd "$ROOT" && cargo build --release -q -p rill-server)
RILL="$ROOT/target/release/rill-server"
WORK=$(mktemp -d)
PIDS=()
# BENCH_KEEP_LOGS=DIR: the servers' logs are copied there before the scratch dir goes.
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -n ${BENCH_KEEP_LOGS:-} ]]; then mkdir -p "$BENCH_KEEP_LOGS" && cp "$WORK"/*.log "$BENCH_KEEP_LOGS"/ 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # pid -> utime+stime in clock ticks (all threads)

start() { # name port cmd... : start pinned to CPU 0, wait for PING
    local name=$1 port=$2; shift 2
    mkdir -p "$WORK/$name"
    (cd "$WORK/$name" && exec taskset -c 0 "$@" >"$WORK/$name.log" 2>&1) &
    PIDS+=($!)
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "$name did not start" >&2; cat "$WORK/$name.log" >&2; exit 1
}

# RESP for `redis-cli --pipe`: N tick entries in stream `pel` (IDs 1-1 .. N-1), then group `g`
# at 0 (bench/pel.sh, bench/claim.sh).
pel_fill_resp() { # N
    python3 - "$1" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout
def cmd(*args):
    out.write(f"*{len(args)}\r\n")
    for a in args:
        a = str(a)
        out.write(f"${len(a.encode())}\r\n{a}\r\n")
for i in range(1, n + 1):
    cmd("XADD", "pel", f"{i}-1", "symbol", "NVDA.OQ", "price", "1187.2500", "seq", i, "ts", 1732950000000 + i)
cmd("XGROUP", "CREATE", "pel", "g", "0")
PY
}

# Load that file into the server on PORT and read every entry into consumer c1's PEL.
pel_fill() { # PORT FILE N
    taskset -c 1 redis-cli -p "$1" --pipe <"$2" >/dev/null
    for _ in $(seq $(( ($3 + 9999) / 10000 ))); do
        taskset -c 1 redis-cli -p "$1" XREADGROUP GROUP g c1 COUNT 10000 STREAMS pel '>' >/dev/null
    done
}

# Summarise a results file of "test round port ops" lines: per test, the median ops/s of each
# server and the median per-round ratio A/B (bench/pel.sh, bench/claim.sh).
ratio_table() { # FILE PORT_A PORT_B UNIT
    python3 - "$@" <<'PY'
import sys, statistics
path, a, b, unit = sys.argv[1:5]
v = {}
for line in open(path):
    test, r, port, rps = line.split()
    v.setdefault(test, {}).setdefault(r, {})[port] = float(rps)
for test, rounds in v.items():
    pairs = [(x[a], x[b]) for x in rounds.values()]
    ratios = sorted(p / q for p, q in pairs)
    print(f"{test:16} rill {statistics.median(p for p, _ in pairs):9.0f} {unit}  redis {statistics.median(q for _, q in pairs):9.0f} {unit}"
          f"  ratio {statistics.median(ratios):.2f} ({ratios[0]:.2f}..{ratios[-1]:.2f})")
PY
}

# The harness's loadgen (bench/harness/loadgen), built on first use where that harness
# keeps it; sets LOADGEN (bench/neighbour.sh, bench/floor.sh).
CACHE=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rill-bench}
need_loadgen() {
    LOADGEN=${LOADGEN:-$CACHE/target/release/loadgen}
    if [[ ! -x $LOADGEN ]]; then
        CARGO_TARGET_DIR="$CACHE/target" cargo build --release -q \
            --manifest-path "$ROOT/bench/harness/loadgen/Cargo.toml"
    fi
}

# A Python with matplotlib for the scripts that draw their curves (bench/pel-curve.sh,
# bench/scale-curve.sh): a venv of its own in the bench cache, not the project's test venv,
# made on first use; sets PLOT_PYTHON.
need_plot_python() {
    local venv=$CACHE/plot-venv
    if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q 'matplotlib>=3.8,<4'
    fi
    PLOT_PYTHON=$venv/bin/python
}

# Options of the fan-out latency scripts: --rounds R, --secs S, --redis PATH; sets ROUNDS, SECS
# and REDIS (defaults as set before the call).
fanout_options() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --rounds) ROUNDS=$2; shift 2 ;;
            --secs) SECS=$2; shift 2 ;;
            --redis) REDIS=$2; shift 2 ;;
            *) echo "unknown option $1" >&2; exit 2 ;;
        esac
    done
}
