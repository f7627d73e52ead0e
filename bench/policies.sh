#!/usr/bin/env bash
# The reliable-consumer benchmark of issue 23 (group policies): rill enforcing the group's policy
# vs Redis running rill-worker's client-side loop, side by side in one run.
#
#   bench/policies.sh [--quick] [--redis PATH] [--rounds R] [--secs S] [--rate N] [--low-rate N]
#                     [--kill-every S] [--ackwait MS] [--sweep MS] [--pel N] [--skip-pel]
#
# Load (crates/rill-worker/examples/reliable.rs, `run`): one producer XADDs at a fixed rate (1 %
# poison entries, whose handler always asks for a retry; MAXDELIVER / delivery limit 5), 4 worker
# PROCESSES, each one rill-worker `Worker` (batch 100, 64 handlers, BLOCK 100 ms, no-op handler
# that appends one line per call to its own file with one write(2)). Every --kill-every seconds
# one worker process is killed with SIGKILL (what it had read, queued or was handling stays in
# its PEL, acks on the wire may or may not land) and a new process replaces it under a NEW
# consumer name (a new pod: nothing of the dead one's history is read back by name). Modes:
#   rill-policy      rill, `RILL.GROUP SET {rel} g MAXDELIVER 5 ACKWAIT <ackwait> DEADLETTER
#                    {rel}:dlq` (set by the workers, ServerPolicyMode::Set): workers read `>`,
#                    XACK, RILL.NACK the poison; the server hands back and dead-letters.
#   rill-close       rill-policy plus `RELEASEONCLOSE 1`: a killed worker's entries are handed
#                    back when the server sees its connections close, not at ACKWAIT.
#   redis            Redis, rill-worker's client-side loop as it runs there by default: on 8.4+
#                    XREADGROUP ... CLAIM <min-idle> + XNACK FAIL; client dead letters (MULTI
#                    XADD + XACK).
#   redis-autoclaim  Redis, FeatureMode::Legacy: XAUTOCLAIM sweep every --sweep ms per worker
#                    (rill-worker's default 5000), no XNACK (only run when Redis has CLAIM,
#                    otherwise `redis` is this loop already).
#   rill-clientloop  rill without a policy, the same client-side loop as `redis` (a reference:
#                    what the policy itself changes).
# Comparable settings: rill's ACKWAIT and rill-worker's min-idle (claim / XAUTOCLAIM min idle
# time) are the same value, --ackwait (1000 ms).
# Two load levels per mode: --rate (default 400000/s, above what 4 workers sharing one core
# handle since their acks are batched, ~140k/s: the handled rate is the capacity) and
# --low-rate (20000/s, below it: every mode does the same work, so server CPU per entry
# compares like with like).
# Figures per run: offered and handled entries/s (handler calls returning Ok in the measured
# window), server CPU per handled entry (utime+stime of the server process over the window),
# client CPU per entry, run-queue wait of the server and of the clients (schedstat: the box is
# shared), death -> handled again (for each good entry a killed worker held per XPENDING after a
# SIGSTOP froze it, 20 ms before the SIGKILL: time to the next handler call on it, p50/p99/max; and that call's time minus the
# entry's deadline, its last delivery + ACKWAIT, which isolates how late each mechanism acts), the
# checks after a drain (PEL empty, everything delivered): every good entry handled at least once
# (duplicates counted) or dead-lettered, every poison entry exactly once in the DLQ.
#
# Hand-back cost (`reliable pel`): N (1M) entries delivered to one consumer and never acked.
# rill: once the last delivery is older than ACKWAIT, `RILL.GROUP SET ... ACKWAIT` arms the
# timer with all N deadlines past: time and server CPU until `handed-back` reaches N (the timer,
# no client), then a `>` reader (COUNT 1000) takes all N. Redis: XAUTOCLAIM (COUNT 1000, min
# idle ACKWAIT) over the same PEL, and on 8.4+ XREADGROUP ... CLAIM (COUNT 1000).
#
# Server pinned to CPU 0, every client process to CPU 1 (bench/lib.sh). The client core is the
# bottleneck of the saturated runs (see the client CPU per entry): compare server CPU per entry
# too. Takes 30-50 min (3 rounds; each saturated run drains its backlog at the handled rate;
# --quick: 1 round of 10 s per run, 3-6 min). Results of a run: docs/POLICIES.md.
set -euo pipefail
QUICK=0
ROUNDS=""
SECS=""
RATE=400000
LOW_RATE=20000
KILL_EVERY=""
ACKWAIT=1000
SWEEP=5000
PEL=1000000
SKIP_PEL=0
REDIS=${REDIS:-}
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=1; shift ;;
        --redis) REDIS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --secs) SECS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --low-rate) LOW_RATE=$2; shift 2 ;;
        --kill-every) KILL_EVERY=$2; shift 2 ;;
        --ackwait) ACKWAIT=$2; shift 2 ;;
        --sweep) SWEEP=$2; shift 2 ;;
        --pel) PEL=$2; shift 2 ;;
        --skip-pel) SKIP_PEL=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if ((QUICK)); then
    ROUNDS=${ROUNDS:-1} SECS=${SECS:-10} KILL_EVERY=${KILL_EVERY:-2}
