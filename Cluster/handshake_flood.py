#!/usr/bin/env python3
"""A stranger that tries to hold many idle TCP connections to a syncnode's --listen port.

    handshake_flood.py HOST:PORT --status FILE [--sockets 1100] [--source 127.0.0.1]
                       [--reopen-per-second 500] [--seconds 60]

It sends nothing on any connection. Each one the node closes (refused, or timed out in its
handshake) is opened again, at most --reopen-per-second a second over all of them, so it keeps
trying to hold --sockets connections until SIGTERM, SIGINT or --seconds. Every 0.2 s, and at exit,
it writes one line to FILE (replaced whole): `open=N opened=N closed=N failed=N`: connections open now, opened
in all, ended (the node closed them, or the connect failed once under way) and connects that
could not even begin.

Standard library only; it raises its own descriptor limit to fit --sockets if the hard limit
allows.
"""
import argparse
import errno
import os
import resource
import selectors
import signal
import socket
import time

# Linux: bind the source address now, choose the port at connect (so a churn of connections
# does not run out of ports that TIME_WAIT still holds for this address).
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--status", required=True)
    parser.add_argument("--sockets", type=int, default=1100)
    parser.add_argument("--source", default="127.0.0.1")
    parser.add_argument("--reopen-per-second", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    port = int(port)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.sockets + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    selector = selectors.DefaultSelector()
    counts = {"opened": 0, "closed": 0, "failed": 0}
    # Opening budget: a token bucket of one second's worth.
    tokens = float(args.reopen_per_second)
    last_refill = time.monotonic()

    def open_one():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((args.source, 0))
        except OSError:
            sock.close()
            counts["failed"] += 1
            return
        status = sock.connect_ex((host, port))
        if status not in (0, errno.EINPROGRESS):
            sock.close()
            counts["failed"] += 1
            return
        selector.register(sock, selectors.EVENT_READ)
        counts["opened"] += 1

    def write_status():
        line = "open=%d opened=%d closed=%d failed=%d\n" % (
            len(selector.get_map()), counts["opened"], counts["closed"], counts["failed"])
        temporary = args.status + ".tmp"
        with open(temporary, "w") as handle:
            handle.write(line)
        os.replace(temporary, args.status)

    started = time.monotonic()
    next_status = started
    while not stopping and time.monotonic() - started < args.seconds:
        now = time.monotonic()
        tokens = min(float(args.reopen_per_second), tokens + (now - last_refill) * args.reopen_per_second)
        last_refill = now
        while len(selector.get_map()) < args.sockets and tokens >= 1:
            tokens -= 1
            open_one()
        for key, _ in selector.select(timeout=0.01):
            sock = key.fileobj
            try:
                data = sock.recv(4096)   # the node's hello or refusal, discarded; b"" at its close
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                selector.unregister(sock)
                sock.close()
                counts["closed"] += 1
        if now >= next_status:
            write_status()
            next_status = now + 0.2
    for key in list(selector.get_map().values()):
        selector.unregister(key.fileobj)
        key.fileobj.close()
    write_status()


if __name__ == "__main__":
    main()
