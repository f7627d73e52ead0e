"""The check counter the Python client tests share: run one named check, print ok/FAIL (with the
traceback), and count it in `results`, which the test prints and turns into its exit status."""
import sys
import traceback

results = {"passed": 0, "failed": 0}


def check(name, fn):
    """Run one check; count and print its outcome (a failure's traceback too)."""
    try:
        fn()
    except Exception:  # noqa: BLE001 - report every kind of failure the same way
        results["failed"] += 1
        print(f"FAIL {name}")
        traceback.print_exc(file=sys.stdout)
    else:
        results["passed"] += 1
        print(f"ok   {name}")
