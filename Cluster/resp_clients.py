"""A Python service talking to a Decide cluster through redis-py (make integration, section (m)):
keys, notifications, transactions, pipelines, RESP3, counters changed on both peers at once.

It writes through one syncnode peer (A) and reads and subscribes on another (B), the way a
Python service sharing state with a Swift process would. Usage:

    resp_clients.py HOST:PORT-of-A HOST:PORT-of-B

Prints one PASS or FAIL line per check and exits 1 if any failed.
"""

import json
import socket
import sys
import time

import redis

import checks
from checks import check


def raises(call, text):
    """Whether `call` raises a Redis error whose message contains `text`."""
    try:
        call()
    except redis.ResponseError as error:
        return text in str(error)
    return False


def eventually(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def at_once(*threads):
    """Starts every thread, then waits for all of them: writers on two peers at the same time."""
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def connect(address, protocol=2):
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), protocol=protocol, socket_timeout=10)


def messages(pubsub, wanted, seconds=10.0):
    """Reads pubsub messages until `wanted` (a list of (channel, data)) were all seen."""
    seen = []
    deadline = time.monotonic() + seconds
    remaining = list(wanted)
    while remaining and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.2)
        if not message or message["type"] not in ("message", "pmessage"):
            continue
        pair = (message["channel"], message["data"])
        seen.append(pair)
        if pair in remaining:
            remaining.remove(pair)
    return remaining, seen


