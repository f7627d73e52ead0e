#!/usr/bin/env python3
"""A rill stream worker in plain redis-py: read `>`, handle, XACK.

The group's policy (RILL.GROUP SET, sent once at start) makes the server do the chores a
hand-written Redis Streams consumer does on timers:

- an entry a consumer has not acked within ACKWAIT (it crashed, hung, lost its connection) is
  handed back by the server and served first to the next `XREADGROUP ... >` of any consumer;
- an entry whose MAXDELIVER-th attempt fails is moved by the server, in one step, to the
  dead-letter stream, with fields saying where it came from and why.

So this loop has no XAUTOCLAIM sweep, counts no deliveries and never writes a dead letter.

Usage:
    python worker.py [--url redis://127.0.0.1:6379] [--stream orders] [--group workers]
                     [--consumer NAME] [--count 10] [--block 2000]
                     [--maxdeliver 5] [--ackwait 30000] [--backoff 1000,5000]
                     [--deadletter KEY] [--crash-after N]

Prints `handled <id> <n>` for each entry handled and acked, `retry <id> <why>` and
`fatal <id> <why>` for each one handed back.
"""
import argparse
import os
import signal
import socket
import sys
import time

import redis


class PermanentError(Exception):
    """A handler error no retry can fix (a malformed entry): dead-letter the entry now."""


def handle(entry_id, fields):
    """The application's work on one entry.

    Raising hands the entry back for another attempt; raising PermanentError dead-letters it at
    once. Handlers must be idempotent: a crash between the work and the XACK means the entry is
    delivered again. This one is a stand-in that tests can steer through the entry's fields.
    """
    if fields.get("fatal") == "1":
        raise PermanentError("entry marked fatal")
    if fields.get("poison") == "1":
        raise ValueError("entry marked poison")
    print(f"handled {entry_id} {fields.get('n', '-')}", flush=True)


def parse_args():
    p = argparse.ArgumentParser(description="read >, handle, XACK on a rill group with a policy")
    p.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
    p.add_argument("--stream", default="orders")
    p.add_argument("--group", default="workers")
    p.add_argument("--consumer", default=f"{socket.gethostname()}-{os.getpid()}")
    p.add_argument("--count", type=int, default=10, help="entries per read")
    p.add_argument("--block", type=int, default=2000, help="ms a read waits for entries")
    # The group's policy. Only the options given are set; leave them all out to keep the policy
    # the group already has (set by another worker or with `rill policy set`).
    p.add_argument("--maxdeliver", help="attempts before an entry goes to the dead-letter stream")
    p.add_argument("--ackwait", help="ms an entry may stay unacked before the server hands it back")
    p.add_argument("--backoff", help="ms before each retry, e.g. 1000,5000 (the last repeats)")
    p.add_argument("--deadletter", help="the dead-letter stream (server default: {STREAM}:dlq)")
    # For tests and demos: take N entries without handling or acking any, then die at once.
    p.add_argument("--crash-after", type=int, default=0, metavar="N", help="(tests) die holding N")
    return p.parse_args()


def attempt(r, args, entry_id, fields):
    """Handle one entry, then ack it or hand it back: all a worker does with a server policy."""
    try:
        handle(entry_id, fields)
    except PermanentError as e:
        # XNACK FATAL: the server dead-letters the entry now (rill-reason fatal).
        r.xnack(args.stream, args.group, "FATAL", entry_id)
        print(f"fatal {entry_id} {e}", flush=True)
    except Exception as e:  # noqa: BLE001 - any other handler error is worth another attempt
        # RILL.NACK: back to the group for another attempt (after the policy's BACKOFF delay,
        # if it has one). When this was attempt number MAXDELIVER the server moves the entry
        # to the dead-letter stream instead (rill-reason maxdeliver).
        r.execute_command("RILL.NACK", args.stream, args.group, "IDS", 1, entry_id)
        print(f"retry {entry_id} {e}", flush=True)
    else:
        r.xack(args.stream, args.group, entry_id)


def main():
    args = parse_args()
    r = redis.Redis.from_url(args.url, decode_responses=True)

    # 1. The group, and the stream with it if needed. ID 0: the group also gets the entries
    #    added before it existed. Another worker may have made it already (BUSYGROUP).
    try:
        r.xgroup_create(args.stream, args.group, id="0", mkstream=True)
    except redis.ResponseError as e:
        if not str(e).startswith("BUSYGROUP"):
            raise

    # 2. The policy. RILL.GROUP SET changes only the options it names, so every worker may send
    #    the same SET when it starts.
    policy = []
    for option in ("maxdeliver", "ackwait", "backoff", "deadletter"):
        value = getattr(args, option)
        if value is not None:
            policy += [option.upper(), value]
    if policy:
        r.execute_command("RILL.GROUP", "SET", args.stream, args.group, *policy)

    # 3. The loop. SIGTERM/Ctrl-C stop it after the current read (at most --block ms) and the
    #    entries it returned.
    stopping = False

    def stop(_signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    received = 0
    while not stopping:
        try:
            reply = r.xreadgroup(
                args.group, args.consumer, {args.stream: ">"}, count=args.count, block=args.block
            )
            # [[stream, [(id, {field: value}), ...]]], or None when nothing came. (That is the
            # shape of redis-py's default protocol, RESP2; with RESP3 it returns a dict.)
            for _stream, entries in reply or []:
                for entry_id, fields in entries:
                    received += 1
                    if args.crash_after:
                        # Simulated crash: hold the entries, and once N arrived exit without
                        # cleanup, acking nothing. The server hands them back after ACKWAIT.
                        if received >= args.crash_after:
                            print(f"crashing, holding {received}", file=sys.stderr, flush=True)
                            os._exit(1)
                        continue
                    attempt(r, args, entry_id, fields)
        except redis.ConnectionError as e:
            # redis-py reconnects on the next command. What this consumer held is not lost:
            # the server hands it back after ACKWAIT to whoever reads next.
            print(f"connection lost ({e}), retrying in 1 s", file=sys.stderr, flush=True)
            time.sleep(1)
    r.close()


if __name__ == "__main__":
    main()
