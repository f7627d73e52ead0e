#!/usr/bin/env bash
# Memory per connection, rill vs Redis side by side: each server's RSS with N idle connections
# open (connected, nothing sent), then with N connections that each sent one PING and read its
# reply, and after all of them closed (what the server gives back to the system).
#
#   bench/connections.sh [--connections N] [--redis PATH]
#
# Defaults: 10,000 connections, the newest Redis if built as ../shared/conformance/README.md
# says (REDIS=... or --redis), else Debian's. Both servers get maxclients above N; the open-files
# limit of this shell must allow N + a few (ulimit -n).
set -euo pipefail
N=10000
REDIS=${REDIS:-/usr/bin/redis-server}
while [[ $# -gt 0 ]]; do
    case $1 in
        --connections) N=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
source "$(dirname "$0")/lib.sh"

A=$(free_port); B=$(free_port)
start rill "$A" "$RILL" --port "$A" --bind 127.0.0.1 --dir "$WORK/rill" --save '' --appendonly no --maxclients $((N + 100))
start redis "$B" "$REDIS" --port "$B" --bind 127.0.0.1 --save '' --appendonly no --maxclients $((N + 100))

measure() { # name port pid
    python3 - "$@" "$N" <<'PY'
import socket, sys, time
name, port, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
def settle():
    time.sleep(3)  # the servers' crons run (rill gives freed memory back from its cron)
    return rss()
for ping in (False, True):
    before = settle()
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    if ping:
        for s in socks:
            s.sendall(b"PING\r\n")
        for s in socks:
            assert s.recv(16) == b"+PONG\r\n"
    held = settle()
    for s in socks:
        s.close()
    after = settle()
    what = "one PING each" if ping else "idle"
    print(f"{name} {what}: RSS {before} KB -> {held} KB with {n} connections "
          f"({(held - before) * 1024 / n:.0f} B each) -> {after} KB after they closed")
PY
}
measure rill "$A" "${PIDS[0]}"
measure redis "$B" "${PIDS[1]}"
