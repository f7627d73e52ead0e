#!/usr/bin/env bash
# redis-tcl-spawned.sh - run the Redis project's own Tcl test units in the runner's
# normal (spawning) mode, with rill standing in for redis-server: the tests that
# start their own servers (replication, sharded pub/sub, ...) then start rill.
#
# The Redis tree is never modified: a scratch copy of its tests/ and runtest is made,
# with a src/ holding a `redis-server` wrapper that execs rill (same PID, stderr
# joined to stdout as Redis logs to stdout when logfile is ''; rill listens on the
# `unixsocket` the runner gives each server, as redis-server does), and links to the
# tree's client tools (redis-cli, ...) if built.
#
# Environment:
#   REDIS_SRC     (required) a Redis source tree holding runtest and tests/.
#   RILL          (required) path to the rill-server binary.
#   TEST_FILES    whitespace-separated units relative to tests/, with or without
#                 .tcl (default: "unit/pubsubshard"). UNIT@REGEX runs only the
#                 tests of UNIT whose name matches the Tcl regexp REGEX (--only).
#                 Preset "repl" = the replication units and block-repl.
#   SCRATCH       where the scratch tree goes (default: a new temp dir; kept,
#                 its path is printed: server logs are under tests/tmp/).
#   LOG           file receiving the full runner output (default: in SCRATCH).
#   TAGS          runtest --tags value (default: none).
#   BASEPORT      runtest --baseport (default 21111).
#   EXTRA_ARGS    extra runtest arguments, shell-quoted.
#   RUN_TIMEOUT   wall-clock seconds allowed per unit (default 1800).
#   TEST_TIMEOUT  runner's "no progress" timeout (default 300).
#   TCLSH         Tcl interpreter (default: tclsh8.7/8.6/8.5/tclsh, first found).
#
# Output: one summary line per unit, the failed tests, the log path, then
#   "<K> skipped" and, last, "<N> passed, <M> failed" (counted as in
#   redis-tcl-streams.sh: N = "[ok]" lines; M = "[err]" + "[exception]" +
#   "[TIMEOUT]" lines, plus 1 per unit missing, killed by RUN_TIMEOUT, or whose
#   runner exited non-zero without reporting a failure; K = "[ignore]"+"[skip]").
# Exit status: 0 only if M == 0 and N > 0; 1 if M > 0; 2 if nothing ran / usage.
#
# The wrapper records each pid it starts in SCRATCH/pids; after each unit, those
# still running rill (a unit killed by RUN_TIMEOUT can leave some) get a SIGTERM.

set -u

REDIS_SRC=${REDIS_SRC:-}
RILL=${RILL:-}
TEST_FILES=${TEST_FILES:-unit/pubsubshard}
REPL_UNITS="integration/replication integration/replication-2 integration/replication-3
 integration/replication-4 integration/replication-psync integration/replication-buffer
 integration/block-repl"
TAGS=${TAGS:-}
BASEPORT=${BASEPORT:-21111}
EXTRA_ARGS=${EXTRA_ARGS:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}

die() { echo "redis-tcl-spawned: $*" >&2; echo "0 skipped"; echo "0 passed, 0 failed"; exit 2; }

[ -n "$REDIS_SRC" ] || die "REDIS_SRC must point at a redis source tree (with runtest and tests/)"
[ -f "$REDIS_SRC/tests/test_helper.tcl" ] || die "no tests/test_helper.tcl under REDIS_SRC=$REDIS_SRC"
[ -n "$RILL" ] || die "RILL must be the path of the rill-server binary"
[ -x "$RILL" ] || die "RILL=$RILL is not executable"
RILL=$(cd "$(dirname "$RILL")" && pwd)/$(basename "$RILL")
REDIS_SRC=$(cd "$REDIS_SRC" && pwd)

