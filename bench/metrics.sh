#!/usr/bin/env bash
# What observability costs clients (issue 24's two goals):
#
# 1. Scrapes: client latency (redis-benchmark PING, 10 clients, one request in flight) with
#    `/metrics` scraped every second over 10k streams x 3 groups, against the same run without
#    scrapes; rounds alternate. Goal: p99 with scrapes <= 1.1x without.
# 2. Latency tracking: requests/s of SET and GET (50 clients, one in flight) with
#    `latency-tracking yes` (the default: a histogram per command) against `no`. Goal: <= 3 %.
#
#   bench/metrics.sh [--rounds R] [--requests N] [--only scrape|tracking]
#
# --requests: PINGs per p99 run (default 300000, about 3 s and so 3 scrapes; more gives a
# steadier p99, whose resolution in redis-benchmark is 8 us).
#
# The server is pinned to CPU 0, redis-benchmark and the scraper (curl) to CPU 1; the scraper
# runs at idle priority (`chrt -i`), standing for a Prometheus on another machine: reading 16 MB
# must not take redis-benchmark's core from it, or the benchmark measures its own delay.
set -euo pipefail
ROUNDS=3
REQUESTS=300000
ONLY=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        *) echo "usage: $0 [--rounds R] [--requests N] [--only scrape|tracking]" >&2; exit 2 ;;
    esac
done
source "$(dirname "$0")/lib.sh"
PORT=7231
HTTP=7232
start rill $PORT "$RILL" --port $PORT --dir "$WORK/rill" --save '' --appendonly no --metrics-port $HTTP

python3 - <<'PY' | taskset -c 1 redis-cli -p $PORT --pipe >/dev/null
import sys
out = sys.stdout
def cmd(*a):
    out.write(f"*{len(a)}\r\n" + "".join(f"${len(str(x))}\r\n{x}\r\n" for x in a))
for i in range(10000):
    k = f"orders:{i}"
    for _ in range(5):
        cmd("XADD", k, "*", "f", "v")
    for g in ("billing", "audit", "search"):
        cmd("XGROUP", "CREATE", k, g, "0")
    cmd("XREADGROUP", "GROUP", "billing", "c1", "COUNT", "2", "STREAMS", k, ">")
PY
echo "scrape size: $(curl -s "localhost:$HTTP/metrics" | wc -c) bytes, $(curl -s -o /dev/null -w '%{time_total}' "localhost:$HTTP/metrics") s"

p99() { # -> the p99 (ms) of a PING run
    taskset -c 1 redis-benchmark -p $PORT -t ping_mbulk -n "$REQUESTS" -c 10 2>/dev/null |
        awk '/latency summary/ { getline; getline; print $5 }'
}
: >"$WORK/scrape"
[[ $ONLY == tracking ]] || for r in $(seq "$ROUNDS"); do
    for mode in none every-second; do
        if [[ $mode == every-second ]]; then
            (while :; do chrt -i 0 taskset -c 1 curl -s -o /dev/null "localhost:$HTTP/metrics"; sleep 1; done) &
            SCRAPER=$!
        fi
        echo "$mode $r $(p99)" >>"$WORK/scrape"
        if [[ $mode == every-second ]]; then kill $SCRAPER; wait $SCRAPER 2>/dev/null || true; fi
    done
done

: >"$WORK/tracking"
[[ $ONLY == scrape ]] || for r in $(seq "$ROUNDS"); do
    for mode in yes no; do
        redis-cli -p $PORT CONFIG SET latency-tracking $mode >/dev/null
        for t in set get; do
            rps=$(taskset -c 1 redis-benchmark -p $PORT -t $t -n 400000 -c 50 -q 2>/dev/null |
                grep -o '[0-9.]* requests per second' | cut -d' ' -f1)
            echo "$mode $r $t $rps" >>"$WORK/tracking"
        done
    done
done
python3 - "$WORK/scrape" "$WORK/tracking" <<'PY'
import sys, statistics
scrape = [l.split() for l in open(sys.argv[1])]
base = {r: float(v) for m, r, v in scrape if m == "none"}
with_ = {r: float(v) for m, r, v in scrape if m == "every-second"}
ratios = [with_[r] / base[r] for r in base]
if ratios:
  print("PING p99 ms without scrapes:", " ".join(f"{base[r]:.3f}" for r in sorted(base)))
  print("PING p99 ms, a scrape a second:", " ".join(f"{with_[r]:.3f}" for r in sorted(with_)))
  print(f"ratio (goal <= 1.1): median {statistics.median(ratios):.2f}, range {min(ratios):.2f}..{max(ratios):.2f}")
tr = [l.split() for l in open(sys.argv[2])]
for t in ("set", "get"):
    yes = {r: float(v) for m, r, tt, v in tr if tt == t and m == "yes"}
    no = {r: float(v) for m, r, tt, v in tr if tt == t and m == "no"}
    cost = [1 - yes[r] / no[r] for r in yes]
    if cost:
      print(f"{t.upper()} latency-tracking cost (goal <= 3 %): median {100 * statistics.median(cost):.1f} %, "
          f"range {100 * min(cost):.1f}..{100 * max(cost):.1f} % ({statistics.median(yes.values()):.0f} vs {statistics.median(no.values()):.0f} req/s)")
PY
