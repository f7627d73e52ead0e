"""What the HTTP-port tests (metrics_scrape.py, console_browser.py) share: the check counter
(checks.py, re-exported), a free loopback port, and a rill of their own with `--metrics-port`,
started in a scratch directory and waited for until it answers PING. The caller stops it by its
pid."""
import socket
import subprocess
import time

import redis

from checks import check, results  # noqa: F401 - re-exported to the HTTP-port tests

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(binary, dir_, *extra, password=None):
    """rill on free Redis and HTTP ports: (process, port, http port)."""
    port, http = free_port(), free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", dir_, "--save", "",
            "--metrics-port", str(http), *extra]
    p = subprocess.Popen(args, stdout=open(f"{dir_}/server.log", "w"), stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            r = redis.Redis(port=port, password=password, socket_timeout=5)
            if r.ping():
                return p, port, http
        except Exception:  # noqa: BLE001 - still starting
            time.sleep(0.05)
    p.kill()
    p.wait()
    raise RuntimeError("rill did not start")