if [ -z "${TCLSH:-}" ]; then
    for t in tclsh8.7 tclsh8.6 tclsh8.5 tclsh; do
        if command -v "$t" >/dev/null 2>&1; then TCLSH=$(command -v "$t"); break; fi
    done
fi
[ -n "${TCLSH:-}" ] || die "no tclsh found (need Tcl >= 8.5)"

if [ -z "${SCRATCH:-}" ]; then
    SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/redis-tcl-spawned.XXXXXX") || die "mktemp failed"
fi
mkdir -p "$SCRATCH/src" || die "cannot create $SCRATCH/src"
# The scratch tree: the tests (fresh copy each run), the wrapper, the client tools.
rm -rf "$SCRATCH/tests"
cp -r "$REDIS_SRC/tests" "$SCRATCH/tests" || die "cannot copy $REDIS_SRC/tests"
rm -rf "$SCRATCH/tests/tmp"; mkdir -p "$SCRATCH/tests/tmp"
[ -f "$REDIS_SRC/runtest" ] && cp "$REDIS_SRC/runtest" "$SCRATCH/runtest"
for tool in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
    rm -f "$SCRATCH/src/$tool"
    [ -x "$REDIS_SRC/src/$tool" ] && ln -s "$REDIS_SRC/src/$tool" "$SCRATCH/src/$tool"
done
: > "$SCRATCH/pids"
# Single-quoted paths in the wrapper: refuse paths holding a quote.
case "$SCRATCH$RILL" in *"'"*) die "SCRATCH and RILL must not contain a single quote";; esac
{
    echo '#!/bin/sh'
    echo '# Stand-in for redis-server: rill, same PID (exec), its log (stderr) joined to stdout.'
    echo "echo \$\$ >> '$SCRATCH/pids'"
    echo "exec '$RILL' \"\$@\" 2>&1"
} > "$SCRATCH/src/redis-server"
chmod +x "$SCRATCH/src/redis-server"

[ -n "${LOG:-}" ] || LOG="$SCRATCH/runner.log"
: > "$LOG" || die "cannot write LOG=$LOG"

declare -a extra=()
if [ -n "$EXTRA_ARGS" ]; then
    eval "extra=($EXTRA_ARGS)" || die "cannot parse EXTRA_ARGS"
fi

strip_ansi() { sed -e 's/\x1b\[[0-9;]*m//g'; }

# Stop the rill processes the wrapper started that still run (by pid, only if the
# pid still runs our binary).
reap_servers() {
    local pid exe
    while read -r pid; do
        [ -n "$pid" ] || continue
        exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
        [ "$exe" = "$RILL" ] || continue
        echo "redis-tcl-spawned: stopping leftover rill pid $pid" >&2
        kill -TERM "$pid" 2>/dev/null
    done < "$SCRATCH/pids"
    : > "$SCRATCH/pids"
}

child=""
part=""
on_signal() {
    [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
    [ -n "$part" ] && [ -f "$part" ] && strip_ansi < "$part" >> "$LOG" && rm -f "$part"
    reap_servers
    echo "redis-tcl-spawned: interrupted; partial log in $LOG" >&2
    exit 130
}
trap on_signal INT TERM HUP

prefix_lines() { P="$1" awk '{ print ENVIRON["P"] $0 }'; }

total_ok=0; total_err=0; total_skip=0
failed_lines=""
start_all=$(date +%s)

units=""
for entry in $TEST_FILES; do
    case "$entry" in
        repl) units+=" $REPL_UNITS";;
        *) units+=" $entry";;
    esac
done

