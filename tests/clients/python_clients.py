#!/usr/bin/env python3
"""redis-py 8.x against a running server, with RESP2 and RESP3.

Usage: python_clients.py PORT   (run with .deps/venv/bin/python)
Prints one line per check and a final line `python: N passed, M failed`; exits 1 on failure.
"""
import sys
import uuid

import redis

from checks import check, results

PORT = int(sys.argv[1])
PREFIX = f"pytest:{uuid.uuid4().hex[:8]}:"


def client(protocol, **kw):
    kw.setdefault("socket_timeout", 10)
    return redis.Redis(host="127.0.0.1", port=PORT, protocol=protocol, **kw)


def checks_for(protocol):
    k = lambda name: f"{PREFIX}p{protocol}:{name}"  # noqa: E731

    def connect_and_ping():
        r = client(protocol)
        assert r.ping() is True
        assert r.echo("hi") == b"hi"
        r.close()

    def set_get():
        r = client(protocol, decode_responses=True)
        assert r.set(k("s"), "value") is True
        assert r.get(k("s")) == "value"
        assert r.get(k("missing")) is None
        assert r.set(k("s"), "x", nx=True) is None
        assert r.set(k("ttl"), "v", ex=100) is True
        # Only down from 100, by more than 1 on a machine slow enough to take over 1.5 s.
        assert 90 < r.ttl(k("ttl")) <= 100
        assert r.incr(k("n")) == 1 and r.incrby(k("n"), 41) == 42
        assert r.mget([k("s"), k("missing"), k("n")]) == ["value", None, "42"]
        assert r.delete(k("s"), k("ttl"), k("n"), k("missing")) == 3

    def hash_and_list():
        r = client(protocol, decode_responses=True)
        assert r.hset(k("h"), mapping={"a": "1", "b": "2"}) == 2
        assert r.hgetall(k("h")) == {"a": "1", "b": "2"}
        assert r.rpush(k("l"), "x", "y") == 2
        assert r.lrange(k("l"), 0, -1) == ["x", "y"]
        assert list(r.blpop([k("l")], timeout=1)) == [k("l"), "x"]
        assert r.rpop(k("l")) == "y"
        assert r.blpop([k("l")], timeout=0.1) is None
        r.delete(k("h"), k("l"))

    def errors_are_raised():
        r = client(protocol)
        r.rpush(k("list"), "a")
        try:
            r.get(k("list"))
        except redis.ResponseError as e:
            assert str(e).startswith("WRONGTYPE"), e
        else:
            raise AssertionError("GET on a list did not raise")
        try:
            r.execute_command("NOSUCHCOMMAND", "x")
        except redis.ResponseError as e:
            assert "unknown command" in str(e), e
        else:
            raise AssertionError("unknown command did not raise")
        r.delete(k("list"))

    def multi_exec_pipeline():
        r = client(protocol, decode_responses=True)
        pipe = r.pipeline(transaction=True)
        pipe.set(k("t"), "1").incr(k("t")).get(k("t")).delete(k("t"))
        assert pipe.execute() == [True, 2, "2", 1]
        # Plain pipelining, no transaction.
        pipe = r.pipeline(transaction=False)
        for i in range(50):
            pipe.rpush(k("pl"), i)
        assert pipe.execute() == list(range(1, 51))
        assert r.llen(k("pl")) == 50
        r.delete(k("pl"))

    def watch_transaction():
        r = client(protocol, decode_responses=True)
        other = client(protocol)
        r.set(k("w"), "0")

        def update(pipe):
            value = int(pipe.get(k("w")))
            pipe.multi()
            pipe.set(k("w"), value + 1)

        assert r.transaction(update, k("w")) == [True]
        assert r.get(k("w")) == "1"
        with r.pipeline() as pipe:
            pipe.watch(k("w"))
            other.set(k("w"), "changed")
            pipe.multi()
            pipe.set(k("w"), "mine")
            try:
                pipe.execute()
            except redis.WatchError:
                pass
            else:
                raise AssertionError("EXEC after a concurrent write did not abort")
        assert r.get(k("w")) == "changed"
        r.delete(k("w"))

    def info_parse():
        r = client(protocol)
        info = r.info()
        assert "redis_version" in info, sorted(info)[:20]
        assert info.get("loading", 0) == 0
        server = r.info("server")
        assert "redis_version" in server and "tcp_port" in server
        assert int(server["tcp_port"]) == PORT
        assert "connected_clients" in r.info("clients")

    def hello():
        r = client(protocol, decode_responses=True)
        reply = r.execute_command("HELLO", protocol)
        if isinstance(reply, list):  # RESP2 without callback: flat list
            reply = dict(zip(reply[::2], reply[1::2]))
        assert reply["server"] == "redis", reply
        assert int(reply["proto"]) == protocol, reply
        assert isinstance(reply["version"], str)
        assert int(reply["id"]) > 0
        try:
            r.execute_command("HELLO", 4)
        except redis.ResponseError as e:
            assert "NOPROTO" in str(e) or "unsupported protocol" in str(e), e
        else:
            raise AssertionError("HELLO 4 did not fail")

    def client_name_and_select():
        r = client(protocol, client_name="rill-py", db=1, decode_responses=True)
        assert r.client_getname() == "rill-py"
        assert r.set(k("db1"), "x") is True
        assert client(protocol, decode_responses=True).get(k("db1")) is None
        assert r.delete(k("db1")) == 1

    def crash_and_rescue_flow():
        # A consumer reads 50 entries and dies; after 150 ms another reclaims all of them with
        # XAUTOCLAIM; poison entries go to a dead-letter stream in one MULTI with their XACK.
        import time

        r = client(protocol, decode_responses=True)
        stream, dlq = k("{orders}"), k("{orders}:dlq")
        r.delete(stream, dlq)
        r.xgroup_create(stream, "workers", id="0", mkstream=True)
        ids = [r.xadd(stream, {"n": i, "poison": "1" if i % 10 == 3 else "0"}) for i in range(50)]
        got = r.xreadgroup("workers", "crashy", {stream: ">"}, count=50)
        entries = got[stream][0] if isinstance(got, dict) else got[0][1]
        assert [e[0] for e in entries] == ids
        summary = r.xpending(stream, "workers")
        assert summary["pending"] == 50 and summary["consumers"][0]["name"] == "crashy", summary
        time.sleep(0.15)
        cursor, claimed, deleted = r.xautoclaim(stream, "workers", "rescuer", 100, "0-0", count=50)
        assert [e[0] for e in claimed] == ids and deleted == [], (cursor, deleted)
        detail = r.xpending_range(stream, "workers", "-", "+", 50)
        assert all(p["times_delivered"] == 2 and p["consumer"] == "rescuer" for p in detail), detail
        for entry_id, fields in claimed:
            pipe = r.pipeline(transaction=True)
            if fields["poison"] == "1":
                pipe.xadd(dlq, {**fields, "deadLetteredFrom": f"{stream}/{entry_id}"})
            pipe.xack(stream, "workers", entry_id)
            pipe.execute()
        assert r.xpending(stream, "workers")["pending"] == 0
        dead = r.xrange(dlq)
        assert [f["n"] for _, f in dead] == ["3", "13", "23", "33", "43"], dead
        assert all(f["deadLetteredFrom"].startswith(stream + "/") for _, f in dead)
        r.delete(stream, dlq)

    return [
        (f"resp{protocol}: crash-and-rescue stream flow", crash_and_rescue_flow),
        (f"resp{protocol}: connect and PING", connect_and_ping),
        (f"resp{protocol}: SET/GET and friends", set_get),
        (f"resp{protocol}: hash and list", hash_and_list),
        (f"resp{protocol}: errors raise", errors_are_raised),
        (f"resp{protocol}: MULTI/EXEC pipeline", multi_exec_pipeline),
        (f"resp{protocol}: WATCH transaction", watch_transaction),
        (f"resp{protocol}: INFO parses", info_parse),
        (f"resp{protocol}: HELLO", hello),
        (f"resp{protocol}: CLIENT SETNAME and SELECT on connect", client_name_and_select),
    ]


