#!/usr/bin/env python3
"""Hostile clients against one running syncnode, on raw sockets (Cluster/integration.sh, (v)).

    hostile_clients.py huge-auth HOST:PORT PID
        16 strangers each declare a 64 MiB AUTH argument and send up to 60 MiB of it. Prints
        the node's VmRSS before, its peak while they send, and after, and what they were told;
        exits 1 unless its RSS stayed within 64 MiB of where it started and none sent the whole.

    hostile_clients.py patterns HOST:PORT PASSWORD
        One client subscribes 2,000 patterns of about 1 KB that each cost a long key's change
        real matching work, after a refused one of 60 KB; another SETs such a key 5 times while
        a third PINGs every 10 ms. Prints the slowest PING (and those over 100 ms) and INFO's
        matching counts; exits 1 if a PING waited 1 s or more (the unbounded matcher held one 32-64 s; a debug build answers within ~125 ms).
"""
import socket
import sys
import threading
import time


def address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def command(*arguments):
    out = b"*%d\r\n" % len(arguments)
    for argument in arguments:
        if isinstance(argument, str):
            argument = argument.encode()
        out += b"$%d\r\n%s\r\n" % (len(argument), argument)
    return out


class Replies:
    """A minimal RESP2 reply reader: simple strings, errors, integers, bulks, arrays."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def _line(self):
        while b"\r\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def _exact(self, count):
        while len(self.buffer) < count + 2:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buffer += data
        value, self.buffer = self.buffer[:count], self.buffer[count + 2:]
        return value

    def next(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return (kind, rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            return None if int(rest) < 0 else self._exact(int(rest))
        if kind in (b"*", b">"):
            return [self.next() for _ in range(int(rest))]
        raise ValueError(f"unexpected reply {line!r}")


def huge_auth(target, pid):
    before = rss_kib(pid)
    outcomes = [None] * 16

    def stranger(index):
        sock = socket.create_connection(address(target))
        sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$67108864\r\n")
        chunk = b"x" * (1 << 20)
        sent = 0
        try:
            for _ in range(60):
                sock.sendall(chunk)
                sent += 1
        except OSError:
            pass
        told = b""
        sock.settimeout(10)
        try:
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                told += data
        except OSError:
            pass
        sock.close()
        outcomes[index] = (sent, told)

    threads = [threading.Thread(target=stranger, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    peak = before
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, rss_kib(pid))
        time.sleep(0.02)
    for thread in threads:
        thread.join()
    after = rss_kib(pid)
    told = sorted({outcome[1].decode(errors="replace").strip() or "(reset before the reply was read)" for outcome in outcomes})
    sent_mib = max(outcome[0] for outcome in outcomes)
    print(f"rss_before_kib={before} rss_peak_kib={peak} rss_after_kib={after} "
          f"most_sent_mib={sent_mib} told={told}")
    return (peak - before) < 64 * 1024 and sent_mib < 60


def patterns(target, password):
    subscriber = socket.create_connection(address(target))
    subscriber_replies = Replies(subscriber)
    subscriber.sendall(command("AUTH", password))
    assert subscriber_replies.next() == (b"+", b"OK")
    subscriber.sendall(command("PSUBSCRIBE", "p" * 60_000))
    refused = subscriber_replies.next()
    names = ["*" + "a" * (900 + i % 50) + "b" + str(i) for i in range(2_000)]
    names.append("__keyspace@0__:a*")  # the one that matches, told after the work
    started = time.monotonic()
    for start in range(0, len(names), 100):
        batch = names[start:start + 100]
        subscriber.sendall(command("PSUBSCRIBE", *batch))
        for _ in batch:
            reply = subscriber_replies.next()
            if isinstance(reply, tuple):
                print(f"PSUBSCRIBE refused: {reply}")
                return False
    subscribed_seconds = time.monotonic() - started

    writer = socket.create_connection(address(target))
    writer_replies = Replies(writer)
    pinger = socket.create_connection(address(target))
    pinger_replies = Replies(pinger)
    for sock, replies in ((writer, writer_replies), (pinger, pinger_replies)):
        sock.sendall(command("AUTH", password))
        assert replies.next() == (b"+", b"OK")
    key = "a" * 1000
    sets = 5
    for _ in range(sets):
        writer.sendall(command("SET", key, "v"))
        assert writer_replies.next() == (b"+", b"OK")
    told = 0
    slowest = 0.0
    pings = 0
    slow = []
    subscriber.setblocking(False)
    deadline = time.monotonic() + 300
    while told < sets and time.monotonic() < deadline:
        sent = time.monotonic()
        pinger.sendall(command("PING"))
        assert pinger_replies.next() == (b"+", b"PONG")
        latency = time.monotonic() - sent
        slowest = max(slowest, latency)
        if latency > 0.1:
            slow.append((pings, round(latency * 1000)))
        pings += 1
        try:
            while True:
                subscriber_replies.buffer += subscriber.recv(1 << 20)
        except BlockingIOError:
            pass
        told = subscriber_replies.buffer.count(b"pmessage")
        time.sleep(0.01)
    pinger.sendall(command("INFO", "clients"))
    info = pinger_replies.next().decode()
    busiest = next((line.split(":")[1].strip() for line in info.splitlines()
                    if line.startswith("notification_busiest_turn_steps")), "?")
    total = next((line.split(":")[1].strip() for line in info.splitlines()
                  if line.startswith("notification_match_steps")), "?")
    print(f"refused_60k={refused!r} subscribed_2000_in_s={subscribed_seconds:.2f} sets={sets} told={told} "
          f"pings={pings} slow={slow[:5]} slowest_ping_ms={slowest * 1000:.1f} match_steps={total} busiest_turn_steps={busiest}")
    return told == sets and slowest < 1.0 and isinstance(refused, tuple) and refused[0] == b"-"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "huge-auth":
        sys.exit(0 if huge_auth(sys.argv[2], int(sys.argv[3])) else 1)
    if len(sys.argv) == 4 and sys.argv[1] == "patterns":
        sys.exit(0 if patterns(sys.argv[2], sys.argv[3]) else 1)
    print(__doc__, file=sys.stderr)
    sys.exit(2)
