"""A Python reader tailing one syncnode peer's change feed while that peer is killed with -9 and
restarted (make integration, case (feed); docs/operations.md, "The change feed").

A writer sets fresh keys (feed:N) through the other peer B, so every write reaches A as a peer's
delta or, after A's restart, by catch-up. The reader tails A with DECIDE.CHANGES ... BLOCK,
reconnecting and resuming from its last position and feed whenever A goes away. The shell
kills and restarts A meanwhile; it creates STOPFILE when the writer should stop. Then the
reader drains A's feed until A holds every acknowledged write, and checks that:

- no position came twice and none was skipped, and the feed stayed the same across the kill;
- every acknowledged write came exactly once;
- what the reader built from the changes is exactly what A holds (DECIDE.SNAPSHOT).

Usage: feed_tail.py HOST:PORT-of-A HOST:PORT-of-B STOPFILE
Prints PASS or FAIL lines and a summary; exits 1 if any check failed.
"""

import json
import os
import sys
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import checks
from checks import check



def client(address, retries=3):
    """A client of ADDRESS; the reader's retries nothing itself, so it sees every disconnect."""
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=10, socket_connect_timeout=2,
                       retry=Retry(NoBackoff(), retries))


class Reader:
    """Tails a peer's feed, resuming from its position and feed after every disconnect."""

    def __init__(self, address):
        self.address = address
        self.after = "-"
        self.feed = None
        self.positions = []
        self.writes = {}           # key -> list of values written, in feed order
        self.mirror = {}
        self.reconnects = 0
        self.errors = []
        self.newest = 0
        self.lock = threading.Lock()

    def read_once(self, connection, block_ms):
        command = ["DECIDE.CHANGES", self.after, "COUNT", "1000", "BLOCK", str(block_ms)]
        if self.feed:
            command += ["FEED", self.feed]
        reply = connection.execute_command(*command)
        header = json.loads(reply[0])
        if self.feed is None:
            self.feed = header["feed"]
        elif header["feed"] != self.feed:
            self.errors.append(f"the feed changed from {self.feed} to {header['feed']}")
        with self.lock:
            for line in reply[1:]:
                change = json.loads(line)
                self.positions.append(change["position"])
                for write in change["writes"]:
                    key = write["key"]
                    if key.startswith("feed:"):
                        self.writes.setdefault(key, []).append(write["value"])
                    if write["value"] is None:
                        self.mirror.pop(key, None)
                    else:
                        self.mirror[key] = write["value"]
            self.after = str(header["end"])
            self.newest = header["newest"]
        return len(reply) - 1

    def run(self, stop):
        connection = None
        while not stop.is_set():
            try:
                if connection is None:
                    connection = client(self.address, retries=0)
                self.read_once(connection, 200)
            except redis.ResponseError as error:
                self.errors.append(str(error))
                return
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                connection = None
                self.reconnects += 1
                time.sleep(0.05)


def main():
    a_address, b_address, stop_file = sys.argv[1:4]
    reader = Reader(a_address)
    stop_reading = threading.Event()
    thread = threading.Thread(target=reader.run, args=(stop_reading,), daemon=True)
    thread.start()

    writer = client(b_address)
    acknowledged = {}
    index = 0
    deadline = time.time() + 30
    while not os.path.exists(stop_file) and time.time() < deadline:
        key, value = f"feed:{index}", f"v{index}"
        if writer.set(key, value):
            acknowledged[key] = value
        index += 1
        if index % 50 == 0:
            time.sleep(0.01)

    # A holds every acknowledged write (catch-up after its restart included)?
    a = None
    holds_all = False
    for _ in range(300):
        try:
            a = a or client(a_address)
            keys = list(acknowledged)
            held = []
            for start in range(0, len(keys), 500):
                held += a.mget(keys[start:start + 500])
            if all(value is not None and value.decode() == acknowledged[key] for key, value in zip(keys, held)):
                holds_all = True
                break
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            a = None
        time.sleep(0.1)
    check("A holds every acknowledged write", holds_all, f"{len(acknowledged)} acknowledged")

    # The reader drains A's feed to its newest.
    for _ in range(300):
        with reader.lock:
            if reader.after != "-" and int(reader.after) >= reader.newest and reader.newest > 0:
                break
        time.sleep(0.1)
    time.sleep(0.5)
    stop_reading.set()
    thread.join(timeout=5)

    check("no error from the feed (no OUTOFRETENTION, OTHERFEED or AHEAD)", not reader.errors, "; ".join(reader.errors[:3]))
    positions = reader.positions
    check("every position once, none skipped", positions == list(range(positions[0], positions[0] + len(positions))) if positions else False,
          f"{len(positions)} positions, first {positions[:3]}, duplicates {len(positions) - len(set(positions))}")
    check("the reader resumed after the kill", reader.reconnects > 0, "it never lost its connection: was the peer killed?")
    missing = [key for key in acknowledged if key not in reader.writes]
    twice = [key for key, values in reader.writes.items() if len(values) != 1]
    wrong = [key for key in acknowledged if key in reader.writes and reader.writes[key] != [acknowledged[key]]]
    check("every acknowledged write came exactly once", not missing and not twice and not wrong,
          f"missing {len(missing)} {missing[:3]}, more than once {len(twice)} {twice[:3]}, other values {wrong[:3]}")
    snapshot = client(a_address).execute_command("DECIDE.SNAPSHOT", "PREFIX", "feed:")
    held = {}
    for line in snapshot[1:]:
        entry = json.loads(line)
        held[entry["key"]] = entry["value"]
    built = {key: value for key, value in reader.mirror.items() if key.startswith("feed:")}
    check("the reader holds exactly what A holds", built == held,
          f"reader {len(built)} keys, A {len(held)}; differing {[k for k in set(built) | set(held) if built.get(k) != held.get(k)][:3]}")
    print(f"summary: {len(acknowledged)} writes acknowledged, {len(positions)} changes read, "
          f"{reader.reconnects} reconnects, feed {reader.feed}")
    sys.exit(1 if checks.failures else 0)


if __name__ == "__main__":
    main()
