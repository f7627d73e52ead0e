#!/usr/bin/env bash
# Single-ID lookups in a big PEL, by the PEL's size: one consumer holds every entry of a stream
# pending (N = 10k .. 10M, each size filled afresh), and redis-benchmark (10 clients, a random
# ID each request) runs
#   xclaim       XCLAIM pel g c3 0 <id> JUSTID            one ID claimed: found by its ID, moved
#   xautoclaim1  XAUTOCLAIM pel g c2 0 <id> COUNT 1 JUSTID  a scan started at one ID, one entry
# against rill and Redis side by side (servers on CPU 0, the client on CPU 1, the order
# alternating per round), with the memory per pending entry at each size. Prints a table of
# medians and ratios, writes it as CSV, and draws it (ops/s and bytes per entry against N, both
# servers on the same axes) into a PNG with matplotlib, installed on first use in a venv in the
# bench cache.
#
#   bench/pel-curve.sh [--sizes "10000 100000 1000000 10000000"] [--rounds R] [--requests N]
#                      [--redis PATH] [--out DIR]
#
# --out defaults to bench/results/ (pel-curve.csv, pel-curve.png). The 10M size needs about
# 4 GB of memory for both servers and ~2 GB of scratch disk for its fill file.
set -euo pipefail
SIZES="10000 100000 1000000 10000000"
ROUNDS=3
REQUESTS=20000
REDIS=${REDIS:-/usr/bin/redis-server}
OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --sizes) SIZES=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
source "$(dirname "$0")/lib.sh"
OUT=${OUT:-$ROOT/bench/results}
mkdir -p "$OUT"
start rill 7215 "$RILL" --port 7215 --dir "$WORK/rill" --save '' --appendonly no
start redis 7216 "$REDIS" --port 7216 --bind 127.0.0.1 --save '' --appendonly no

used_memory() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}'; }

run() { # port test n -> ops/s
    local cmd
    case $2 in
        xclaim) cmd=(XCLAIM pel g c3 0 "__rand_int__-1" JUSTID) ;;
        xautoclaim1) cmd=(XAUTOCLAIM pel g c2 0 "__rand_int__-1" COUNT 1 JUSTID) ;;
    esac
    taskset -c 1 redis-benchmark -p "$1" -n "$REQUESTS" -c 10 -r "$3" --csv "${cmd[@]}" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2 }'
}

: >"$WORK/results"
for n in $SIZES; do
    pel_fill_resp "$n" >"$WORK/fill.resp"
    for port in 7215 7216; do
        redis-cli -p "$port" flushall sync >/dev/null
        before=$(used_memory "$port")
        pel_fill "$port" "$WORK/fill.resp" "$n"
        pending=$(redis-cli -p "$port" XPENDING pel g | head -1)
        [[ $pending == "$n" ]] || { echo "port $port: pending=$pending, expected $n" >&2; exit 1; }
        echo "$n memory 1 $port $(( ($(used_memory "$port") - before) / n ))" >>"$WORK/results"
    done
    rm -f "$WORK/fill.resp"
    for test in xclaim xautoclaim1; do
        for r in $(seq "$ROUNDS"); do
            if ((r % 2)); then order="7215 7216"; else order="7216 7215"; fi
            for port in $order; do echo "$n $test $r $port $(run "$port" "$test" "$n")" >>"$WORK/results"; done
        done
    done
    echo "PEL of $n entries measured" >&2
done

python3 - "$WORK/results" "$OUT/pel-curve.csv" <<'PY'
import sys, statistics, csv
rows = {}
for line in open(sys.argv[1]):
    n, test, r, port, v = line.split()
    rows.setdefault((int(n), test), {}).setdefault(r, {})[port] = float(v)
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["entries", "measure", "rill", "redis", "ratio", "ratio_min", "ratio_max"])
    print(f"{'entries':>9} {'measure':12} {'rill':>10} {'redis':>10}  ratio (per round)")
    for (n, test), rounds in sorted(rows.items()):
        pairs = [(x["7215"], x["7216"]) for x in rounds.values()]
        ratios = sorted(a / b for a, b in pairs)
        a = statistics.median(p for p, _ in pairs)
        b = statistics.median(q for _, q in pairs)
        ratio = statistics.median(ratios)
        w.writerow([n, test, a, b, f"{ratio:.3f}", f"{ratios[0]:.3f}", f"{ratios[-1]:.3f}"])
        unit = "B/entry" if test == "memory" else "ops/s"
        print(f"{n:9} {test:12} {a:10.0f} {b:10.0f}  {ratio:.2f} ({ratios[0]:.2f}..{ratios[-1]:.2f}) {unit}")
PY

need_plot_python
"$PLOT_PYTHON" - "$OUT/pel-curve.csv" "$OUT/pel-curve.png" "$(date -u +%F)" <<'PY'
import sys, csv
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
measures = [("xclaim", "XCLAIM of one ID (ops/s)"), ("xautoclaim1", "XAUTOCLAIM from one ID, COUNT 1 (ops/s)"),
            ("memory", "used_memory per entry, stream and PEL (bytes)")]
fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
for ax, (m, title) in zip(axes, measures):
    pts = sorted((int(r["entries"]), float(r["rill"]), float(r["redis"])) for r in rows if r["measure"] == m)
    xs = [p[0] for p in pts]
    ax.plot(xs, [p[1] for p in pts], "o-", label="rill")
    ax.plot(xs, [p[2] for p in pts], "s--", label="Redis")
    ax.set_xscale("log")
    ax.set_xlabel("pending entries (one consumer)")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
fig.suptitle(f"Single-ID lookups over a big PEL, rill and Redis side by side ({sys.argv[3]})")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
PY
echo "wrote $OUT/pel-curve.csv and $OUT/pel-curve.png"