for entry in $units; do
    unit=${entry%%@*}
    only=""
    [ "$unit" != "$entry" ] && only=${entry#*@}
    unit=${unit#tests/}; unit=${unit%.tcl}
    label=$entry

    if [ ! -f "$SCRATCH/tests/$unit.tcl" ]; then
        msg="[err]: no such test unit tests/$unit.tcl"
        echo "$msg" >> "$LOG"
        failed_lines+="  $label: $msg"$'\n'
        total_err=$((total_err + 1))
        echo "=== $label: 0 passed, 1 failed, 0 skipped (unit missing)"
        continue
    fi

    args=(--durable --timeout "$TEST_TIMEOUT" --baseport "$BASEPORT" --clients 1
          --single "$unit")
    [ -n "$TAGS" ] && args+=(--tags "$TAGS")
    [ -n "$only" ] && args+=(--only "/$only")
    args+=("${extra[@]}")

    part=$(mktemp "$SCRATCH/part.XXXXXX")
    {
        echo "##### unit $label  ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
        echo "##### $TCLSH tests/test_helper.tcl ${args[*]}"
    } >> "$LOG"
    t0=$(date +%s)
    ( cd "$SCRATCH" && TERM=dumb exec timeout -k 15 "$RUN_TIMEOUT" \
        "$TCLSH" tests/test_helper.tcl "${args[@]}" ) > "$part" 2>&1 < /dev/null &
    child=$!
    wait "$child"
    rc=$?
    child=""
    t1=$(date +%s)
    reap_servers
    strip_ansi < "$part" >> "$LOG"

    ok=$(strip_ansi < "$part" | grep -c '^\[ok\]: ')
    err=$(strip_ansi < "$part" | grep -c '^\[err\]: ')
    exc=$(strip_ansi < "$part" | grep -c '^\[exception\]: ')
    tmo=$(strip_ansi < "$part" | grep -c '^\[TIMEOUT\]')
    ign=$(strip_ansi < "$part" | grep -c '^\[ignore\]: ')
    skp=$(strip_ansi < "$part" | grep -c '^\[skip\]: ')
    if [ -n "$only" ]; then
        skp=0
        ign=$(strip_ansi < "$part" | grep '^\[ignore\]: ' | sed 's/^\[ignore\]: //' | grep -c -E -e "$only")
    fi
    fails=$((err + exc + tmo))
    note="rc=$rc, $((t1 - t0))s"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        msg="[err]: runner killed after RUN_TIMEOUT=${RUN_TIMEOUT}s; rest of unit not run"
        echo "$msg" >> "$LOG"
        failed_lines+="  $label: $msg"$'\n'
        fails=$((fails + 1)); note="$note, KILLED BY TIMEOUT"
    elif [ "$rc" != 0 ] && [ "$fails" = 0 ]; then
        msg="[err]: runner exited rc=$rc without reporting a failure (see log)"
        echo "$msg" >> "$LOG"
        failed_lines+="  $label: $msg"$'\n'
        fails=$((fails + 1))
    fi
    [ "$exc" != 0 ] && note="$note, runner exception: rest of unit not run"
    [ "$tmo" != 0 ] && note="$note, runner TIMEOUT: rest of unit not run"
    if [ "$fails" != 0 ]; then
        failed_lines+=$(strip_ansi < "$part" | grep -E '^\[(err|exception)\]: |^\[TIMEOUT\]| => \(IN PROGRESS\) ' | prefix_lines "  $label: ")$'\n'
    fi
    rm -f "$part"; part=""

    echo "=== $label: $ok passed, $fails failed, $((ign + skp)) skipped ($note)"
    total_ok=$((total_ok + ok)); total_err=$((total_err + fails))
    total_skip=$((total_skip + ign + skp))
done

end_all=$(date +%s)
failed_lines=$(printf '%s' "$failed_lines" | sed '/^$/d')
if [ -n "$failed_lines" ]; then
    echo "--- failures:"
    printf '%s\n' "$failed_lines"
fi
echo "--- $((end_all - start_all))s total, scratch tree $SCRATCH (server logs in tests/tmp), full log: $LOG"
echo "$total_skip skipped"
echo "$total_ok passed, $total_err failed"
if [ "$total_err" != 0 ]; then exit 1; fi
if [ "$total_ok" = 0 ]; then exit 2; fi
exit 0