def main():
    a, b = connect(sys.argv[1]), connect(sys.argv[2])
    check("PING on both peers", a.ping() and b.ping())

    watcher = b.pubsub()
    watcher.psubscribe("__keyspace@0__:py:*")
    decide_watcher = b.pubsub()
    decide_watcher.psubscribe("__decide@0__:py:*")
    # The subscriptions are confirmed before anything is written.
    for pubsub in (watcher, decide_watcher):
        confirmed = eventually(lambda: (m := pubsub.get_message(timeout=0.2)) is not None and m["type"] == "psubscribe")
        check("PSUBSCRIBE confirmed", confirmed)

    # A write on A reaches B, and B's subscribers hear of it.
    check("SET on A", a.set("py:flag", "on") is True)
    check("GET on B sees A's write", eventually(lambda: b.get("py:flag") == b"on"), repr(b.get("py:flag")))
    missing, seen = messages(watcher, [(b"__keyspace@0__:py:flag", b"set")])
    check("B's keyspace subscriber hears A's SET", not missing, f"seen {seen}")
    missing, seen = [], []
    deadline = time.monotonic() + 10
    remote = None
    while time.monotonic() < deadline and remote is None:
        message = decide_watcher.get_message(timeout=0.2)
        if message and message["type"] == "pmessage" and message["channel"] == b"__decide@0__:py:flag":
            remote = json.loads(message["data"])
    check("__decide@0__ carries the entry as JSON with origin remote",
          remote is not None and remote["value"] == "on" and remote["origin"] == "remote" and not remote["deleted"],
          repr(remote))

    # Local writes on B are heard too.
    b.set("py:local", "1")
    missing, seen = messages(watcher, [(b"__keyspace@0__:py:local", b"set")])
    check("B's subscriber hears B's own SET", not missing, f"seen {seen}")

    # The value mapping: JSON stays JSON, text becomes a JSON string, both read back as written.
    a.set("py:json", '{"replicas": 3}')
    a.set("py:text", "deploy at 5pm")
    check("JSON and text replicate and read back byte for byte",
          eventually(lambda: b.get("py:json") == b'{"replicas": 3}' and b.get("py:text") == b"deploy at 5pm"))
    entry = json.loads(b.execute_command("DECIDE.GET", "py:text"))
    check("text is stored as a JSON string (what a Swift String state reads)", entry["value"] == "deploy at 5pm", repr(entry))
    entry = json.loads(b.execute_command("DECIDE.GET", "py:json"))
    check("a JSON text is stored as that JSON", entry["value"] == {"replicas": 3}, repr(entry))
    try:
        a.set("py:binary", b"\xff\xfe\x00")
        check("bytes that are not UTF-8 are refused", False, "SET succeeded")
    except redis.ResponseError as error:
        check("bytes that are not UTF-8 are refused", "not valid UTF-8" in str(error), str(error))

    # MSET is one decision: one version on every key, on the replica too.
    keys = {f"py:batch[{i}]": str(i) for i in range(50)}
    check("MSET on A", a.mset(keys) is True)
    check("B holds the whole MSET", eventually(lambda: b.mget(list(keys)) == [v.encode() for v in keys.values()]))
    versions = {json.dumps(json.loads(b.execute_command("DECIDE.GET", k))["version"], sort_keys=True) for k in keys}
    check("every key of the MSET carries one version on B", len(versions) == 1, f"{len(versions)} versions")

    # A transaction, as redis-py sends one (pipeline() is MULTI ... EXEC): one decision, each
    # command seeing the writes of those before it.
    with a.pipeline() as tx:
        tx.set("py:tx:a", "1").get("py:tx:a").set("py:tx:b", "2", nx=True).set("py:tx:b", "3", nx=True)
        tx.mget("py:tx:a", "py:tx:b").delete("py:tx:never")
        replies = tx.execute()
    check("MULTI/EXEC through redis-py's pipeline() answers each command, reads seeing the block's writes",
          replies == [True, b"1", True, None, [b"1", b"2"], 0], repr(replies))
    check("B holds the transaction's writes", eventually(lambda: b.mget("py:tx:a", "py:tx:b") == [b"1", b"2"]))
    versions = {json.dumps(json.loads(b.execute_command("DECIDE.GET", k))["version"], sort_keys=True) for k in ("py:tx:a", "py:tx:b")}
    check("the transaction's keys carry one version on B", len(versions) == 1, f"{len(versions)} versions")
    try:
        with a.pipeline() as tx:
            tx.set("py:tx:c", "1").append("py:tx:c", "x")
            tx.execute()
        check("a transaction holding a refused command is aborted", False, "EXEC succeeded")
    except redis.ResponseError as error:
        check("a transaction holding a refused command is aborted, nothing written",
              "last-writer-wins" in str(error) and a.get("py:tx:c") is None, str(error))
    with a.pipeline() as tx:
        tx.set("py:tx:n", "5").incr("py:tx:n").incrby("py:tx:n", 10)
        check("a transaction's INCR sees the block's SET", tx.execute() == [True, 6, 16])

    # Pipelining, DEL, EXISTS, SCAN.
    pipe = a.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"py:pipe:{i}", i)
    replies = pipe.execute()
    check("1,000 pipelined SETs all answer OK", replies == [True] * 1000)
    check("B holds the 1,000 keys", eventually(lambda: b.exists(*[f"py:pipe:{i}" for i in range(1000)]) == 1000))
    scanned = set(b.scan_iter(match="py:pipe:*", count=100))
    check("SCAN on B returns each of the 1,000 keys", scanned == {f"py:pipe:{i}".encode() for i in range(1000)}, f"{len(scanned)} keys")
    check("DEL on A counts the keys it deleted", a.delete("py:flag", "py:never-written") == 1)
    check("B no longer has the deleted key", eventually(lambda: b.get("py:flag") is None))
    missing, seen = messages(watcher, [(b"__keyspace@0__:py:flag", b"del")])
    check("B's subscriber hears the DEL", not missing, f"seen {seen}")

    # What last-writer-wins cannot keep is refused, and says why.
    try:
        a.append("py:text", "!")
        check("APPEND is refused", False, "APPEND succeeded")
    except redis.ResponseError as error:
        check("APPEND is refused with the reason", "last-writer-wins" in str(error), str(error))

    # RESP3: the same data, push messages for the subscriber.
    a3, b3 = connect(sys.argv[1], protocol=3), connect(sys.argv[2], protocol=3)
    check("RESP3 GET reads the RESP2 client's write", eventually(lambda: b3.get("py:text") == b"deploy at 5pm"))
    pushes = b3.pubsub()
    pushes.subscribe("__keyspace@0__:py:resp3")
    eventually(lambda: (m := pushes.get_message(timeout=0.2)) is not None and m["type"] == "subscribe")
    a3.set("py:resp3", "x")
    missing, seen = messages(pushes, [(b"__keyspace@0__:py:resp3", b"set")])
    check("a RESP3 subscriber gets push messages", not missing, f"seen {seen}")

    for connection in (watcher, decide_watcher, pushes):
        connection.close()

    # A rate limiter on two peers at once: threads on A and on B each INCR one key, as a Python
    # service behind a load balancer would; every increment counts on both peers (a counter,
    # docs/operations.md "Counters"), where last-writer-wins would lose some.
    import threading

    def limiter(address, rounds, replies):
        client = connect(address)
        for _ in range(rounds):
            replies.append(client.incr("py:limit"))

    replies_a, replies_b = [], []
    threads = [threading.Thread(target=limiter, args=(sys.argv[1], 500, replies_a)) for _ in range(4)]
    threads += [threading.Thread(target=limiter, args=(sys.argv[2], 500, replies_b)) for _ in range(4)]
    at_once(*threads)
    check("4,000 INCRs from 8 threads on A and B all answer an integer",
          len(replies_a) + len(replies_b) == 4000 and all(isinstance(r, int) for r in replies_a + replies_b))
    check("A reads the exact total of every INCR on A and B", eventually(lambda: a.get("py:limit") == b"4000"), repr(a.get("py:limit")))
    check("B reads the exact total too", eventually(lambda: b.get("py:limit") == b"4000"), repr(b.get("py:limit")))
    check("a counter is a string to TYPE", b.type("py:limit") == b"string")
    # A number SET once, then taken over by INCRBY on both peers at once, counts once.
    a.set("py:quota", "100")
    check("B sees the quota", eventually(lambda: b.get("py:quota") == b"100"))
    at_once(*[threading.Thread(target=lambda address=address: connect(address).decrby("py:quota", 10)) for address in sys.argv[1:3]])
    check("two DECRBY 10 of a SET 100 on A and B at once leave 80 on both",
          eventually(lambda: a.get("py:quota") == b"80" and b.get("py:quota") == b"80"), f"{a.get('py:quota')!r} {b.get('py:quota')!r}")
    check("DEL of a counter on A removes it on B", a.delete("py:limit") == 1 and eventually(lambda: b.get("py:limit") is None))

    # Redis's fixed-window rate limiter on two peers (docs/operations.md "Lifetimes of counters"):
    # INCR, and EXPIRE on the first hit of the window, in a pipeline; threads on A and B count one
    # window at once. Every hit counts, the window has its lifetime on both peers, every peer's
    # share goes at its end, and the next window counts from 1.
    def window(address, rounds, replies):
        client = connect(address)
        for _ in range(rounds):
            pipe = client.pipeline(transaction=True)
            pipe.incr("py:window")
            pipe.pexpire("py:window", 3000, nx=True)
            replies.append(pipe.execute()[0])

    hits_a, hits_b = [], []
    at_once(*[threading.Thread(target=window, args=(address, 200, hits)) for address, hits in
              ((sys.argv[1], hits_a), (sys.argv[2], hits_b), (sys.argv[1], hits_a), (sys.argv[2], hits_b))])
    check("800 hits of one window from A and B all count",
          eventually(lambda: a.get("py:window") == b"800" and b.get("py:window") == b"800"), f"{a.get('py:window')!r} {b.get('py:window')!r}")
    check("the window has its lifetime on both peers", 0 < a.pttl("py:window") <= 3000 and 0 < b.pttl("py:window") <= 3000,
          f"{a.pttl('py:window')} {b.pttl('py:window')}")
    check("the window ends on both peers, every peer's share with it",
          eventually(lambda: a.get("py:window") is None and b.get("py:window") is None, seconds=15), f"{a.get('py:window')!r} {b.get('py:window')!r}")
    check("the next window counts from 1", b.incr("py:window") == 1 and b.ttl("py:window") == -1)

    # Online users on two peers at once (a set, docs/operations.md "Sets"): A takes every user
    # out while B adds the even ones again and new ones, as a presence service behind a load
    # balancer would when users reconnect through B. Every add B made stays (A had not seen it);
    # no user only A removed is left; both peers end with the same members.
    users = [f"user{i}" for i in range(200)]
    check("SADD of 200 users answers 200", a.sadd("py:online", *users) == 200)
    check("B sees 200 members", eventually(lambda: b.scard("py:online") == 200), repr(b.scard("py:online")))

    def remover():
        client = connect(sys.argv[1])
        for user in users:
            client.srem("py:online", user)

    def adder():
        client = connect(sys.argv[2])
        for index in range(0, 200, 2):
            client.sadd("py:online", users[index], f"new{index}")

    at_once(*[threading.Thread(target=remover), threading.Thread(target=adder)])
    new = {f"new{i}".encode() for i in range(0, 200, 2)}
    allowed = new | {users[i].encode() for i in range(0, 200, 2)}
    check("after concurrent SREM on A and SADD on B, both peers hold the same members",
          eventually(lambda: a.smembers("py:online") == b.smembers("py:online") and new <= a.smembers("py:online")),
          f"A {len(a.smembers('py:online'))}, B {len(b.smembers('py:online'))}")
    check("every member B added is in, and no member only A removed", new <= a.smembers("py:online") <= allowed,
          f"extra {sorted(a.smembers('py:online') - allowed)[:5]}")
    check("SISMEMBER and SMISMEMBER on B agree", b.sismember("py:online", "new0") == 1 and b.smismember("py:online", ["new0", "user1"]) == [1, 0])
    check("a set is a set to TYPE, and GET of it is WRONGTYPE", b.type("py:online") == b"set" and raises(lambda: b.get("py:online"), "WRONGTYPE"))

    # A session hash written field by field on two peers at once (docs/operations.md "Hashes"):
    # every field is kept on both, and the field both write ends the same on both.
    def session_writer(address, prefix):
        client = connect(address)
        for index in range(100):
            client.hset("py:session", mapping={f"{prefix}{index}": str(index), "shared": prefix})

    at_once(*[threading.Thread(target=session_writer, args=(sys.argv[1], "a")), threading.Thread(target=session_writer, args=(sys.argv[2], "b"))])
    check("a session hash written field by field on A and B at once keeps all 201 fields on both",
          eventually(lambda: a.hlen("py:session") == 201 and b.hlen("py:session") == 201), f"A {a.hlen('py:session')}, B {b.hlen('py:session')}")
    check("HGETALL reads the same on both, the shared field included", eventually(lambda: a.hgetall("py:session") == b.hgetall("py:session")))
    check("HGET and HMGET read a field written on the other peer", b.hget("py:session", "a7") == b"7" and a.hmget("py:session", ["b3", "none"]) == [b"3", None])
    check("a hash is a hash to TYPE; DEL removes it on both", b.type("py:session") == b"hash" and a.delete("py:session") == 1
          and eventually(lambda: b.hlen("py:session") == 0))

    # Per-client quotas in one hash on two peers at once (counter fields, docs/operations.md
    # "Counter fields of a hash"): threads on A and B HINCRBY the same four fields, one of them
    # HSET to a number first; every increment counts on both peers.
    a.hset("py:quotas", "base", "100")
    check("B sees the base field", eventually(lambda: b.hget("py:quotas", "base") == b"100"))

    def quota_user(address, rounds):
        client = connect(address)
        for index in range(rounds):
            client.hincrby("py:quotas", f"client{index % 3}", 1)
            client.hincrby("py:quotas", "base", -1)

    at_once(*[threading.Thread(target=quota_user, args=(address, 150)) for address in sys.argv[1:3] * 2])
    wanted = {b"client0": b"200", b"client1": b"200", b"client2": b"200", b"base": b"-500"}
    check("HINCRBY of four fields from 4 threads on A and B at once: exact totals on both",
          eventually(lambda: a.hgetall("py:quotas") == wanted and b.hgetall("py:quotas") == wanted), f"A {a.hgetall('py:quotas')}, B {b.hgetall('py:quotas')}")
    check("HINCRBY of a field that is not a number is refused", raises(lambda: b.hincrby("py:session2", "x", 1) if b.hset("py:session2", "x", "word") else None, "not an integer"))
    check("a hash of counter fields is a hash to TYPE; DEL removes it on both", b.type("py:quotas") == b"hash" and a.delete("py:quotas") == 1
          and eventually(lambda: b.hlen("py:quotas") == 0))

    # A leaderboard on two peers at once (a sorted set, docs/operations.md "Sorted sets"): A
    # scores the odd players while B scores the even ones and both re-score "champion"; every
    # player is kept on both, in score order, and "champion" ends with the same score on both.
    def scorer(address, parity):
        client = connect(address)
        for index in range(parity, 200, 2):
            client.zadd("py:board", {f"player{index}": index, "champion": 1000 + parity})

    at_once(*[threading.Thread(target=scorer, args=(sys.argv[1], 1)), threading.Thread(target=scorer, args=(sys.argv[2], 0))])
    check("a leaderboard scored on A and B at once keeps all 201 members on both",
          eventually(lambda: a.zcard("py:board") == 201 and b.zcard("py:board") == 201), f"A {a.zcard('py:board')}, B {b.zcard('py:board')}")
    check("ZRANGE WITHSCORES reads the same on both, champion included",
          eventually(lambda: a.zrange("py:board", 0, -1, withscores=True) == b.zrange("py:board", 0, -1, withscores=True)))
    top = b.zrevrange("py:board", 0, 2, withscores=True)
    check("the top three are champion, player199, player198", [member for member, _ in top] == [b"champion", b"player199", b"player198"]
          and top[1][1] == 199.0, repr(top))
    check("ZRANGEBYSCORE and ZSCORE read members scored on the other peer",
          a.zrangebyscore("py:board", 10, 12) == [b"player10", b"player11", b"player12"] and b.zscore("py:board", "player7") == 7.0)
    check("ZRANK, ZCOUNT and ZREM answer as Redis does", a.zrank("py:board", "player0") == 0 and a.zcount("py:board", "(0", 9) == 9
          and a.zrem("py:board", "player0", "nobody") == 1 and eventually(lambda: b.zscore("py:board", "player0") is None))
    check("a sorted set is a zset to TYPE, and SADD on it is WRONGTYPE", b.type("py:board") == b"zset" and raises(lambda: b.sadd("py:board", "x"), "WRONGTYPE"))

    # Malformed requests on raw sockets: an error or a closed connection, never a crash.
    host, port = sys.argv[1].rsplit(":", 1)
    cases = {
        "a negative bulk length": b"*2\r\n$3\r\nGET\r\n$-5\r\n",
        "a huge bulk count": b"*2\r\n$3\r\nGET\r\n$999999999999\r\n",
        "a huge multibulk count": b"*99999999\r\n",
        "binary garbage": bytes(range(256)) * 4,
        "half a frame, then close": b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc",
        "an inline line of 100 KB": b"SET k " + b"x" * 100_000,
    }
    for name, payload in cases.items():
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(payload)
            raw.shutdown(socket.SHUT_WR)
            reply = b""
            try:
                while chunk := raw.recv(65536):
                    reply += chunk
            except OSError:
                pass
        acceptable = reply == b"" or reply.startswith(b"-ERR") or b"-ERR" in reply
        check(f"malformed: {name} gets an error or a close", acceptable, repr(reply[:120]))
    check("the peer still answers after every malformed request", connect(sys.argv[1]).ping())
    print(f"{'all' if checks.failures == 0 else checks.failures} {'passed' if checks.failures == 0 else 'failed'}")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
