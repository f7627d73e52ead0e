#!/usr/bin/env bash
# Scale, measured: how rill's figures grow with the number of connections and with the size of
# a stream, rill and Redis side by side (servers on CPU 0, the load generator on CPU 1, the order
# alternating per round), drawn on the same axes into PNGs.
#
# Connections (1 .. 10,000; no persistence, as bench/harness/compare.sh):
#   xadd      XADD of a market tick, each connection one request in flight: ops/s and p99
#   ack       XREADGROUP COUNT 10 + XACK, one consumer per connection: entries/s
# Entries (a stream of 1k .. 100M ticks; appendonly yes, appendfsync everysec; each size on
# fresh servers):
#   fill      pipelined XADD (one connection, 256 in flight) that builds the stream: entries/s
#   memory    used_memory per entry once it is built
#   restart   kill -9 and start again on the data as the fill left it (each server's own log
#             rewrites during the fill included): ms until XLEN answers N
#   rewritten the same after BGREWRITEAOF, with the data dir's bytes per entry after it
#   xadd      XADD, 50 connections one request in flight, onto the stream of N (trimmed back to
#             N after each run, untimed): ops/s
#   ack       10 consumers read the stream's last min(N, 1M) entries with XREADGROUP COUNT 10 +
#             XACK (read again from the same ID until 200k entries are read): entries/s
# Prints a table of medians and per-round ratios, writes it to scale-curve.csv and draws
# scale-connections.png and scale-entries.png (matplotlib in a venv in the bench cache).
#
#   bench/scale-curve.sh [--connections "1 10 100 1000 10000"]
#                        [--sizes "1000 10000 100000 1000000 10000000 100000000"]
#                        [--rounds R] [--only connections|entries] [--redis PATH] [--out DIR]
#
# --out defaults to bench/results/. The 100M size needs about 10 GB of memory for both servers
# and ~20 GB of scratch disk, and takes most of the run (about an hour in all on 2 cores; the
# restart of Redis from an AOF of 100M XADDs alone takes minutes). 10,000 connections need an
# open-files limit of 10,100 or more (the script raises the soft limit to the hard one).
set -euo pipefail
CONNS="1 10 100 1000 10000"
SIZES="1000 10000 100000 1000000 10000000 100000000"
ROUNDS=3
ONLY="connections entries"
REDIS=${REDIS:-/usr/bin/redis-server}
OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --connections) CONNS=$2; shift 2 ;;
        --sizes) SIZES=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
source "$(dirname "$0")/lib.sh"
need_loadgen
OUT=${OUT:-$ROOT/bench/results}
mkdir -p "$OUT"
MAXC=0
for c in $CONNS; do ((c > MAXC)) && MAXC=$c; done
ulimit -n "$(ulimit -Hn)"
(($(ulimit -n) >= MAXC + 100)) || { echo "open-files limit $(ulimit -n) is below $((MAXC + 100))" >&2; exit 2; }

TICK=(symbol NVDA.OQ price 1187.2500 seq __rand_int__ ts 1700000000000)
SERVERS=(rill redis)
declare -A PORT=([rill]=$(free_port) [redis]=$(free_port)) PID=() DIR=() BASE=()
RESULTS=$WORK/results
: >"$RESULTS"

launch() { # server dir args... : start it pinned to CPU 0 in the background (PID[server])
    local s=$1 dir=$2 cmd
    shift 2
    mkdir -p "$dir"
    DIR[$s]=$dir
    case $s in
        rill) cmd=("$RILL" --port "${PORT[rill]}" --bind 127.0.0.1 --dir "$dir" --save '' "$@") ;;
        redis) cmd=("$REDIS" --port "${PORT[redis]}" --bind 127.0.0.1 --dir "$dir" --save '' "$@") ;;
    esac
    (cd "$dir" && exec taskset -c 0 "${cmd[@]}" >>"$WORK/$s.log" 2>&1) &
    PID[$s]=$!
    PIDS+=($!)
}
ping_wait() { # server
    for _ in $(seq 600); do redis-cli -p "${PORT[$1]}" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.1; done
    echo "$1 did not start" >&2; tail -20 "$WORK/$1.log" >&2; exit 1
}
stop() { # server [signal]
    kill "-${2:-TERM}" "${PID[$1]}" 2>/dev/null || true
    wait "${PID[$1]}" 2>/dev/null || true
}
cli() { local s=$1; shift; redis-cli -p "${PORT[$s]}" "$@"; }
info_field() { cli "$1" info "$2" | tr -d '\r' | awk -F: -v k="$3" '$1==k{print $2}'; }
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; } # key "RESULT a=1 b=2" -> value
lg() { taskset -c 1 "$LOADGEN" "$@"; }
record() { echo "$*" >>"$RESULTS"; } # axis x measure round server value
order() { if (($1 % 2)); then echo rill redis; else echo redis rill; fi; }
wanted() { [[ " $ONLY " == *" $1 "* ]]; }

