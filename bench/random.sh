#!/usr/bin/env bash
# Random picks on big values, and what they cost everyone else: rill vs Redis, one server at a
# time (server on CPU 0, clients on CPU 1), each on a fresh process.
#
#   bench/random.sh [--redis PATH]... [--rill PATH] [--keys N] [--fields N] [--volatile N]
#
# Per server, in order:
#  1. memory: RSS (and INFO used_memory) before and after N string keys (SET key:i value:i),
#     a hash of F fields (HSET h field:i value:i) and a set of F members (SADD s member:i):
#     bytes per key, per field, per member;
#  2. 300 pipelined HRANDFIELD h, then SRANDMEMBER s, then SPOP s, while another client sends
#     PING after PING: the burst's time and the longest PING (how long everyone else waited);
#  3. RANDOMKEY right after V keys were set with PX 1 in an empty database (one call, then 300
#     pipelined), and again with 100 keys without expiry added to V such keys: time and longest
#     PING as above.
# --redis may be given several times (default: Debian's /usr/bin/redis-server; pass the newest
# Redis built from source too). --rill runs another rill-server binary (e.g. one built before a
# change) instead of this tree's release build. Defaults: N 1000000, F 400000, V 200000.
# Ports 7223 onwards.
set -euo pipefail
REDISES=()
RILL_BIN=""
KEYS=1000000
FIELDS=400000
VOLATILE=200000
while [[ $# -gt 0 ]]; do
    case $1 in
        --redis) REDISES+=("$2"); shift 2 ;;
        --rill) RILL_BIN=$2; shift 2 ;;
        --keys) KEYS=$2; shift 2 ;;
        --fields) FIELDS=$2; shift 2 ;;
        --volatile) VOLATILE=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ ${#REDISES[@]} -gt 0 ]] || REDISES=(/usr/bin/redis-server)
source "$(dirname "$0")/lib.sh"
RILL=${RILL_BIN:-$RILL}

cat >"$WORK/probe.py" <<'PY'
import socket, sys, time, multiprocessing as mp

def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf, self.pos = b"", 0
    def _fill(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise EOFError("server closed the connection")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line, self.pos = self.buf[self.pos:i], i + 2
                return line
            self._fill()
    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data, self.pos = self.buf[self.pos:self.pos + n], self.pos + n + 2
        return data
    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return rest if kind == b"+" else RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")
    def pipeline(self, cmds):
        self.s.sendall(b"".join(cmds))
        return [self.reply() for _ in cmds]
    def cmd(self, *args):
        return self.pipeline([enc(*args)])[0]

def load(c, cmds, batch=10000):
    for i in range(0, len(cmds), batch):
        for r in c.pipeline(cmds[i:i + batch]):
            if isinstance(r, Exception):
                raise r

def pinger(port, stop, out):
    c = Conn(port)
    worst = 0.0
    while not stop.is_set():
        t = time.monotonic()
        c.cmd("PING")
        worst = max(worst, time.monotonic() - t)
    out.put(worst)

def burst(port, c, cmds):
    """Send cmds pipelined while another process PINGs: (burst ms, longest PING ms, replies)."""
    stop, out = mp.Event(), mp.Queue()
    p = mp.Process(target=pinger, args=(port, stop, out))
    p.start()
    time.sleep(0.2)
    t = time.monotonic()
    replies = c.pipeline(cmds)
    took = time.monotonic() - t
    time.sleep(0.05)
    stop.set()
    worst = out.get()
    p.join()
    return took * 1000, worst * 1000, replies

def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

def used(c):
    for line in c.cmd("INFO", "memory").decode().splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return None

def main():
    name, port, pid, keys, fields, volatile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *map(int, sys.argv[4:7])
    c = Conn(port)
    rows = []
    def mem(label, n, step):
        r0, u0 = rss(pid), used(c)
        step()
        time.sleep(0.5)
        r1, u1 = rss(pid), used(c)
        um = f"{(u1 - u0) / n:7.1f}" if u0 is not None and u1 is not None else "      -"
        rows.append(f"{name:12} {label:32} RSS {(r1 - r0) / n:7.1f} B   used_memory {um} B")
    mem(f"per string key ({keys})", keys,
        lambda: load(c, [enc("SET", f"key:{i}", f"value:{i}") for i in range(keys)]))
    mem(f"per hash field ({fields})", fields,
        lambda: load(c, [enc("HSET", "h", *[x for j in range(i, min(i + 1000, fields)) for x in (f"field:{j}", f"value:{j}")])
                         for i in range(0, fields, 1000)], 50))
    mem(f"per set member ({fields})", fields,
        lambda: load(c, [enc("SADD", "s", *[f"member:{j}" for j in range(i, min(i + 1000, fields))])
                         for i in range(0, fields, 1000)], 50))
    def probe(label, cmds, check):
        took, worst, replies = burst(port, c, cmds)
        assert all(check(r) for r in replies), f"{label}: unexpected replies {replies[:3]}"
        rows.append(f"{name:12} {label:32} {took:9.1f} ms   longest PING {worst:9.1f} ms")
    bulk = lambda r: isinstance(r, bytes)
    probe("300 x HRANDFIELD h", [enc("HRANDFIELD", "h")] * 300, bulk)
    probe("300 x SRANDMEMBER s", [enc("SRANDMEMBER", "s")] * 300, bulk)
    probe("300 x SPOP s", [enc("SPOP", "s")] * 300, bulk)
    c.cmd("SELECT", 2)
    load(c, [enc("SET", f"v:{i}", "x", "PX", 1) for i in range(volatile)])
    probe(f"RANDOMKEY, {volatile} expired", [enc("RANDOMKEY")], lambda r: r is None)
    probe("300 x RANDOMKEY, then", [enc("RANDOMKEY")] * 300, lambda r: r is None)
    c.cmd("SELECT", 3)
    load(c, [enc("SET", f"v:{i}", "x", "PX", 1) for i in range(volatile)])
    load(c, [enc("SET", f"live:{i}", "x") for i in range(100)])
    live = lambda r: isinstance(r, bytes) and r.startswith(b"live:")
    probe(f"RANDOMKEY, {volatile} exp. + 100", [enc("RANDOMKEY")], live)
    probe("300 x RANDOMKEY, then", [enc("RANDOMKEY")] * 300, live)
    print("\n".join(rows), flush=True)

main()
PY

port=7223
for server in rill "${REDISES[@]}"; do
    if [[ $server == rill ]]; then
        name=rill
        start "$name" "$port" "$RILL" --port "$port" --dir "$WORK/$name" --save '' --appendonly no
    else
        [[ -x $server && -s $server ]] || { echo "no Redis at $server, skipped" >&2; continue; }
        name=redis-$("$server" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
        start "$name" "$port" "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no
    fi
    pid=${PIDS[-1]}
    taskset -c 1 python3 "$WORK/probe.py" "$name" "$port" "$pid" "$KEYS" "$FIELDS" "$VOLATILE"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    port=$((port + 1))
done
