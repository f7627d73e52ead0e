#!/usr/bin/env python3
"""/metrics read by a real Prometheus parser (prometheus_client's OpenMetrics parser), after a
scripted workload on a rill of its own: a stream with two groups, a consumer that crashed
holding entries (rescued by a claim), a policy group whose poison entry went to a dead-letter
stream. Checks metric names, types and values; then the port's refusals (a wrong password, a
missing one, an unknown path, a POST, a malformed request, oversized headers) and that the
server kept serving.

Usage: metrics_scrape.py RILL_SERVER_BINARY   (run with .deps/venv/bin/python)
Prints one line per check and a final line `metrics: N passed, M failed`; exits 1 on failure.
Every process it starts is stopped by pid; everything binds 127.0.0.1.
"""
import base64
import shutil
import socket
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

import redis
from rill_http import check, results, start
from prometheus_client.openmetrics.parser import text_string_to_metric_families

BINARY = sys.argv[1]


def scrape(http, auth=None):
    req = urllib.request.Request(f"http://127.0.0.1:{http}/metrics")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text"), resp.headers
        return resp.read().decode()


def samples(text):
    """{(sample name, frozenset(labels)): value} and {family: type}, via the real parser."""
    values, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            values[(s.name, frozenset(s.labels.items()))] = s.value
    return values, types


def value(values, name, **labels):
    return values[(name, frozenset(labels.items()))]


def status_of(http, path="/metrics", method="GET", auth=None):
    req = urllib.request.Request(f"http://127.0.0.1:{http}{path}", method=method)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def raw(http, data):
    s = socket.create_connection(("127.0.0.1", http), timeout=10)
    s.sendall(data)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    return out