# ---------------------------------------------------------------- connections ----
if wanted connections; then
    for s in "${SERVERS[@]}"; do
        launch "$s" "$WORK/c-$s" --appendonly no --maxclients $((MAXC + 100))
        ping_wait "$s"
    done
    for c in $CONNS; do
        requests=$((c * 20 > 100000 ? c * 20 : 100000))
        entries=$((c * 50 > 200000 ? c * 50 : 200000))
        for r in $(seq "$ROUNDS"); do
            for s in $(order "$r"); do
                port=${PORT[$s]}
                res=$(lg cmd -p "$port" -c "$c" -n "$requests" -P 1 -r 1000000 -- XADD scale:x '*' "${TICK[@]}")
                [[ $(kv errors "$res") == 0 ]] || { echo "$s xadd: $res" >&2; exit 1; }
                record connections "$c" xadd "$r" "$s" "$(kv ops "$res")"
                record connections "$c" xadd_p99_ms "$r" "$s" "$(kv p99_ms "$res")"
                cli "$s" DEL scale:x >/dev/null
                lg fill -p "$port" --key scale:a -n "$entries" >/dev/null
                res=$(lg ack -p "$port" --key scale:a --group g -n "$entries" -c "$c" --batch 10)
                [[ $(kv acked "$res") == "$entries" ]] || { echo "$s ack: $res" >&2; exit 1; }
                record connections "$c" ack "$r" "$s" "$(kv ops "$res")"
                cli "$s" DEL scale:a >/dev/null
            done
        done
        echo "connections: $c measured" >&2
    done
    for s in "${SERVERS[@]}"; do stop "$s"; done
fi

# -------------------------------------------------------------------- entries ----
# Time from the start command until XLEN answers N, in MS (not a function's output: the server
# it starts must be this shell's child).
restart() { # server n
    local s=$1 n=$2 res
    stop "$s" KILL
    launch "$s" "${DIR[$s]}" --appendonly yes --appendfsync everysec
    res=$(lg waitlen -p "${PORT[$s]}" --key scale:s -n "$n" --timeout 3600) || { echo "$s restart: $res" >&2; exit 1; }
    MS=$(kv ms "$res")
}
rewrite_idle() { # server: until no log rewrite runs or waits
    until [[ $(info_field "$1" persistence aof_rewrite_in_progress) == 0 &&
        $(info_field "$1" persistence aof_rewrite_scheduled) != 1 ]]; do sleep 0.2; done
}

if wanted entries; then
    for n in $SIZES; do
        for s in "${SERVERS[@]}"; do
            rm -rf "$WORK/e-$s"
            launch "$s" "$WORK/e-$s" --appendonly yes --appendfsync everysec
            ping_wait "$s"
            BASE[$s]=$(info_field "$s" memory used_memory)
            res=$(lg fill -p "${PORT[$s]}" --key scale:s -n "$n" -P 256 --explicit-ids)
            record entries "$n" fill 1 "$s" "$(kv ops "$res")"
            [[ $(cli "$s" XLEN scale:s) == "$n" ]] || { echo "$s: XLEN is not $n after the fill" >&2; exit 1; }
        done
        # appendfsync everysec; and what a log rewrite during the fill held is given back
        sleep 2
        for s in "${SERVERS[@]}"; do
            rewrite_idle "$s"
            record entries "$n" memory 1 "$s" $((($(info_field "$s" memory used_memory) - BASE[$s]) / n))
        done
        for s in "${SERVERS[@]}"; do
            restart "$s" "$n"
            record entries "$n" restart 1 "$s" "$MS"
            rewrite_idle "$s"
            cli "$s" BGREWRITEAOF >/dev/null
            sleep 0.5
            rewrite_idle "$s"
            record entries "$n" disk 1 "$s" $(($(du -sb "${DIR[$s]}" | cut -f1) / n))
            restart "$s" "$n"
            record entries "$n" rewritten 1 "$s" "$MS"
        done
        # Reads: the last min(n, 1M) entries (IDs are 1-1 .. n-1), again until 200k are read.
        m=$((n < 1000000 ? n : 1000000))
        start="$((n - m))-1"
        [[ $n == "$m" ]] && start=0
        passes=$(((200000 + m - 1) / m))
        for r in $(seq "$ROUNDS"); do
            for s in $(order "$r"); do
                res=$(lg ack -p "${PORT[$s]}" --key scale:s --group g -n "$m" --start "$start" --passes "$passes" -c 10 --batch 10)
                [[ $(kv acked "$res") == $((m * passes)) ]] || { echo "$s ack: $res" >&2; exit 1; }
                record entries "$n" ack "$r" "$s" "$(kv ops "$res")"
                cli "$s" XGROUP DESTROY scale:s g >/dev/null
            done
        done
        for r in $(seq "$ROUNDS"); do
            for s in $(order "$r"); do
                res=$(lg cmd -p "${PORT[$s]}" -c 50 -n 100000 -P 1 -r 1000000 -- XADD scale:s '*' "${TICK[@]}")
                [[ $(kv errors "$res") == 0 ]] || { echo "$s xadd: $res" >&2; exit 1; }
                record entries "$n" xadd "$r" "$s" "$(kv ops "$res")"
                cli "$s" XTRIM scale:s MAXLEN = "$n" >/dev/null
            done
        done
        for s in "${SERVERS[@]}"; do stop "$s"; done
        rm -rf "$WORK/e-rill" "$WORK/e-redis"
        echo "entries: $n measured" >&2
    done