def client_side_caching():
    """redis-py's client-side cache (RESP3, CLIENT TRACKING): a cached read is not sent again,
    and another client's write or delete reaches the cache as an invalidation push."""
    import time

    from redis.cache import CacheConfig

    key = f"{PREFIX}csc"
    cached = client(3, cache_config=CacheConfig(), decode_responses=True)
    other = client(3, decode_responses=True)

    def gets():
        return other.info("commandstats").get("cmdstat_get", {}).get("calls", 0)

    other.set(key, "v1")
    assert cached.get(key) == "v1"
    sent = gets()
    assert cached.get(key) == "v1" and cached.get(key) == "v1"
    assert gets() == sent, "a cached read went to the server"
    tracking = [c for c in other.client_list() if "t" in c["flags"]]
    assert len(tracking) == 1 and tracking[0]["lib-name"] == "redis-py", tracking
    for change, want in ((lambda: other.set(key, "v2"), "v2"), (lambda: other.delete(key), None)):
        change()
        deadline = time.monotonic() + 5
        while cached.get(key) != want:
            assert time.monotonic() < deadline, f"the cache kept {key} after it changed"
            time.sleep(0.01)
    cached.close()
    other.close()


def big_pipeline():
    """A pipeline redis-py writes whole before it reads a reply: 500,000 GETs (11 MB sent,
    54 MB of replies, more than the sockets' buffers hold either way). The server must keep
    reading while the replies wait, as Redis does; otherwise both wait for ever."""
    key = f"{PREFIX}pipeline"
    r = client(2, socket_timeout=60)
    r.set(key, "v" * 100)
    p = r.pipeline(transaction=False)
    for _ in range(500_000):
        p.get(key)
    replies = p.execute()
    assert len(replies) == 500_000 and replies[-1] == b"v" * 100, len(replies)
    r.delete(key)
    r.close()


print(f"redis-py {redis.__version__} against 127.0.0.1:{PORT}")
for protocol in (2, 3):
    for name, fn in checks_for(protocol):
        check(name, fn)
check("resp3: client-side caching invalidated by CLIENT TRACKING", client_side_caching)
check("resp2: a pipeline written whole before its replies are read", big_pipeline)
print(f"python: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
