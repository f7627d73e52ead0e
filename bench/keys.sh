#!/usr/bin/env bash
# Memory per small key, by type: rill vs Redis, one server at a time (server on CPU 0, the
# loader on CPU 1), each type on a fresh process.
#
#   bench/keys.sh [--redis PATH]... [--rill PATH] [--keys N]
#
# For each type, N keys of the smallest useful shape, loaded with `redis-cli --pipe`:
#   string  SET key:i value:i
#   ttl     SET key:i value:i EX 1000000     (a string with an expiry: rate limits, locks)
#   hash    HSET hash:i field value:i        (one field)
#   set     SADD set:i member:i              (one member)
#   zset    ZADD zset:i i member:i           (one member)
# then: bytes of RSS and of INFO used_memory per key (after minus before), and the time of a
# full SCAN (COUNT 1000) over them. The last lines give rill / each Redis per type (< 1: rill
# holds a key in less memory). --redis may be given several times (default: Debian's
# /usr/bin/redis-server; pass the newest Redis built from source too). Default N: 1000000.
# Ports 7241 onwards.
set -euo pipefail
REDISES=()
RILL_BIN=""
KEYS=1000000
while [[ $# -gt 0 ]]; do
    case $1 in
        --redis) REDISES+=("$2"); shift 2 ;;
        --rill) RILL_BIN=$2; shift 2 ;;
        --keys) KEYS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ ${#REDISES[@]} -gt 0 ]] || REDISES=(/usr/bin/redis-server)
source "$(dirname "$0")/lib.sh"
RILL=${RILL_BIN:-$RILL}

# RESP for N keys of TYPE.
fill() { # TYPE N
    python3 - "$1" "$2" <<'PY'
import sys
kind, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))
for i in range(n):
    if kind == "string":
        cmd("SET", f"key:{i}", f"value:{i}")
    elif kind == "ttl":
        cmd("SET", f"key:{i}", f"value:{i}", "EX", 1000000)
    elif kind == "hash":
        cmd("HSET", f"hash:{i}", "field", f"value:{i}")
    elif kind == "set":
        cmd("SADD", f"set:{i}", f"member:{i}")
    else:
        cmd("ZADD", f"zset:{i}", i, f"member:{i}")
PY
}

rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }
scan_ms() { # PORT: time of a full SCAN COUNT 1000
    python3 - "$1" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rb")
def cmd(*args):
    s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in (str(x).encode() for x in args)]))
def read():
    line = f.readline()
    if line[:1] == b"*":
        return [read() for _ in range(int(line[1:]))]
    if line[:1] == b"$":
        n = int(line[1:])
        data = f.read(n + 2)
        return data[:n]
    return line
t = time.monotonic()
cursor, seen = b"0", 0
while True:
    cmd("SCAN", cursor.decode(), "COUNT", 1000)
    cursor, keys = read()
    seen += len(keys)
    if cursor == b"0":
        break
print(f"{(time.monotonic() - t) * 1000:.0f} {seen}")
PY
}

for kind in string ttl hash set zset; do fill "$kind" "$KEYS" >"$WORK/$kind.resp"; done

: >"$WORK/results"
port=7241
measure() { # LABEL BINARY
    local label=$1 bin=$2 kind pid r0 u0 r1 u1 scan
    for kind in string ttl hash set zset; do
        if [[ $label == rill ]]; then
            start "$label-$kind" "$port" "$bin" --port "$port" --dir "$WORK/$label-$kind" --save '' --appendonly no
        else
            start "$label-$kind" "$port" "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no
        fi
        pid=${PIDS[-1]}
        sleep 0.5
        r0=$(rss "$pid"); u0=$(used "$port")
        taskset -c 1 redis-cli -p "$port" --pipe <"$WORK/$kind.resp" >/dev/null
        sleep 1
        r1=$(rss "$pid"); u1=$(used "$port")
        scan=$(scan_ms "$port")
        echo "$label $kind $(( (r1 - r0) / KEYS )) $(( (u1 - u0) / KEYS )) $scan" | tee -a "$WORK/results"
        kill "$pid"; wait "$pid" 2>/dev/null || true
        port=$((port + 1))
    done
}
echo "server type rss-bytes/key used_memory-bytes/key scan-ms keys-scanned"
measure rill "$RILL"
for r in "${REDISES[@]}"; do measure "redis-$("$r" --version | awk '{print $3}' | tr -d 'v=')" "$r"; done
python3 - "$WORK/results" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {(r[0], r[1]): r for r in rows}
for (server, kind), r in sorted(by.items()):
    if server == "rill":
        continue
    ours = by.get(("rill", kind))
    if ours:
        print(f"rill / {server} {kind:6}: rss {int(ours[2]) / max(int(r[2]), 1):.2f}  "
              f"used_memory {int(ours[3]) / max(int(r[3]), 1):.2f}  scan time {int(ours[4]) / max(int(r[4]), 1):.2f}")
PY