def main():
    dir_ = tempfile.mkdtemp(prefix="rill-metrics-")
    proc = None
    try:
        proc, port, http = start(BINARY, dir_, "--metrics-consumers", "yes")
        r = redis.Redis(port=port, socket_timeout=10)
        for i in range(10):
            r.xadd("orders", {"n": i}, id=f"{1000 + i}-0")
        r.xgroup_create("orders", "billing", id="0")
        r.xgroup_create("orders", "audit", id="0")
        # billing: worker-1 takes 4 and crashes; worker-2 claims 2 of them and acks 1.
        r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=4)
        r.xclaim("orders", "billing", "worker-2", 0, ["1000-0", "1001-0"])
        r.xack("orders", "billing", "1000-0")
        # audit reads everything and acks everything.
        got = r.xreadgroup("audit", "a", {"orders": ">"})
        r.xack("orders", "audit", *[e[0] for e in got[0][1]])
        # A policy group: one delivery allowed, the poison entry goes to orders:dead.
        r.xadd("jobs", {"k": "v"}, id="5-0")
        r.xgroup_create("jobs", "w", id="0")
        r.execute_command("RILL.GROUP", "SET", "jobs", "w", "MAXDELIVER", "1", "DEADLETTER", "jobs:dead")
        r.xreadgroup("w", "c", {"jobs": ">"})
        r.execute_command("RILL.NACK", "jobs", "w", "IDS", "1", "5-0")
        deadline = time.time() + 10
        while r.xlen("jobs:dead") == 0 and time.time() < deadline:
            time.sleep(0.02)
        r.set("plain", "x")

        values, types = samples(scrape(http))

        def stream_figures():
            assert value(values, "rill_stream_length", db="0", stream="orders") == 10
            assert value(values, "rill_stream_entries_added_total", db="0", stream="orders") == 10
            assert types["rill_stream_entries_added"] == "counter", types.get("rill_stream_entries_added")
            assert value(values, "rill_stream_first_entry_timestamp_seconds", db="0", stream="orders") == 1.0
            assert value(values, "rill_stream_last_entry_timestamp_seconds", db="0", stream="orders") == 1.009
            assert value(values, "rill_stream_groups", db="0", stream="orders") == 2
            assert value(values, "rill_stream_length", db="0", stream="jobs:dead") == 1
            assert not any(n == "rill_stream_length" and dict(l).get("stream") == "plain" for n, l in values)

        def group_figures():
            g = dict(db="0", stream="orders", group="billing")
            assert value(values, "rill_group_lag", **g) == 6
            assert value(values, "rill_group_pending", **g) == 3
            assert value(values, "rill_group_consumers", **g) == 2
            # The oldest undelivered entry (1004-0) is dated 1.004 s after the epoch.
            assert value(values, "rill_group_lag_seconds", **g) > time.time() - 120
            assert 0 <= value(values, "rill_group_pending_oldest_idle_seconds", **g) < 60
            a = dict(db="0", stream="orders", group="audit")
            assert value(values, "rill_group_lag", **a) == 0 and value(values, "rill_group_pending", **a) == 0
            assert value(values, "rill_group_lag_seconds", **a) == 0
            assert types["rill_group_lag"] == "gauge"

        def consumer_figures():
            c = dict(db="0", stream="orders", group="billing")
            assert value(values, "rill_consumer_pending", consumer="worker-1", **c) == 2
            assert value(values, "rill_consumer_pending", consumer="worker-2", **c) == 1
            assert value(values, "rill_consumer_idle_seconds", consumer="worker-2", **c) >= 0

        def policy_figures():
            w = dict(db="0", stream="jobs", group="w")
            assert value(values, "rill_group_dead_letters_total", **w) == 1
            assert value(values, "rill_group_deliveries_total", **w) == 1
            # Every counter as RILL.GROUP INFO reports it.
            flat = r.execute_command("RILL.GROUP", "INFO", "jobs", "w")
            if isinstance(flat, dict):
                info = {k.decode(): v for k, v in flat.items()}
            else:
                info = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
            for metric, field, extra in [
                ("rill_group_deliveries_total", "delivered", {}),
                ("rill_group_redeliveries_total", "redelivered", {}),
                ("rill_group_acks_total", "acked", {}),
                ("rill_group_handed_back_total", "handed-back", {"reason": "deadline"}),
                ("rill_group_handed_back_total", "nacked", {"reason": "nack"}),
                ("rill_group_handed_back_total", "released-on-close", {"reason": "closed"}),
                ("rill_group_dead_letters_total", "dead-lettered", {}),
                ("rill_group_dead_letter_failures_total", "dead-letter-failures", {}),
                ("rill_group_consumers_expired_total", "consumers-expired", {}),
            ]:
                got = value(values, metric, **w, **extra)
                assert got == int(info[field]), (metric, extra, got, info[field])
            assert types["rill_group_dead_letters"] == "counter"
            # Groups without a policy have no policy counters.
            assert ("rill_group_dead_letters_total", frozenset(dict(db="0", stream="orders", group="billing").items())) not in values

        def server_figures():
            assert value(values, "rill_keys", db="0") == 4
            assert value(values, "rill_command_calls_total", cmd="xadd") == 11
            assert types["rill_command_duration_seconds"] == "histogram"
            count = value(values, "rill_command_duration_seconds_count", cmd="xadd")
            assert count == 11, count
            assert value(values, "rill_command_duration_seconds_bucket", cmd="xadd", le="+Inf") == 11
            builds = [(dict(l), v) for (n, l), v in values.items() if n == "rill_build_info"]
            assert len(builds) == 1 and builds[0][1] == 1 and builds[0][0]["version"], builds
            assert value(values, "rill_effect_log_enabled") == 1
            assert value(values, "rill_effect_log_bytes") > 0
            assert types["rill_effect_log_fsync_duration_seconds"] == "histogram"
            assert value(values, "process_resident_memory_bytes") > 0
            assert value(values, "process_open_fds") > 0
            assert abs(value(values, "process_start_time_seconds") - time.time()) < 300
            assert value(values, "rill_repl_offset_bytes") >= 0

        def strange_names():
            name = 'we"ird\\na\nme'
            r.xadd(name, {"f": "v"})
            vals, _ = samples(scrape(http))
            assert value(vals, "rill_stream_length", db="0", stream=name) == 1

        check("stream figures", stream_figures)
        check("group figures", group_figures)
        check("consumer figures", consumer_figures)
        check("policy counters", policy_figures)
        check("server and process figures", server_figures)
        check("label values escaped", strange_names)

        def refusals():
            assert status_of(http, "/no-such-page") == 404
            assert status_of(http, "/metrics", method="POST") == 405
            resp = raw(http, b"GARBAGE\r\n\r\n")
            assert resp.startswith(b"HTTP/1.1 400"), resp[:60]
            resp = raw(http, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
            assert resp.startswith(b"HTTP/1.1 431"), resp[:60]
            assert r.ping()

        check("bad requests refused, the server unaffected", refusals)
    finally:
        if proc:
            proc.kill()
            proc.wait()
        shutil.rmtree(dir_, ignore_errors=True)

    # With a password: needed, as HTTP Basic credentials.
    dir_ = tempfile.mkdtemp(prefix="rill-metrics-")
    proc = None
    try:
        proc, port, http = start(BINARY, dir_, "--requirepass", "s3cret", password="s3cret")

        def password():
            assert status_of(http) == 401
            assert status_of(http, auth="default:wrong") == 401
            assert status_of(http, auth="default:s3cret") == 200
            text = scrape(http, auth="anyone:s3cret")
            samples(text)
            r = redis.Redis(port=port, password="s3cret", socket_timeout=10)
            assert r.info("stats")["acl_access_denied_auth"] == 1

        check("the password is needed", password)
    finally:
        if proc:
            proc.kill()
            proc.wait()
        shutil.rmtree(dir_, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        results["failed"] += 1
        traceback.print_exc(file=sys.stdout)
    print(f"metrics: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)