fi

python3 - "$RESULTS" "$OUT/scale-curve.csv" <<'PY'
import sys, statistics, csv
rows = {}
for line in open(sys.argv[1]):
    axis, x, measure, r, server, v = line.split()
    rows.setdefault((axis, int(x), measure), {}).setdefault(r, {})[server] = float(v)
units = {"xadd": "ops/s", "xadd_p99_ms": "ms", "ack": "entries/s", "fill": "entries/s", "memory": "B/entry",
         "restart": "ms", "rewritten": "ms", "disk": "B/entry"}
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["axis", "x", "measure", "unit", "rill", "redis", "ratio", "ratio_min", "ratio_max"])
    print(f"{'axis':11} {'x':>9} {'measure':12} {'rill':>12} {'redis':>12}  rill/redis (per round)")
    for (axis, x, m), rounds in sorted(rows.items()):
        pairs = [(v["rill"], v["redis"]) for v in rounds.values() if "rill" in v and "redis" in v]
        ratios = sorted(a / b for a, b in pairs if b)
        a = statistics.median(p for p, _ in pairs)
        b = statistics.median(q for _, q in pairs)
        ratio = statistics.median(ratios)
        w.writerow([axis, x, m, units[m], a, b, f"{ratio:.3f}", f"{ratios[0]:.3f}", f"{ratios[-1]:.3f}"])
        print(f"{axis:11} {x:9} {m:12} {a:12.1f} {b:12.1f}  {ratio:.2f} ({ratios[0]:.2f}..{ratios[-1]:.2f}) {units[m]}")
PY

need_plot_python
"$PLOT_PYTHON" - "$OUT" "$(date -u +%F)" "$("$REDIS" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')" <<'PY'
import sys, csv, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, day, version = sys.argv[1:4]
# A build of Redis' unstable branch calls itself 255.255.255.
version = "unstable (built from source)" if version == "255.255.255" else version
rows = list(csv.DictReader(open(os.path.join(out, "scale-curve.csv"))))
panels = {
    "connections": [("xadd", "XADD, one in flight per connection (ops/s)"),
                    ("xadd_p99_ms", "XADD p99 latency (ms)"),
                    ("ack", "XREADGROUP COUNT 10 + XACK, a consumer each (entries/s)")],
    "entries": [("memory", "used_memory per entry (bytes)"),
                ("fill", "pipelined XADD building the stream (entries/s)"),
                ("xadd", "XADD onto it, 50 connections one in flight (ops/s)"),
                ("ack", "XREADGROUP COUNT 10 + XACK, 10 consumers (entries/s)"),
                ("restart", "restart after kill -9: solid as left, dashed after a rewrite (ms)"),
                ("disk", "data dir after BGREWRITEAOF (bytes per entry)")],
}
xlabel = {"connections": "connections", "entries": "entries in the stream"}
for axis, measures in panels.items():
    if not any(r["axis"] == axis for r in rows):
        continue
    cols = 3
    lines = (len(measures) + cols - 1) // cols
    fig, axes = plt.subplots(lines, cols, figsize=(5 * cols, 4.2 * lines), squeeze=False)
    for ax, (m, title) in zip(axes.flat, measures):
        series = [(m, "-")] + ([("rewritten", "--")] if m == "restart" else [])
        for measure, style in series:
            pts = sorted((int(r["x"]), float(r["rill"]), float(r["redis"])) for r in rows
                         if r["axis"] == axis and r["measure"] == measure)
            xs = [p[0] for p in pts]
            tag = " (rewritten)" if measure == "rewritten" else ""
            ax.plot(xs, [p[1] for p in pts], "o" + style, color="tab:blue", label="rill" + tag)
            ax.plot(xs, [p[2] for p in pts], "s" + style, color="tab:red", label=f"Redis {version}" + tag)
        ax.set_xscale("log")
        if m in ("restart", "xadd_p99_ms"):
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel[axis])
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(measures):]:
        ax.axis("off")
    fig.suptitle(f"rill and Redis {version} by {xlabel[axis]}, side by side on 2 cores ({day})")
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"scale-{axis}.png"), dpi=100)
PY
echo "wrote $OUT/scale-curve.csv and a plot per axis measured ($OUT/scale-connections.png, $OUT/scale-entries.png)"
