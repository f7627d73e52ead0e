#!/usr/bin/env bash
# What security costs, side by side, server pinned to CPU 0 and redis-benchmark to CPU 1,
# rounds alternating A,B,B,A,...:
#
#   tls    XADD over TLS, 50 clients, one request in flight (P1) and 16 (P16): rill's
#          tls-port against a Redis built with TLS (BUILD_TLS=yes), both with client
#          certificates not required; the plain-TCP figures of the same servers beside, so the
#          TLS cost of each is visible too.
#   acl    rill alone: XADD and GET as the default user (`+@all ~* &*`, the check skipped)
#          against a restricted user (`~bench:* +@all -@dangerous`, every key matched against
#          its pattern): what the per-command ACL check costs a user that has one.
#
#   bench/security.sh [--rounds N] [--requests N] [--redis PATH]
#
# PATH must be a redis-server built with TLS (the newest Redis from source, `make
# BUILD_TLS=yes`, as ../shared/conformance/README.md builds it; Debian's 7.0.15 by default,
# which has TLS). Certificates are made in the scratch dir with the openssl command.
set -euo pipefail
ROUNDS=3
REQUESTS=200000
REDIS=${REDIS:-/usr/bin/redis-server}
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --redis) REDIS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: apt-get install redis-tools" >&2; exit 2; }
command -v openssl >/dev/null || { echo "openssl missing: apt-get install openssl" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"

PKI="$WORK/pki"
mkdir -p "$PKI"
(
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=bench" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext 2>/dev/null
)
TLS_ARGS=(--tls-cert-file "$PKI/server.crt" --tls-key-file "$PKI/server.key" --tls-ca-cert-file "$PKI/ca.crt" --tls-auth-clients no)
A=$(free_port); AT=$(free_port)
B=$(free_port); BT=$(free_port)
start rill "$A" "$RILL" --port "$A" --tls-port "$AT" --bind 127.0.0.1 --dir "$WORK/rill" --save '' --appendonly no "${TLS_ARGS[@]}"
start redis "$B" "$REDIS" --port "$B" --tls-port "$BT" --bind 127.0.0.1 --save '' --appendonly no "${TLS_ARGS[@]}"
redis-cli -p "$A" ACL SETUSER bench on '>bench' '~bench:*' +@all -@dangerous >/dev/null

pid_of() { if [[ $1 == "$A" || $1 == "$AT" ]]; then echo "${PIDS[0]}"; else echo "${PIDS[1]}"; fi; }
bench() { # port pipeline test [benchmark options...] -- command... -> "test rps us_per_op"
    local port=$1 pipeline=$2 test=$3 pid before after rps n=$REQUESTS opts=()
    shift 3
    while [[ $1 != -- ]]; do opts+=("$1"); shift; done
    shift
    [[ $pipeline == 1 ]] && n=$((REQUESTS / 4))
    pid=$(pid_of "$port")
    before=$(cpu_ticks "$pid")
    rps=$(taskset -c 1 redis-benchmark -p "$port" -n "$n" -P "$pipeline" -c 50 -r 1000 --csv "${opts[@]}" "$@" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2 }')
    after=$(cpu_ticks "$pid")
    echo "$test $rps $(awk -v d=$((after - before)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')"
}
TLS_CLIENT=(--tls --cacert "$PKI/ca.crt")
XADD=(XADD 'bench:x:__rand_int__' MAXLEN '~' 1000 '*' f v)

: >"$WORK/results"
for pipeline in 1 16; do
    for r in $(seq "$ROUNDS"); do
        if (( r % 2 )); then order="A B"; else order="B A"; fi
        for who in $order; do
            if [[ $who == A ]]; then plain=$A; tls=$AT; side=rill; else plain=$B; tls=$BT; side=redis; fi
            {
                bench "$tls" "$pipeline" xadd_tls "${TLS_CLIENT[@]}" -- "${XADD[@]}"
                bench "$plain" "$pipeline" xadd_tcp -- "${XADD[@]}"
                if [[ $side == rill ]]; then
                    bench "$plain" "$pipeline" acl_default_xadd -- "${XADD[@]}"
                    bench "$plain" "$pipeline" acl_user_xadd --user bench -a bench -- "${XADD[@]}"
                    bench "$plain" "$pipeline" acl_default_get -- GET 'bench:g:__rand_int__'
                    bench "$plain" "$pipeline" acl_user_get --user bench -a bench -- GET 'bench:g:__rand_int__'
                fi
            } | while read -r test rps us; do echo "P$pipeline $r $side $test $rps $us"; done >>"$WORK/results"
        done
    done
done
echo "rill vs $("$REDIS" --version | awk '{print $3}'): medians over $ROUNDS rounds"
python3 - "$WORK/results" <<'PY'
import sys, statistics
v = {}
for line in open(sys.argv[1]):
    p, r, side, test, rps, us = line.split()
    v.setdefault((p, test), {}).setdefault(r, {})[side] = (float(rps), float(us))
med = statistics.median
for p in ("P1", "P16"):
    for test in ("xadd_tls", "xadd_tcp"):
        rounds = v.get((p, test), {})
        pairs = [(x["rill"], x["redis"]) for x in rounds.values() if "rill" in x and "redis" in x]
        if not pairs:
            continue
        tput = sorted(a[0] / b[0] for a, b in pairs)
        cpu = sorted(b[1] / a[1] for a, b in pairs if a[1] > 0)
        print(f"{p:4} {test:9} rill {med(a[0] for a, _ in pairs):9.0f}/s  redis {med(b[0] for _, b in pairs):9.0f}/s"
              f"  throughput {med(tput):.2f} ({tput[0]:.2f}..{tput[-1]:.2f})  CPU efficiency {med(cpu):.2f}")
    for cmd in ("xadd", "get"):
        d = v.get((p, f"acl_default_{cmd}"), {})
        u = v.get((p, f"acl_user_{cmd}"), {})
        rs = sorted(u[r]["rill"][0] / d[r]["rill"][0] for r in d if r in u)
        cs = sorted(u[r]["rill"][1] / d[r]["rill"][1] for r in d if r in u and d[r]["rill"][1] > 0)
        if rs:
            print(f"{p:4} acl {cmd:5} restricted user / default user: throughput {med(rs):.3f} ({rs[0]:.3f}..{rs[-1]:.3f})"
                  + (f"  CPU per op {med(cs):.3f}" if cs else ""))
PY
