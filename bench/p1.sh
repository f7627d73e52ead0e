#!/usr/bin/env bash
# One request in flight against its floor: rill, Redis, and `reqresp-floor` (bench/floor/), a
# stand-in server that reads each request and writes a canned reply and does nothing else, once
# per I/O mechanism (epoll; tokio, rill's; io_uring with one receive per request; io_uring with
# multishot receives into provided buffers). The floors say what the mechanism alone costs per
# request, so the figures say how far each server is from it and whether another mechanism
# would move it.
#
#   bench/p1.sh [--rounds R] [--requests N] [--redis PATH] [--tests LIST]
#   bench/p1.sh --instructions [--requests N] [--redis PATH] [--command "CMD ARG..."] [--acl]
#
# redis-benchmark, 50 clients, no pipelining, tests `get` and `ping_mbulk` by default; servers
# on CPU 0, the client on CPU 1, a different order each round. Prints per server the median over
# rounds of requests/s and of server CPU µs per request (utime + stime from /proc), and the
# median per-round ratio of each to Redis' (for CPU, Redis' µs / the server's: above 1 is
# cheaper than Redis). PATH defaults to Debian's 7.0.15; the main anchor is the newest Redis.
#
# --instructions: instead, count the user-space instructions per request of rill, Redis and the
# tokio floor under valgrind's callgrind (repeatable, unlike time on a shared VM): two runs of
# N/5 and N GETs each, per request = difference / (4N/5), so start-up drops out. --command
# counts another command instead (redis-benchmark's syntax: `__rand_int__` for a random
# number; e.g. "XADD s * f v" or "XRANGE s - + COUNT 10" after the stream has entries, which
# the XADD runs leave behind only within one run: give a command that makes its own data).
# --acl: count rill as the default user and as a restricted one (`~key:* +@all -@dangerous`,
# so a --command must name keys under `key:`, e.g. "XADD key:s * f v") and print what the
# ACL check of each command costs the restricted user (the issue's goal: at most 2 %).
set -euo pipefail
ROUNDS=5
REQUESTS=400000
REDIS=${REDIS:-/usr/bin/redis-server}
TESTS="get,ping_mbulk"
INSTR=0
COMMAND=""
ACL=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        --tests) TESTS=$2; shift 2 ;;
        --instructions) INSTR=1; shift ;;
        --command) COMMAND=$2; shift 2 ;;
        --acl) ACL=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: apt-get install redis-tools" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
CARGO_TARGET_DIR="$CACHE/floor-target" cargo build --release -q --manifest-path "$ROOT/bench/floor/Cargo.toml"
FLOOR=$CACHE/floor-target/release/reqresp-floor

if ((INSTR)); then
    command -v valgrind >/dev/null || { echo "valgrind missing: apt-get install valgrind" >&2; exit 2; }
    ((REQUESTS > 50000)) && REQUESTS=50000
    count() { # name n cmd... -> instructions of the whole run
        local name=$1 n=$2 port pid auth=()
        shift 2
        [[ $name == rill-acl ]] && auth=(--user bench -a pw)
        port=$(free_port)
        valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$name.$n" "$@" --port "$port" \
            >"$WORK/cg.$name.$n.log" 2>&1 &
        pid=$!
        for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
        redis-cli -p "$port" set key:__rand_int__ xxx >/dev/null
        if [[ -n $COMMAND ]]; then
            read -ra words <<<"$COMMAND" # split on spaces, no glob (`*` is an XADD id)
            redis-benchmark -p "$port" "${auth[@]}" -c 50 -n "$n" -r 100000 -q "${words[@]}" >/dev/null 2>&1
        else
            redis-benchmark -p "$port" "${auth[@]}" -c 50 -n "$n" -t get -q >/dev/null 2>&1
        fi
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        # The whole run's instructions, and (rill) those of its ACL checks: the latter's
        # count per request does not vary with how requests happen to batch.
        echo "$(awk '/^summary:/ { print $2 }' "$WORK/cg.$name.$n")" \
            "$(callgrind_annotate --inclusive=yes --threshold=100 "$WORK/cg.$name.$n" 2>/dev/null |
                awk '/dispatch::acl_check \[/ { gsub(",", "", $1); print $1; exit } END { print 0 }' | head -1)"
    }
    small=$((REQUESTS / 5))
    servers=${P1_SERVERS:-rill redis floor}
    ((ACL)) && servers="rill rill-acl"
    declare -A per acl
    for name in $servers; do
        case $name in
            rill) cmd=("$RILL" --dir "$WORK" --save '' --appendonly no) ;;
            rill-acl) cmd=("$RILL" --dir "$WORK" --save '' --appendonly no
                --user bench on '>pw' '~key:*' '+@all' '-@dangerous') ;;
            redis) cmd=("$REDIS" --bind 127.0.0.1 --save '' --appendonly no) ;;
            floor) cmd=("$FLOOR" --io tokio) ;;
        esac
        read -r a acl_a < <(count "$name" "$small" "${cmd[@]}")
        read -r b acl_b < <(count "$name" "$REQUESTS" "${cmd[@]}")
        per[$name]=$(((b - a) / (REQUESTS - small)))
        acl[$name]=$(((acl_b - acl_a) / (REQUESTS - small)))
        echo "$name: ${per[$name]} user-space instructions per ${COMMAND:-GET} (one in flight, 50 clients)"
    done
    if ((ACL)); then
        # The whole runs' difference moves by ±2 % with the batching alone; the checks' own
        # count does not.
        awk -v d="${acl[rill]}" -v r="${acl[rill-acl]}" -v all="${per[rill]}" \
            'BEGIN { printf "ACL check per request: %d instructions as the default user, %d as a restricted one: %+d (%+.1f %% of the default user'"'"'s request)\n", d, r, r - d, (r - d) * 100 / all }'
    fi
    exit 0
