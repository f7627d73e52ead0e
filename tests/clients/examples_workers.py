#!/usr/bin/env python3
"""examples/python-worker and examples/node-worker, run as processes against a running rill.

Usage: examples_workers.py PORT   (run with .deps/venv/bin/python; node finds node-redis in
RILL_NODE_MODULES, default .deps/node/node_modules)

For each language, on a group with a policy set by the workers themselves:
- crash and rescue: worker A takes 50 entries and dies acking none; worker B, which only ever
  reads `>`, gets them back from the server after ACKWAIT, with the entries A never read, and
  acks them all: every entry handled, the PEL empty;
- poison: an entry whose handler always fails reaches the dead-letter stream after exactly
  MAXDELIVER attempts (shared by two workers, BACKOFF apart), with its fields and the
  provenance fields, and leaves the PEL;
- fatal: an entry the handler marks permanent is dead-lettered after one attempt.
Prints one line per check and `examples: N passed, M failed`; exits 1 on failure.
"""
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path

import redis

PORT = int(sys.argv[1])
ROOT = Path(__file__).resolve().parents[2]
URL = f"redis://127.0.0.1:{PORT}"
PREFIX = f"examples:{uuid.uuid4().hex[:8]}:"
ACKWAIT = 500  # ms: short, so the rescue comes quickly
WAIT = 20  # s: the longest any check waits for workers before it fails
NODE_ENV = {
    **os.environ,
    "RILL_NODE_MODULES": os.environ.get("RILL_NODE_MODULES", str(ROOT / ".deps/node/node_modules")),
}
COMMANDS = {
    "python": [sys.executable, str(ROOT / "examples/python-worker/worker.py")],
    "node": ["node", str(ROOT / "examples/node-worker/worker.mjs")],
}
results = {"passed": 0, "failed": 0}
r = redis.Redis(host="127.0.0.1", port=PORT, decode_responses=True, socket_timeout=10)


def collect(pipe, lines):
    for line in pipe:
        lines.append(line.rstrip("\n"))


