"""PASS / FAIL lines for the Python clients of `make integration` (resp_clients.py,
feed_tail.py): `check` prints one line per check and counts the failures, which the script's
exit status reports."""

failures = 0


def check(name, condition, detail=""):
    """Prints PASS or FAIL for `name` (with `detail` under a FAIL), counting failures."""
    global failures
    if condition:
        print(f"PASS {name}")
    else:
        failures += 1
        print(f"FAIL {name}" + (f"\n     {detail}" if detail else ""))
