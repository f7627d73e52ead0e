#!/usr/bin/env python3
"""The operator console in a real browser: Debian's Chromium, headless, driven through
WebDriver (Debian's chromedriver, via Selenium), against a rill of its own with a scripted
workload: a stream with two groups, a consumer that crashed holding entries, a group policy,
dead letters of both provenance styles.

Checks: the overview lists the streams and groups; the stream page shows its groups, policy,
charts and dead-letter stream; the PEL view shows the crashed consumer's entries, and
acknowledging, claiming and handing back from it change the group (checked with redis-py);
replaying a dead letter moves it back to its source stream (checked with XRANGE); purging
removes one; read-only mode hides the actions and the API refuses them; a cross-origin POST and
a stale token are refused; no page needs a script (none has one); with a password, the console
asks for it. A screenshot of each page goes to target/console/.

Usage: console_browser.py RILL_SERVER_BINARY   (run with .deps/venv/bin/python)
Prints one line per check and a final line `console: N passed, M failed`; exits 1 on failure.
Every process it starts is stopped by pid; everything binds 127.0.0.1.
"""
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

import redis
from rill_http import check, results, start
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

BINARY = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHOTS = os.path.join(ROOT, "target", "console")


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-sync", "--metrics-recording-only",
              "--disable-default-apps", "--mute-audio", "--no-default-browser-check",
              "--disable-component-update", "--disable-features=Translate,OptimizationHints"]:
        opts.add_argument(a)
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver",
                      log_output=subprocess.DEVNULL)
    return webdriver.Chrome(options=opts, service=service)


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))


def post(http, fields, headers=None, auth=None):
    data = urllib.parse.urlencode(fields, doseq=True).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{http}/action", data=data, method="POST")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def get(http, path, auth=None):
    req = urllib.request.Request(f"http://127.0.0.1:{http}{path}")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def workload(r):
    for i in range(6):
        r.xadd("orders", {"sku": f"sku-{i}", "qty": str(i + 1)}, id=f"{i + 1}-0")
    r.xgroup_create("orders", "billing", id="0")
    r.xgroup_create("orders", "audit", id="0")
    # `crashed` read three entries and never came back; `alive` read and acknowledged two.
    r.xreadgroup("billing", "crashed", {"orders": ">"}, count=3)
    got = r.xreadgroup("billing", "alive", {"orders": ">"}, count=2)
    r.xack("orders", "billing", *[e[0] for e in got[0][1]])
    r.xreadgroup("audit", "auditor", {"orders": ">"})
    r.execute_command("RILL.GROUP", "SET", "orders", "billing", "MAXDELIVER", "5")
    letter = {"sku": "bad-1", "qty": "0", "rill-source-stream": "orders", "rill-source-id": "90-0",
              "rill-group": "billing", "rill-consumer": "crashed", "rill-deliveries": "5",
              "rill-reason": "poison pill"}
    r.xadd("{orders}:dlq", letter, id="100-0")
    r.xadd("{orders}:dlq", {**letter, "sku": "bad-2", "rill-source-id": "91-0"}, id="101-0")
    r.xadd("{orders}:dlq", {"sku": "posted", "deadLetteredFrom": "orders/92-0"}, id="102-0")
    r.xadd("{orders}:dlq", {"note": "not a letter"}, id="103-0")