class Worker:
    """One example worker process; its stdout lines are collected as they come."""

    running = []

    def __init__(self, lang, stream, consumer, *options):
        cmd = COMMANDS[lang] + ["--url", URL, "--stream", stream, "--group", "g",
                                "--consumer", consumer, "--block", "200", *options]
        self.name = f"{lang} {consumer}"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=NODE_ENV if lang == "node" else None)
        self.lines, self.errors = [], []
        for pipe, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors)):
            threading.Thread(target=collect, args=(pipe, into), daemon=True).start()
        Worker.running.append(self)

    def said(self, verb):
        """IDs of the entries of this worker's `verb <id> ...` lines, in order."""
        return [line.split()[1] for line in list(self.lines) if line.startswith(verb + " ")]

    def stop(self):
        """SIGTERM: the worker ends after its current read; returns its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.wait()

    def wait(self):
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit") from None

    def report(self):
        time.sleep(0.1)  # let the reader threads catch the last lines
        return (f"{self.name}: exit {self.proc.poll()}, "
                f"stdout {self.lines[-5:]}, stderr {self.errors[-5:]}")


def wait_until(what, cond, workers=()):
    deadline = time.monotonic() + WAIT
    while not cond():
        if time.monotonic() > deadline:
            reports = "".join(f"\n  {w.report()}" for w in workers)
            raise AssertionError(f"after {WAIT} s, still not: {what}{reports}")
        time.sleep(0.05)


def pending(stream):
    return r.xpending(stream, "g")["pending"]


def info(stream):
    """RILL.GROUP INFO as a dict."""
    reply = r.execute_command("RILL.GROUP", "INFO", stream, "g")
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))


def produce(stream, n, special=None):
    """XADD entries n=1..n; special maps an n to extra fields. Returns the IDs in order."""
    return [r.xadd(stream, {"n": str(i), **(special or {}).get(i, {})}) for i in range(1, n + 1)]


def crash_and_rescue(lang):
    s = f"{PREFIX}{lang}:crash"
    ids = produce(s, 80)
    policy = ["--ackwait", str(ACKWAIT)]
    # A takes 50 entries in one read and dies holding them.
    a = Worker(lang, s, "a", "--count", "50", "--crash-after", "50", *policy)
    assert a.wait() != 0, a.report()
    assert a.said("handled") == [], a.report()
    assert pending(s) == 50, (pending(s), a.report())
    # B reads `>` only: the 30 entries nobody read, then A's 50 as the server hands them back.
    b = Worker(lang, s, "b", *policy)
    wait_until("B handled all 80 entries", lambda: set(b.said("handled")) == set(ids), [b])
    wait_until("the PEL is empty", lambda: pending(s) == 0, [b])
    counters = info(s)
    assert int(counters["handed-back"]) >= 50, counters
    # Each entry once, unless the server handed back one of B's own (B slower than ACKWAIT).
    extra = len(b.said("handled")) - len(ids)
    assert extra <= int(counters["handed-back"]) - 50, (extra, counters)
    assert b.said("retry") == [] and b.said("fatal") == [], b.report()
    assert b.stop() == 0, b.report()


def poison_to_dlq(lang):
    s, dlq = f"{PREFIX}{lang}:poison", f"{PREFIX}{lang}:poison:dlq"
    maxdeliver, backoff = 3, 100
    ids = produce(s, 20, {7: {"poison": "1"}})
    poison = ids[6]
    # ACKWAIT well above a handler's time: every attempt here ends by RILL.NACK, not a timeout.
    policy = ["--maxdeliver", str(maxdeliver), "--ackwait", "5000", "--backoff", str(backoff),
              "--deadletter", dlq]
    workers = [Worker(lang, s, c, "--count", "5", *policy) for c in ("p1", "p2")]
    handled = lambda: [i for w in workers for i in w.said("handled")]  # noqa: E731
    wait_until("the poison entry is dead-lettered and the rest handled",
               lambda: r.xlen(dlq) == 1 and set(handled()) == set(ids) - {poison}, workers)
    wait_until("the PEL is empty", lambda: pending(s) == 0, workers)
    time.sleep(0.5)  # long enough for a wrong redelivery to show as a 4th attempt
    for w in workers:
        assert w.stop() == 0, w.report()
    attempts = [i for w in workers for i in w.said("retry")]
    assert attempts == [poison] * maxdeliver, (attempts, [w.report() for w in workers])
    assert r.xlen(dlq) == 1
    [(_, letter)] = r.xrange(dlq)
    assert list(letter)[:2] == ["n", "poison"] and letter["n"] == "7", letter
    assert letter["rill-source-stream"] == s, letter
    assert letter["rill-source-id"] == poison, letter
    assert letter["rill-group"] == "g", letter
    assert letter["rill-consumer"] in ("p1", "p2"), letter
    assert letter["rill-deliveries"] == str(maxdeliver), letter
    assert letter["rill-reason"] == "maxdeliver", letter
    # Two BACKOFF waits between the first delivery and the last.
    first, last = int(letter["rill-first-delivery-ms"]), int(letter["rill-last-delivery-ms"])
    assert last - first >= 2 * backoff, letter
    assert r.xpending_range(s, "g", min=poison, max=poison, count=1) == []
    assert int(info(s)["dead-lettered"]) == 1


def fatal_to_dlq(lang):
    s = f"{PREFIX}{lang}:fatal"
    dlq = f"{{{s}}}:dlq"  # the default for an untagged key
    ids = produce(s, 5, {3: {"fatal": "1"}})
    w = Worker(lang, s, "f", "--maxdeliver", "5", "--ackwait", "5000")
    wait_until("the fatal entry is dead-lettered and the rest handled",
               lambda: r.xlen(dlq) == 1 and set(w.said("handled")) == set(ids) - {ids[2]}, [w])
    wait_until("the PEL is empty", lambda: pending(s) == 0, [w])
    assert w.stop() == 0, w.report()
    assert w.said("fatal") == [ids[2]] and w.said("retry") == [], w.report()
    [(_, letter)] = r.xrange(dlq)
    assert letter["fatal"] == "1" and letter["rill-source-id"] == ids[2], letter
    assert letter["rill-reason"] == "fatal" and letter["rill-consumer"] == "f", letter
    assert letter["rill-deliveries"] == "1", letter


def check(name, fn, *args):
    t = time.monotonic()
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - report every kind of failure the same way
        results["failed"] += 1
        print(f"FAIL {name}")
        traceback.print_exc(file=sys.stdout)
    else:
        results["passed"] += 1
        print(f"ok   {name} ({time.monotonic() - t:.1f} s)")
    finally:
        for w in Worker.running:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
        Worker.running.clear()
        # No policy group of ours left behind, even after a failure: its timers would go on
        # changing the keyspace that scripts/test compares across a restart.
        for key in r.scan_iter(match=f"*{PREFIX}*"):
            r.delete(key)


print(f"example workers against 127.0.0.1:{PORT}, keys {PREFIX}*")
for lang in ("python", "node"):
    check(f"{lang}: crash, then rescue by `>` reads after ACKWAIT", crash_and_rescue, lang)
    check(f"{lang}: poison entry dead-lettered after MAXDELIVER attempts", poison_to_dlq, lang)
    check(f"{lang}: XNACK FATAL dead-letters at once", fatal_to_dlq, lang)
print(f"examples: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
