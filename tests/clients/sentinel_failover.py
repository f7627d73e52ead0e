#!/usr/bin/env python3
"""Failover under load: three rill nodes, three real Sentinels (Debian's redis-sentinel), and
redis-py's Sentinel client. Producers pipeline XADD, each acknowledged write followed by
`WAIT 1`; consumers read with XREADGROUP and XACK, each XACK followed by `WAIT 1`. At a random
moment the primary is killed with SIGKILL; Sentinel promotes a replica and the clients follow
it. Then every XADD acknowledged with WAIT >= 1 must be on the new primary with its fields, and
every XACK acknowledged so must be reflected in its PEL (the entry no longer pending).

Usage: sentinel_failover.py RILL_SERVER_BINARY [ROUNDS]   (run with .deps/venv/bin/python)
Prints one line per round and a final line `sentinel: N passed, M failed`; exits 1 on failure.
Every process it starts is stopped by pid; everything binds 127.0.0.1.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import redis
from redis.sentinel import Sentinel

BINARY = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
SENTINEL = os.environ.get("RILL_SENTINEL", "/usr/bin/redis-sentinel")
NAME = "orders-primary"
results = {"passed": 0, "failed": 0}
started = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def spawn(args, log):
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    started.append(p)
    return p


def wait_for(what, fn, timeout=30.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - a server still starting, a link still down
            last = e
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last error: {last!r})")


def start_node(dir_, replica_of=None):
    port = free_port()
    conf = os.path.join(dir_, f"node-{port}.conf")
    lines = [
        "# a rill node of the failover test",
        f"port {port}",
        "bind 127.0.0.1",
        f"dir {dir_}",
        f"appenddirname aof-{port}",
        f"dbfilename dump-{port}.rdb",
        "appendonly yes",
        "appendfsync everysec",
        "save \"\"",
        # A full sync at once (the default waits 5 s for more replicas, as Redis does).
        "repl-diskless-sync-delay 0",
    ]
    if replica_of:
        lines.append(f"replicaof 127.0.0.1 {replica_of}")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    proc = spawn([BINARY, conf], os.path.join(dir_, f"node-{port}.log"))
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    wait_for(f"node {port}", r.ping)
    return port, proc


def start_sentinel(dir_, primary_port):
    port = free_port()
    conf = os.path.join(dir_, f"sentinel-{port}.conf")
    with open(conf, "w") as f:
        f.write(
            "\n".join(
                [
                    f"port {port}",
                    "bind 127.0.0.1",
                    "daemonize no",
                    "protected-mode no",
                    f"dir {dir_}",
                    f"sentinel monitor {NAME} 127.0.0.1 {primary_port} 2",
                    f"sentinel down-after-milliseconds {NAME} 1000",
                    f"sentinel failover-timeout {NAME} 10000",
                    f"sentinel parallel-syncs {NAME} 2",
                ]
            )
            + "\n"
        )
    proc = spawn([SENTINEL, conf], os.path.join(dir_, f"sentinel-{port}.log"))
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    wait_for(f"sentinel {port}", r.ping)
    return port, proc


def one_round(n):
    dir_ = tempfile.mkdtemp(prefix="rill-sentinel-")
    nodes = {}
    primary, proc = start_node(dir_)
    nodes[primary] = proc
    for _ in range(2):
        port, proc = start_node(dir_, replica_of=primary)
        nodes[port] = proc
    p = redis.Redis(host="127.0.0.1", port=primary, socket_timeout=5)
    wait_for("two replicas online", lambda: p.info("replication")["connected_slaves"] == 2)
    sentinels = [start_sentinel(dir_, primary) for _ in range(3)]
    for sport, _ in sentinels:
        s = redis.Redis(host="127.0.0.1", port=sport, socket_timeout=5, decode_responses=True)
        wait_for("each Sentinel to know both replicas and the other Sentinels",
                 lambda: len(s.execute_command("SENTINEL", "REPLICAS", NAME)) == 2
                 and len(s.execute_command("SENTINEL", "SENTINELS", NAME)) == 2)
    sentinel = Sentinel([("127.0.0.1", sp) for sp, _ in sentinels], socket_timeout=1)
    p.xgroup_create("orders", "workers", id="0", mkstream=True)

    stop = threading.Event()
    acked_adds = {}  # entry id -> field value, acknowledged with WAIT >= 1
    acked_acks = set()  # entry ids whose XACK was acknowledged with WAIT >= 1
    lock = threading.Lock()
    errors = []

    def producer(tag):
        m = sentinel.master_for(NAME, socket_timeout=1)
        i = 0
        while not stop.is_set():
            try:
                pipe = m.pipeline(transaction=False)
                batch = []
                for _ in range(5):
                    i += 1
                    value = f"{tag}-{i}"
                    batch.append(value)
                    pipe.xadd("orders", {"v": value})
                ids = pipe.execute()
                if m.execute_command("WAIT", 1, 1000) >= 1:
                    with lock:
                        for entry, value in zip(ids, batch):
                            acked_adds[entry.decode()] = value
            except redis.exceptions.RedisError as e:
                with lock:
                    errors.append(f"{tag}: {e!r}")
                time.sleep(0.05)

    def consumer(tag):
        m = sentinel.master_for(NAME, socket_timeout=1)
        while not stop.is_set():
            try:
                got = m.xreadgroup("workers", tag, {"orders": ">"}, count=20, block=100)
                ids = [entry for _, entries in got for entry, _ in entries]
                if not ids:
                    continue
                m.xack("orders", "workers", *ids)
                if m.execute_command("WAIT", 1, 1000) >= 1:
                    with lock:
                        acked_acks.update(entry.decode() for entry in ids)
            except redis.exceptions.RedisError:
                time.sleep(0.05)

    threads = [threading.Thread(target=producer, args=(f"p{k}",)) for k in range(2)]
    threads += [threading.Thread(target=consumer, args=(f"c{k}",)) for k in range(2)]
    for t in threads:
        t.start()
    try:
        time.sleep(random.uniform(1.0, 3.0))
        with lock:
            before = len(acked_adds)
        os.kill(nodes[primary].pid, signal.SIGKILL)
        nodes[primary].wait()
        killed_at = time.time()
        def promoted():
            addr = sentinel.discover_master(NAME)
            return addr if addr[1] != primary else None

        new_primary = wait_for("Sentinel to promote a replica", promoted, timeout=60)
        promoted_in = time.time() - killed_at
        # The clients carry on against the new primary for a while.
        try:
            wait_for("writes acknowledged on the new primary", lambda: len(acked_adds) > before + 20, timeout=30)
        except AssertionError:
            info = redis.Redis(host="127.0.0.1", port=new_primary[1], socket_timeout=5).info("replication")
            others = {}
            for port in nodes:
                if port not in (primary, new_primary[1]):
                    try:
                        others[port] = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5).info("replication")
                    except redis.exceptions.RedisError as e:
                        others[port] = repr(e)
            raise AssertionError(f"no write acknowledged after the failover; new primary {info}; "
                                 f"the other replica {others}; last client errors {errors[-5:]}") from None
    finally:
        stop.set()
        for t in threads:
            t.join()
    q = redis.Redis(host="127.0.0.1", port=new_primary[1], socket_timeout=5, decode_responses=True)
    assert q.info("replication")["role"] == "master"
    entries = dict(q.xrange("orders"))
    lost = [e for e in acked_adds if e not in entries]
    wrong = [e for e, v in acked_adds.items() if e in entries and entries[e].get("v") != v]
    pending = {row["message_id"] for row in q.xpending_range("orders", "workers", "-", "+", 1_000_000)}
    unacked = sorted(acked_acks & pending)
    assert not lost, f"{len(lost)} of {len(acked_adds)} acknowledged XADDs lost, e.g. {lost[:5]}"
    assert not wrong, f"acknowledged XADDs with other fields: {wrong[:5]}"
    assert not unacked, f"{len(unacked)} acknowledged XACKs pending again, e.g. {unacked[:5]}"
    # The other replica follows the new primary.
    wait_for("the other replica to follow the new primary",
             lambda: q.info("replication")["connected_slaves"] >= 1, timeout=30)
    print(f"     round {n}: {len(acked_adds)} XADDs and {len(acked_acks)} XACKs acknowledged with WAIT 1, "
          f"primary :{primary} killed, :{new_primary[1]} promoted in {promoted_in:.1f} s; none lost")
    return dir_


def stop_all():
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    started.clear()


def main():
    for n in range(1, ROUNDS + 1):
        try:
            dir_ = one_round(n)
            shutil.rmtree(dir_, ignore_errors=True)
        except Exception:  # noqa: BLE001 - report every kind of failure the same way
            results["failed"] += 1
            print(f"FAIL round {n}")
            traceback.print_exc(file=sys.stdout)
        else:
            results["passed"] += 1
            print(f"ok   round {n}")
        finally:
            stop_all()
    print(f"sentinel: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_all()