def main():
    dir_ = tempfile.mkdtemp(prefix="rill-console-")
    proc = driver = None
    try:
        proc, port, http = start(BINARY, dir_)
        r = redis.Redis(port=port, decode_responses=True, socket_timeout=10)
        workload(r)
        driver = browser()
        base = f"http://127.0.0.1:{http}"
        seen_pages = []

        def page(path, name):
            driver.get(base + path)
            shot(driver, name)
            seen_pages.append((name, driver.page_source))

        def overview():
            page("/", "overview")
            table = driver.find_element(By.ID, "streams").text
            for want in ["orders", "billing", "audit", "{orders}:dlq"]:
                assert want in table, table
            rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                    for tr in driver.find_elements(By.CSS_SELECTOR, "#streams tbody tr")]
            # stream length in memory | group lag lag-age pending oldest consumers dead-lettered
            orders = [row for row in rows if row[0] == "orders" or (row[0] == "" and row[4])]
            assert orders[0][:2] == ["orders", "6"], rows
            billing = next(row for row in orders if row[4] == "billing")
            assert billing[5] == "1" and billing[7] == "3" and billing[9] == "2", billing
            assert billing[10] == "0", billing  # its policy's dead-letter count
            audit = next(row for row in orders if row[4] == "audit")
            assert audit[5] == "0" and audit[7] == "6" and audit[10] == "-", audit
            assert driver.find_element(By.ID, "chart-ops")

        check("the overview lists the streams and their groups", overview)

        def stream_page():
            driver.get(base + "/")
            driver.find_element(By.LINK_TEXT, "orders").click()
            shot(driver, "stream")
            seen_pages.append(("stream", driver.page_source))
            groups = driver.find_element(By.ID, "groups").text
            assert "billing" in groups and "audit" in groups, groups
            assert "MAXDELIVER 5" in groups, groups
            assert driver.find_elements(By.CSS_SELECTOR, "figure.chart svg"), "no charts"
            entries = driver.find_element(By.ID, "entries").text
            assert "6-0" in entries and "sku-5" in entries, entries
            assert driver.find_element(By.LINK_TEXT, "{orders}:dlq")

        check("the stream page shows groups, policy, charts, dead-letter stream", stream_page)

        def pel_view():
            driver.get(base + "/stream?db=0&key=orders")
            driver.find_element(By.LINK_TEXT, "billing").click()
            shot(driver, "group")
            seen_pages.append(("group", driver.page_source))
            rows = [tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "#pel tbody tr")]
            assert len(rows) == 3 and all("crashed" in t for t in rows), rows
            assert [t.split()[0] for t in rows] == ["1-0", "2-0", "3-0"], rows
            assert "crashed" in driver.find_element(By.ID, "consumers").text
            assert "maxdeliver 5" in driver.find_element(By.ID, "policy").text, "policy table"
            driver.find_element(By.LINK_TEXT, "crashed").click()
            rows = driver.find_elements(By.CSS_SELECTOR, "#pel tbody tr")
            assert len(rows) == 3

        check("the PEL view shows the crashed consumer's entries", pel_view)

        def tick(entry_id):
            driver.find_element(By.CSS_SELECTOR, f"input[type=checkbox][value='{entry_id}']").click()

        def banner(expected):
            """The action's message, once the page it redirected to has it (or the last seen)."""
            seen = ""
            deadline = time.time() + 10
            while time.time() < deadline:
                try:
                    seen = driver.find_element(By.CSS_SELECTOR, "p.msg").text
                except Exception:  # noqa: BLE001 - the old page is going, the new one not there yet
                    seen = ""
                if expected in seen:
                    return seen
                time.sleep(0.05)
            return seen

        def act_on_pel():
            driver.get(base + "/group?db=0&key=orders&group=billing")
            tick("1-0")
            driver.find_element(By.ID, "ack").click()
            msg = banner("Acknowledged 1 of 1 entries.")
            assert "Acknowledged 1 of 1 entries." in msg, msg
            pending = r.xpending_range("orders", "billing", "-", "+", 10)
            assert [p["message_id"] for p in pending] == ["2-0", "3-0"], pending
            tick("2-0")
            driver.find_element(By.ID, "claim-consumer").send_keys("rescuer")
            driver.find_element(By.ID, "claim").click()
            msg = banner("Claimed 1 of 1 entries for rescuer.")
            assert "Claimed 1 of 1 entries for rescuer." in msg, msg
            owners = {p["message_id"]: p["consumer"] for p in r.xpending_range("orders", "billing", "-", "+", 10)}
            assert owners == {"2-0": "rescuer", "3-0": "crashed"}, owners
            tick("3-0")
            driver.find_element(By.ID, "handback").click()
            msg = banner("Handed back 1 of 1 entries.")
            assert "Handed back 1 of 1 entries." in msg, msg
            # The handed-back entry waits in the group's hand-back queue, owned by no one.
            info = r.execute_command("RILL.GROUP", "INFO", "orders", "billing")
            fields = dict(zip(info[::2], info[1::2])) if isinstance(info, list) else info
            assert int(fields["handed-back-queue"]) == 1, fields
            owners = [p["consumer"] for p in r.xpending_range("orders", "billing", "-", "+", 10)]
            assert "crashed" not in owners, owners
            shot(driver, "group-after-actions")

        check("ack, claim and hand back from the PEL view", act_on_pel)

        def replay():
            driver.get(base + "/stream?db=0&key=orders")
            driver.find_element(By.LINK_TEXT, "{orders}:dlq").click()
            shot(driver, "dead-letters")
            seen_pages.append(("dead-letters", driver.page_source))
            letters = driver.find_element(By.ID, "letters").text
            assert "poison pill" in letters and "not a dead letter" in letters, letters
            before = r.xlen("orders")
            tick("100-0")
            driver.find_element(By.ID, "replay").click()
            msg = banner("Replayed 1 of 1 dead letters.")
            assert "Replayed 1 of 1 dead letters." in msg, msg
            last = r.xrevrange("orders", "+", "-", count=1)[0][1]
            assert last == {"sku": "bad-1", "qty": "0"}, last
            assert r.xlen("orders") == before + 1
            assert [e[0] for e in r.xrange("{orders}:dlq")] == ["101-0", "102-0", "103-0"]
            tick("101-0")
            driver.find_element(By.ID, "purge").click()
            msg = banner("Purged 1 of 1 dead letters.")
            assert "Purged 1 of 1 dead letters." in msg, msg
            driver.find_element(By.ID, "replay-all").click()
            msg = banner("Replayed 1 of 1 dead letters. (1 entries without provenance kept)")
            assert "Replayed 1 of 1 dead letters. (1 entries without provenance kept)" in msg, msg
            assert r.xrevrange("orders", "+", "-", count=1)[0][1] == {"sku": "posted"}
            assert [e[0] for e in r.xrange("{orders}:dlq")] == ["103-0"]
            shot(driver, "dead-letters-after-replay")

        check("replaying a dead letter moves it back to its source stream", replay)

        def replication_page():
            page("/replication", "replication")
            assert "master" in driver.find_element(By.ID, "info").text
            assert driver.find_element(By.ID, "replicas")

        check("the replication panel", replication_page)

        token = {}

        def refusals():
            driver.get(base + "/group?db=0&key=orders&group=billing")
            tok = driver.find_element(By.NAME, "token").get_attribute("value")
            token["value"] = tok
            form = {"token": tok, "db": "0", "key": "orders", "group": "billing", "op": "ack", "id": "3-0",
                    "back": "/"}
            status, _ = post(http, form, headers={"Origin": "http://evil.example"})
            assert status == 403, status
            status, _ = post(http, form, headers={"Sec-Fetch-Site": "cross-site"})
            assert status == 403, status
            status, _ = post(http, {**form, "token": "0" * 32})
            assert status == 403, status
            status, _ = post(http, {k: v for k, v in form.items() if k != "token"})
            assert status == 403, status
            assert get(http, "/action")[0] == 405
            status, _ = post(http, {**form, "pad": "x" * 70000})
            assert status == 413, status
            req = urllib.request.Request(f"http://127.0.0.1:{http}/action", data=b'{"op":"ack"}', method="POST")
            req.add_header("Content-Type", "application/json")
            try:
                urllib.request.urlopen(req, timeout=10)
                raise AssertionError("a JSON body was accepted")
            except urllib.error.HTTPError as e:
                assert e.code == 415, e.code
            assert len(r.xpending_range("orders", "billing", "-", "+", 10)) == 2
            # A redirect only ever leads back into the console.
            status, body = post(http, {**form, "op": "nothing", "back": "//evil.example/x"})
            assert status == 303, (status, body)
            assert r.ping()

        check("cross-origin posts and stale tokens are refused", refusals)

        def read_only():
            r.config_set("console-read-only", "yes")
            driver.get(base + "/group?db=0&key=orders&group=billing")
            shot(driver, "group-read-only")
            assert not driver.find_elements(By.CSS_SELECTOR, "input[type=checkbox]")
            assert not driver.find_elements(By.TAG_NAME, "button")
            assert not driver.find_elements(By.TAG_NAME, "form")
            assert "read-only" in driver.find_element(By.TAG_NAME, "header").text
            rows = driver.find_elements(By.CSS_SELECTOR, "#pel tbody tr")
            assert len(rows) == 2
            driver.get(base + "/dlq?db=0&key=%7Borders%7D%3Adlq")
            assert not driver.find_elements(By.TAG_NAME, "button")
            status, body = post(http, {"token": token["value"], "db": "0", "key": "orders", "group": "billing",
                                       "op": "ack", "id": "3-0"})
            assert status == 403 and "read-only" in body, (status, body)
            assert len(r.xpending_range("orders", "billing", "-", "+", 10)) == 2
            r.config_set("console-read-only", "no")

        check("read-only mode hides the actions and the API refuses them", read_only)

        def no_scripts():
            assert seen_pages
            for name, src in seen_pages:
                assert "<script" not in src.lower(), name
            status, headers, _ = get(http, "/")
            csp = {k.lower(): v for k, v in headers.items()}["content-security-policy"]
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, csp

        check("no page needs a script", no_scripts)
    finally:
        if driver:
            driver.quit()
        if proc:
            proc.kill()
            proc.wait()
        shutil.rmtree(dir_, ignore_errors=True)

    dir_ = tempfile.mkdtemp(prefix="rill-console-")
    proc = None
    try:
        proc, port, http = start(BINARY, dir_, "--requirepass", "s3cret", password="s3cret")

        def password():
            status, headers, _ = get(http, "/")
            assert status == 401, status
            assert {k.lower(): v for k, v in headers.items()}["www-authenticate"].startswith("Basic")
            assert get(http, "/", auth="admin:wrong")[0] == 401
            status, _, body = get(http, "/", auth="admin:s3cret")
            assert status == 200 and "Streams" in body
            status, _ = post(http, {"op": "purge-all", "key": "x"})
            assert status == 401, status

        check("with a password, the console asks for it", password)
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
    print(f"console: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)