else
    ROUNDS=${ROUNDS:-3} SECS=${SECS:-30} KILL_EVERY=${KILL_EVERY:-3}
fi
# The newest Redis, built from source (Redis 8.x with CLAIM and XNACK), unless told otherwise.
if [[ -z $REDIS ]]; then
    REDIS=/work/redis-new/src/redis-server
    [[ -x $REDIS ]] || REDIS=/usr/bin/redis-server
fi
[[ -x $REDIS ]] || { echo "no Redis at $REDIS" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
(cd "$ROOT" && cargo build --release -q -p rill-worker --example reliable)
CLIENT="$ROOT/target/release/examples/reliable"

RILL_PORT=$(free_port)
REDIS_PORT=$(free_port)
start rill "$RILL_PORT" "$RILL" --port "$RILL_PORT" --bind 127.0.0.1 --dir "$WORK/rill" --save '' --appendonly no
RILL_PID=${PIDS[-1]}
start redis "$REDIS_PORT" "$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no
REDIS_PID=${PIDS[-1]}
version=$("$REDIS" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
MODES="rill-policy rill-close redis"
if redis-cli -p "$REDIS_PORT" COMMAND DOCS XREADGROUP | grep -cx CLAIM >/dev/null; then
    MODES="$MODES redis-autoclaim"
fi
MODES="$MODES rill-clientloop"
echo "rill vs redis $version ($REDIS); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "modes: $MODES; $ROUNDS round(s) of $SECS s per mode and rate, a SIGKILL every $KILL_EVERY s;"
echo "ACKWAIT = min-idle = $ACKWAIT ms, XAUTOCLAIM sweep every $SWEEP ms; rates $RATE/s and $LOW_RATE/s"

RESULTS="$WORK/results"
: >"$RESULTS"
run_one() { # MODE RATE ROUND
    local mode=$1 rate=$2 round=$3 port pid arg dir
    case $mode in
        rill-policy) port=$RILL_PORT pid=$RILL_PID arg=policy ;;
        rill-close) port=$RILL_PORT pid=$RILL_PID arg=policy-close ;;
        rill-clientloop) port=$RILL_PORT pid=$RILL_PID arg=detect ;;
        redis) port=$REDIS_PORT pid=$REDIS_PID arg=detect ;;
        redis-autoclaim) port=$REDIS_PORT pid=$REDIS_PID arg=legacy ;;
    esac
    dir="$WORK/run-$mode-$rate-$round"
    echo "== round $round, $mode, offered $rate/s"
    taskset -c 1 "$CLIENT" run "redis://127.0.0.1:$port/" --mode "$arg" --rate "$rate" --secs "$SECS" \
        --kill-every "$KILL_EVERY" --ackwait "$ACKWAIT" --sweep "$SWEEP" --server-pid "$pid" --dir "$dir" \
        >"$dir.out" 2>&1 || { cat "$dir.out"; echo "run failed" >&2; exit 1; }
    grep -v '^  kill \|^result ' "$dir.out"
    sed -n "s/^result /rate=$rate round=$round name=$mode /p" "$dir.out" >>"$RESULTS"
    rm -rf "$dir"
}
for r in $(seq "$ROUNDS"); do
    order=$MODES
    if ! ((r % 2)); then order=$(tr ' ' '\n' <<<"$MODES" | tac | tr '\n' ' '); fi
    for rate in "$RATE" "$LOW_RATE"; do
        for mode in $order; do run_one "$mode" "$rate" "$r"; done
    done
done

if ! ((SKIP_PEL)); then
    echo "== hand-backs over a $PEL-entry PEL (ACKWAIT / min idle $ACKWAIT ms)"
    taskset -c 1 "$CLIENT" pel "redis://127.0.0.1:$RILL_PORT/" --kind rill --entries "$PEL" --ackwait "$ACKWAIT" \
        --server-pid "$RILL_PID" | tee -a "$WORK/pel"
    taskset -c 1 "$CLIENT" pel "redis://127.0.0.1:$REDIS_PORT/" --kind redis --entries "$PEL" --ackwait "$ACKWAIT" \
        --server-pid "$REDIS_PID" | tee -a "$WORK/pel"
    grep '^result ' "$WORK/pel" | sed 's/^result //' >"$WORK/pelresults"
else
    : >"$WORK/pelresults"
fi

echo
echo "== summary (medians over rounds; ratios rill-policy or rill-close / the other)"
python3 - "$RESULTS" "$WORK/pelresults" "$RATE" "$LOW_RATE" <<'PY'
import sys, statistics
path, pelpath, rate, low = sys.argv[1:5]
rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(path) if line.strip()]
names = []
for r in rows:
    if r["name"] not in names:
        names.append(r["name"])
def sel(rt, name):
    return [r for r in rows if r["rate"] == rt and r["name"] == name]
