#!/usr/bin/env bash
# redis-cli and redis-benchmark against a running server.
#
# Usage: tests/clients/redis_cli.sh PORT
# Prints one line per check and a final `redis-cli: N passed, M failed`; exits 1 on failure.
set -uo pipefail

PORT="${1:?usage: redis_cli.sh PORT}"
CLI=(redis-cli -h 127.0.0.1 -p "$PORT" --no-raw)
KEY="clitest:$$"
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/     | /'; }

# expect NAME EXPECTED COMMAND... : the command's stdout must equal EXPECTED.
expect() {
    local name="$1" expected="$2"
    shift 2
    local out
    out="$(timeout 20 "$@" 2>&1)"
    if [ "$out" = "$expected" ]; then ok "$name"; else fail "$name" "expected: $expected"$'\n'"got:      $out"; fi
}

expect "PING" "PONG" "${CLI[@]}" PING
expect "SET" "OK" "${CLI[@]}" SET "$KEY" "hello world"
expect "GET (quoted with --no-raw)" '"hello world"' "${CLI[@]}" GET "$KEY"
expect "GET missing" "(nil)" "${CLI[@]}" GET "$KEY:missing"
expect "INCR" "(integer) 1" "${CLI[@]}" INCR "$KEY:n"
expect "error reply" "(error) WRONGTYPE Operation against a key holding the wrong kind of value" \
    "${CLI[@]}" HGET "$KEY" f
expect "array reply" $'1) "a"\n2) "b"' bash -c "$(printf '%q ' "${CLI[@]}") RPUSH $KEY:l a b >/dev/null; $(printf '%q ' "${CLI[@]}") LRANGE $KEY:l 0 -1"
expect "RESP3 (-3) map reply" "1# \"f\" => \"v\"" bash -c "$(printf '%q ' "${CLI[@]}") HSET $KEY:h f v >/dev/null; $(printf '%q ' "${CLI[@]}") -3 HGETALL $KEY:h"
# redis-cli fetches COMMAND DOCS at start-up for its hints and warns on anything it does not
# understand (e.g. an argument type it does not know); the output must be just the reply.
expect "COMMAND DOCS accepted (no warnings)" "PONG" bash -c "echo PING | $(printf '%q ' "${CLI[@]}")"
expect "pipe mode (stdin)" $'OK\n"piped"' bash -c "printf 'SET $KEY:p piped\nGET $KEY:p\n' | $(printf '%q ' "${CLI[@]}")"

info="$(timeout 20 "${CLI[@]}" INFO server 2>&1)"
if grep -q '^redis_version:' <<<"$info"; then ok "INFO server has redis_version"; else fail "INFO server has redis_version" "$info"; fi

# Interactive mode through a pseudo-terminal: typing character by character makes redis-cli
# render hints from COMMAND DOCS after every key; it must show the replies and not crash.
if interactive="$(timeout 60 python3 - "$PORT" "$KEY" <<'PY'
import fcntl, os, select, struct, subprocess, sys, termios, time

port, key = sys.argv[1], sys.argv[2]
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
env = dict(os.environ, TERM="xterm")
proc = subprocess.Popen(["redis-cli", "-h", "127.0.0.1", "-p", port], stdin=slave, stdout=slave,
                        stderr=slave, env=env, close_fds=True)
os.close(slave)
screen = b""

def read_until(pattern, start=0, timeout=10.0):
    global screen
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pattern in screen[start:]:
            return True
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            screen += data
    return pattern in screen[start:]

def type_line(text):
    for ch in text:
        os.write(master, ch.encode())
        time.sleep(0.01)
    os.write(master, b"\r")

ok = read_until(b"> ")
time.sleep(0.05)
steps = [("SET " + key + ":i v", b"\r\nOK\r\n"), ("GET " + key + ":i", b'\r\n"v"\r\n'),
         ("HSET " + key + ":h2 f v", b"\r\n(integer) 1\r\n"), ("HGET " + key + ":nohash f", b"\r\n(nil)\r\n")]
for line, expected in steps:
    mark = len(screen)
    type_line(line)
    ok = ok and read_until(expected, mark)
    # Type the next line only once the next prompt is shown (the terminal is back in raw mode).
    ok = ok and read_until(b"> ", screen.find(expected, mark) + len(expected))
    time.sleep(0.05)
    if not ok:
        break
type_line("exit")
try:
    code = proc.wait(timeout=10)
except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()
    code = "hung"
sys.stdout.write(screen.decode(errors="replace")[-1500:])
sys.exit(0 if ok and code == 0 else 1)
PY
)"; then
    ok "interactive mode (pty, hints on)"
else
    fail "interactive mode (pty, hints on)" "$interactive"
fi

bench="$(timeout 180 redis-benchmark -h 127.0.0.1 -p "$PORT" -t ping,set,get -n 20000 -q 2>&1)"
bench_rc=$?
printf '%s\n' "$bench" | tr '\r' '\n' | grep 'requests per second' | sed 's/^/     /'
if [ $bench_rc -eq 0 ] && [ "$(printf '%s\n' "$bench" | tr '\r' '\n' | grep -c 'requests per second')" -ge 4 ]; then
    ok "redis-benchmark -t ping,set,get -n 20000"
else
    fail "redis-benchmark -t ping,set,get -n 20000" "$bench"
fi

timeout 20 "${CLI[@]}" DEL "$KEY" "$KEY:n" "$KEY:l" "$KEY:h" "$KEY:p" "$KEY:i" "$KEY:h2" >/dev/null 2>&1
echo "redis-cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
