#!/usr/bin/env bash
# Replication, rill vs redis-server side by side, each a primary with one replica of its own
# kind on loopback, `appendonly yes`, `appendfsync everysec`:
#
#   full sync    a primary holding one stream of N entries with N/2 of them pending in a group
#                (bench/lib.sh's tick entries) gets a replica (REPLICAOF): the time until the
#                replica's link is up and it has caught up, the primary's peak memory meanwhile
#                (PSS of the primary and any child it forked, sampled every 20 ms: Redis' fork
#                counts once), and the longest PING another client waited on the primary
#                meanwhile (a client pinging in a loop)
#   pipelined    redis-benchmark XADD -P 16 against the primary with its replica attached, and
#                the replica's lag meanwhile: a probe key SET on the primary every 10 ms, the
#                time until the replica has it (p50, p99)
#
#   bench/replication.sh [--entries N] [--redis PATH] [--rounds R]
#
# Prints each round's figures and the median ratios rill/redis (time, RSS and latency: lower is
# better; XADD/s: higher is better). The newest Redis built from source is the anchor (--redis).
set -euo pipefail
ENTRIES=1000000
ROUNDS=2
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
pel_fill_resp "$ENTRIES" >"$WORK/fill.resp"
RESULTS="$WORK/results"

# One round for one kind: primary on port P, replica on P+1.
round() { # KIND BINARY PORT ROUND
    local kind=$1 bin=$2 port=$3 r=$4 rport=$(( $3 + 1 ))
    # No wait before a disk-less sync (Redis waits 5 s for more replicas by default; rill never
    # waits): the time measured is the sync's own.
    local common=(--bind 127.0.0.1 --save '' --appendonly yes --appendfsync everysec --repl-diskless-sync-delay 0)
    start "$kind-p$r" "$port" "$bin" --port "$port" --dir "$WORK/$kind-p$r" "${common[@]}"
    local ppid=${PIDS[-1]}
    pel_fill "$port" "$WORK/fill.resp" $(( ENTRIES / 2 ))
    # The replica on CPU 1 with the clients (the primary has CPU 0 to itself).
    mkdir -p "$WORK/$kind-r$r"
    (cd "$WORK/$kind-r$r" && exec taskset -c 1 "$bin" --port "$rport" --dir "$WORK/$kind-r$r" "${common[@]}" \
        >"$WORK/$kind-r$r.log" 2>&1) &
    PIDS+=($!)
    for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
    python3 - "$port" "$rport" "$ppid" "$kind" "$r" >>"$RESULTS" <<'PY'
import socket, subprocess, sys, threading, time
port, rport, ppid, kind, r = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def cmd(p, *args):
    return subprocess.run(["redis-cli", "-p", str(p), *args], capture_output=True, text=True).stdout
def info(p, field):
    for line in cmd(p, "INFO", "replication").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
done = threading.Event()
worst = [0.0]
def pinger():
    s = socket.create_connection(("127.0.0.1", port))
    while not done.is_set():
        t = time.perf_counter()
        s.sendall(b"PING\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            buf += s.recv(64)
        worst[0] = max(worst[0], time.perf_counter() - t)
        time.sleep(0.001)
peak = [0]
def pss(pid):
    # Proportional set size: a forked child's pages shared with its parent count once.
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
def sampler():
    while not done.is_set():
        kids = subprocess.run(["pgrep", "-P", ppid], capture_output=True, text=True).stdout.split()
        peak[0] = max(peak[0], pss(ppid) + sum(pss(k) for k in kids))
        time.sleep(0.02)
threads = [threading.Thread(target=pinger), threading.Thread(target=sampler)]
for t in threads:
    t.start()
time.sleep(0.3)
started = time.perf_counter()
cmd(rport, "REPLICAOF", "127.0.0.1", str(port))
while True:
    up = info(rport, "master_link_status") == "up"
    if up and info(port, "master_repl_offset") == info(rport, "slave_repl_offset"):
        break
    time.sleep(0.02)
took = time.perf_counter() - started
done.set()
for t in threads:
    t.join()
print(f"fullsync_secs {r} {kind} {took:.3f}")
print(f"fullsync_peak_pss_mb {r} {kind} {peak[0] / 1e6:.1f}")
print(f"fullsync_worst_ping_ms {r} {kind} {worst[0] * 1000:.2f}")
PY
    local rps
    # The replica's lag meanwhile: every 10 ms a probe key is set on the primary and read on
    # the replica until it is there (the time from the SET's reply to the first read that sees
    # it; reads 0.1 ms apart).
    python3 - "$port" "$rport" "$kind" "$r" "$WORK/lag-$kind-$r" <<'PY' &
import socket, sys, time
port, rport, kind, r, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def conn(p):
    s = socket.create_connection(("127.0.0.1", p)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); return s
def call(s, *args):
    s.sendall(("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)).encode())
    buf = b""
    while not buf.endswith(b"\r\n"):  # SET and EXISTS answer in one line
        buf += s.recv(4096)
    return buf
p, q = conn(port), conn(rport)
lags = []
deadline = time.time() + 60
time.sleep(0.2)
n = 0
while time.time() < deadline:
    n += 1
    key = "lagprobe:%d" % n
    call(p, "SET", key, "1")
    t = time.perf_counter()
    while call(q, "EXISTS", key) != b":1\r\n":
        time.sleep(0.0001)
    lags.append(time.perf_counter() - t)
    try:
        open(out + ".stop").close()
        break
    except OSError:
        pass
    time.sleep(0.01)
lags.sort()
with open(out, "w") as f:
    f.write("%f %f\n" % (lags[len(lags) // 2] * 1000, lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000))
PY
    local prober=$!
    rps=$(taskset -c 1 redis-benchmark -p "$port" -P 16 -n 1000000 -c 4 -q XADD bench '*' f v 2>/dev/null \
        | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) v = $i } END { print v }')
    touch "$WORK/lag-$kind-$r.stop"
    wait "$prober"
    echo "xadd_p16_with_replica $r $kind $rps" >>"$RESULTS"
    read -r lag50 lag99 <"$WORK/lag-$kind-$r"
    echo "replica_lag_p50_ms $r $kind $lag50" >>"$RESULTS"
    echo "replica_lag_p99_ms $r $kind $lag99" >>"$RESULTS"
    kill "${PIDS[-1]}" "$ppid" 2>/dev/null || true
    wait "${PIDS[-1]}" "$ppid" 2>/dev/null || true
}

for r in $(seq "$ROUNDS"); do
    round rill "$RILL" 7231 "$r"
    round redis "$REDIS" 7241 "$r"
done
cat "$RESULTS"
python3 - "$RESULTS" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    test, r, kind, value = line.split()
    v.setdefault(test, {}).setdefault(r, {})[kind] = float(value)
print()
for test, rounds in v.items():
    pairs = [(x["rill"], x["redis"]) for x in rounds.values() if "rill" in x and "redis" in x]
    ratios = sorted(a / b for a, b in pairs if b)
    if ratios:
        print(f"{test:26} rill {statistics.median(a for a, _ in pairs):10.2f}  redis {statistics.median(b for _, b in pairs):10.2f}"
              f"  rill/redis {statistics.median(ratios):.2f} ({ratios[0]:.2f}..{ratios[-1]:.2f})")
PY