def med(rt, name, key):
    # A round with nothing to measure (no good entry held by a victim) gives NaN: left out.
    xs = [x for x in (float(r[key]) for r in sel(rt, name)) if x == x]
    return statistics.median(xs) if xs else float("nan")
def paired(rt, a, b, key):
    """Median and range of the per-round ratios a/b."""
    by = {}
    for r in rows:
        if r["rate"] == rt and r["name"] in (a, b):
            by.setdefault(r["round"], {})[r["name"]] = float(r[key])
    xs = sorted(v[a] / v[b] for v in by.values() if a in v and b in v and v[b] > 0 and v[a] == v[a])
    if not xs:
        return "n/a"
    return f"{statistics.median(xs):.2f}x ({xs[0]:.2f}..{xs[-1]:.2f})" if len(xs) > 1 else f"{xs[0]:.2f}x"
for rt, what in ((rate, "saturated"), (low, "fixed load")):
    print(f"offered {rt}/s ({what}):")
    print(f"  {'':16} {'handled/s':>9} {'srv us/e':>8} {'busy':>5} {'wait':>5} {'cli us/e':>8} {'cli':>5} {'wait':>5}"
          f" {'p50 ms':>6} {'p99 ms':>6} {'max ms':>6} {'+p50':>5} {'+p99':>5} {'held':>5} {'dups':>5} {'good>dlq':>8} {'checks':>6}")
    for n in names:
        s = sel(rt, n)
        if not s:
            continue
        print(f"  {n:16} {med(rt,n,'handled_eps'):9.0f} {med(rt,n,'server_cpu_us'):8.2f} {med(rt,n,'server_busy')*100:4.0f}%"
              f" {med(rt,n,'server_wait')*100:4.0f}% {med(rt,n,'client_cpu_us'):8.2f} {med(rt,n,'client_run')*100:4.0f}%"
              f" {med(rt,n,'client_wait')*100:4.0f}% {med(rt,n,'lat_p50_ms'):6.0f} {med(rt,n,'lat_p99_ms'):6.0f}"
              f" {max(float(r['lat_max_ms']) for r in s):6.0f} {med(rt,n,'over_p50_ms'):5.0f} {med(rt,n,'over_p99_ms'):5.0f}"
              f" {sum(int(r['held']) for r in s):5d}"
              f" {sum(int(r['dup_entries']) for r in s):5d} {sum(int(r['good_dlq']) for r in s):8d}"
              f" {'ok' if all(r['check'] == 'ok' for r in s) else 'FAILED':>6}")
    for mine in ("rill-policy", "rill-close"):
        for other in [n for n in names if not n.startswith("rill-policy") and n != "rill-close"]:
            # rill-close acts before the deadline: how late after it is no measure there.
            after = "" if mine == "rill-close" else f" (after the deadline: {paired(rt, mine, other, 'over_p99_ms')})"
            print(f"  {mine} / {other}: handled/s {paired(rt, mine, other, 'handled_eps')},"
                  f" death->handled p99 {paired(rt, mine, other, 'lat_p99_ms')}{after},"
                  f" server CPU per entry {paired(rt, mine, other, 'server_cpu_us')}")
print("(busy: server CPU / window; wait: time runnable but waiting for a core (other processes on it);"
      " cli: the client processes' CPU on core 1; p50/p99/max: death -> next handler call, +p50/+p99: that"
      " call minus the entry's deadline (last delivery + ACKWAIT / min-idle), medians over rounds, max over all;"
      " held: good entries killed workers held, summed; ratios: median (min..max) of per-round ratios)")
pel = [dict(kv.split("=", 1) for kv in line.split()) for line in open(pelpath) if line.strip()]
if pel:
    print(f"hand-backs over a {pel[0]['entries']}-entry PEL:")
    for p in pel:
        print(f"  {p['kind']:5} {p['step']:10} {float(p['secs']):7.3f} s  {float(p['eps']):9.0f} entries/s  "
              f"server CPU {float(p['cpu_s']):5.2f} s = {float(p['eps_cpu']):9.0f} entries per CPU-second")
    get = {(p["kind"], p["step"]): p for p in pel}
    total = get.get(("rill", "total"))
    for step in ("xautoclaim", "claimread"):
        o = get.get(("redis", step))
        if total and o:
            print(f"  rill timer+read vs redis {step}: {float(total['eps'])/float(o['eps']):.2f}x entries/s, "
                  f"{float(total['eps_cpu'])/float(o['eps_cpu']):.2f}x entries per server CPU-second")
    timer, xa = get.get(("rill", "timer")), get.get(("redis", "xautoclaim"))
    if timer and xa:
        print(f"  rill timer alone vs redis xautoclaim: {float(timer['eps'])/float(xa['eps']):.1f}x entries/s, "
              f"{float(timer['eps_cpu'])/float(xa['eps_cpu']):.1f}x entries per server CPU-second")
print("checks: " + ", ".join(f"{n} {'ok' if all(r['check'] == 'ok' for r in rows if r['name'] == n) else 'FAILED'}"
                             for n in names))
PY