fi

start rill 7231 "$RILL" --port 7231 --dir "$WORK/rill" --save '' --appendonly no
start redis 7232 "$REDIS" --port 7232 --bind 127.0.0.1 --save '' --appendonly no
start epoll 7233 "$FLOOR" --port 7233 --io epoll
start tokio 7234 "$FLOOR" --port 7234 --io tokio
start uring 7235 "$FLOOR" --port 7235 --io uring
start uring-multi 7236 "$FLOOR" --port 7236 --io uring-multi
NAMES=(rill redis epoll tokio uring uring-multi)
declare -A PID PORT
for i in "${!NAMES[@]}"; do
    PID[${NAMES[$i]}]=${PIDS[$i]}
    PORT[${NAMES[$i]}]=$((7231 + i))
done
redis-cli -p 7231 set key:__rand_int__ xxx >/dev/null
redis-cli -p 7232 set key:__rand_int__ xxx >/dev/null

: >"$WORK/results"
n=${#NAMES[@]}
for r in $(seq "$ROUNDS"); do
    # Rotate the order so each server runs in every position.
    s=$(((r - 1) % n))
    for name in "${NAMES[@]:$s}" "${NAMES[@]:0:$s}"; do
        for t in ${TESTS//,/ }; do
            before=$(cpu_ticks "${PID[$name]}")
            rps=$(taskset -c 1 redis-benchmark -p "${PORT[$name]}" -c 50 -n "$REQUESTS" -t "$t" --csv 2>/dev/null |
                awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2; exit }')
            after=$(cpu_ticks "${PID[$name]}")
            us=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$REQUESTS" \
                'BEGIN { printf "%.3f", t / hz / n * 1e6 }')
            echo "$t $name $r $rps $us" >>"$WORK/results"
        done
    done
done
python3 - "$WORK/results" <<'PY'
import sys, statistics
by = {}
for t, name, r, rps, us in (l.split() for l in open(sys.argv[1])):
    by.setdefault(t, {}).setdefault(name, {})[r] = (float(rps), float(us))
for t, servers in by.items():
    print(f"{t}: {'server':12} {'req/s':>9} {'CPU µs/req':>10}   vs redis: req/s  CPU efficiency")
    redis = servers["redis"]
    for name, rounds in servers.items():
        rps = statistics.median(v[0] for v in rounds.values())
        us = statistics.median(v[1] for v in rounds.values())
        rr = statistics.median(rounds[r][0] / redis[r][0] for r in rounds)
        eff = statistics.median(redis[r][1] / rounds[r][1] for r in rounds)
        print(f"{'':5}{name:12} {rps:9.0f} {us:10.2f}             {rr:5.2f}  {eff:5.2f}")
PY
