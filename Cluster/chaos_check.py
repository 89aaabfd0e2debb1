"""The checker of `make chaos` (Cluster/chaos.sh): reads the history of `syncnode put --wait 2`
calls and the converged dump, and fails (exit 1) when the peers did not converge or an
acknowledged write is lost.

Under last-writer-wins a key's final entry must have a version at least that of every write
acknowledged for it, and an entry of the same version must carry that write's value. Keys
written once (`once[...]`) must hold exactly their one write when it was acknowledged.

MULTI blocks (BLOCKS, the replies received for each block) write a pair of keys once, pair[nK-i-a]
and pair[nK-i-b]: after convergence each pair is whole (both keys, one version, one value) or
absent; a block EXEC answered and WAIT 2 acknowledged must be there; a block EXEC refused must
not.

The counter (COUNTER, a line per `INCRBY ctr N` + `WAIT 2` sent: node, index, N, the replies,
none when it was cut off; TOTALS, each peer's `GET ctr`
after convergence): every peer reads the same total, at least the sum of the increments answered
and acknowledged by 2 peers (none lost) and at most the sum of those answered or cut off before
an answer (none invented, none counted twice).

The set (SET, a line per `SADD online M` / `SREM online M` + `WAIT 2` sent: node, index, op,
member, the replies, none when cut off; MEMBERS, each peer's `SMEMBERS online`): every peer
holds the same members; a member whose last change was answered and acknowledged by 2 peers is
in exactly when that change was an SADD; no member is held that no SADD sent.

The hash's counter field (HCOUNTER, HTOTALS: the same of `HINCRBY quotas jobs N` and each
peer's `HGET quotas jobs`) is checked as the counter is.

usage: chaos_check.py HISTORY DUMP CONVERGED(0|1) SEED [BLOCKS [COUNTER TOTALS [SET MEMBERS [HCOUNTER HTOTALS]]]]
       chaos_check.py --self-test   (the counter and set checks fail on doctored runs)
"""
import json
import re
import sys

PUT = re.compile(r"^ok (?P<key>\S+) version (?P<ms>\d+)\.(?P<logical>\d+)@(?P<node>\S+)$")
PAIR = re.compile(r'^pair\["(?P<block>n\d+-\d+)-(?P<side>[ab])"\]$')
# The replies (RESP lines) of MULTI, three SETs queued, EXEC's array of three +OK.
COMMITTED_BLOCK = ["+OK", "+QUEUED", "+QUEUED", "+QUEUED", "*3", "+OK", "+OK", "+OK"]


def check_blocks(blocks_path, final, problems):
    """The MULTI blocks: whole or absent after convergence; acknowledged ones present, refused
    ones absent. Returns (acknowledged, refused, unknown) counts."""
    pairs = {}
    for key, stored in final.items():
        match = PAIR.match(key)
        if match:
            pairs.setdefault(match["block"], {})[match["side"]] = stored
    for block, sides in pairs.items():
        if set(sides) != {"a", "b"}:
            problems.append(f"block {block}: only pair[{block}-{''.join(sides)}] after convergence: half a MULTI block")
        elif sides["a"] != sides["b"]:
            problems.append(f"block {block}: its two keys differ: {sides['a']} and {sides['b']}")
    acknowledged = refused = unknown = 0
    with open(blocks_path) as history:
        for record in history:
            node, index, output = record.rstrip("\n").split("\t", 2)
            parts = [part for part in output.split("|") if part]
            block = f"n{node}-{index}"
            # Then WAIT's count (":N") and QUIT's +OK.
            if parts[:8] == COMMITTED_BLOCK and len(parts) > 8 and parts[8][1:].isdigit() and int(parts[8][1:]) >= 2:
                acknowledged += 1
                held = pairs.get(block, {})
                if set(held) != {"a", "b"} or held["a"][1] != int(index):
                    problems.append(f"block {block}: EXEC answered and WAIT 2 acknowledged, after convergence {held or 'absent'}")
            elif len(parts) > 4 and parts[4].startswith("-ERR EXEC refused"):
                refused += 1
                if block in pairs:
                    problems.append(f"block {block}: EXEC refused, yet {pairs[block]} after convergence")
            else:
                unknown += 1
    return acknowledged, refused, unknown


def check_counter(counter_path, totals_path, problems, label="counter"):
    """The counter (or the hash's counter field, `label`): every peer's total equal, within
    [acknowledged, answered or cut off]. Returns (acknowledged count, lower bound, upper bound,
    totals)."""
    acknowledged = lower = upper = 0
    with open(counter_path) as history:
        for record in history:
            node, _index, amount, output = record.rstrip("\n").split("\t", 3)
            amount = int(amount)
            parts = [part for part in output.split("|") if part]
            if not parts:
                upper += amount            # cut off before any reply: may have committed
            elif parts[0].startswith(":"):
                upper += amount            # answered with the total: committed on its node
                if len(parts) > 1 and parts[1].startswith(":") and int(parts[1][1:]) >= 2:
                    acknowledged += 1
                    lower += amount        # and held by 2 peers: must survive
            # an error reply: refused, nothing written
    totals = {}
    with open(totals_path) as lines:
        for line in lines:
            node, total = line.rstrip("\n").split("\t")
            totals[node] = int(total) if total.lstrip("-").isdigit() else 0
    if len(set(totals.values())) > 1:
        problems.append(f"{label}: the peers read different totals after convergence: {totals}")
    for node, total in totals.items():
        if not lower <= total <= upper:
            problems.append(f"{label}: n{node} reads {total}; the acknowledged increments sum to {lower}, "
                            f"those that may have committed to {upper}")
    return acknowledged, lower, upper, totals


def check_set(set_path, members_path, problems):
    """The set: every peer holds the same members; each member (one writer, its changes one
    after another) as its last change left it when that change was answered and acknowledged by
    2 peers, and any member only when an SADD of it was sent. Returns (acknowledged changes,
    members checked, members held)."""
    last = {}          # member: (index, op, outcome) of its latest change, by index
    sent = set()       # members an SADD was sent for
    acknowledged = 0
    with open(set_path) as history:
        for record in history:
            node, index, op, member, output = record.rstrip("\n").split("\t", 4)
            parts = [part for part in output.split("|") if part]
            if not parts:
                outcome = "unknown"        # cut off before any reply: may have committed
            elif parts[0].startswith(":"):
                ok = len(parts) > 1 and parts[1].startswith(":") and int(parts[1][1:]) >= 2
                outcome = "acknowledged" if ok else "unknown"
                acknowledged += ok
            else:
                outcome = "refused"        # an error: nothing written
            if op == "SREM" and parts and parts[0] == ":0":
                outcome = "refused"        # removed nothing (its node did not hold the member): no change
            if op == "SADD":
                sent.add(member)
            if outcome != "refused" and (member not in last or int(index) > last[member][0]):
                last[member] = (int(index), op, outcome)
    held = {}
    with open(members_path) as lines:
        for line in lines:
            node, listed = line.rstrip("\n").split("\t")
            held[node] = {part for part in listed.split("|") if part}
    if len({frozenset(members) for members in held.values()}) > 1:
        problems.append(f"set: the peers hold different members after convergence: " +
                        ", ".join(f"n{node} {sorted(members)}" for node, members in sorted(held.items())))
    checked = 0
    for node, members in sorted(held.items()):
        for member in sorted(members - sent):
            problems.append(f"set: n{node} holds {member}, which no SADD sent")
        for member, (index, op, outcome) in sorted(last.items()):
            if outcome != "acknowledged":
                continue
            checked += node == min(held)
            if op == "SADD" and member not in members:
                problems.append(f"set: {member} added (index {index}, acknowledged by 2 peers) and not removed since, missing on n{node}")
            elif op == "SREM" and member in members:
                problems.append(f"set: {member} removed (index {index}, acknowledged by 2 peers) and not added since, held on n{node}")
    return acknowledged, checked, len(next(iter(held.values()), set()))


def doctored(check, history, cases, what):
    """Runs `check` over `history` and each case's per-node answers (node: text); how many cases
    it judged wrongly (a problem found in an honest run, none in a broken one)."""
    import os
    import tempfile
    failures = 0
    with tempfile.TemporaryDirectory() as directory:
        history_path = os.path.join(directory, "history")
        with open(history_path, "w") as file:
            file.write(history)
        for answers, passes, name in cases:
            path = os.path.join(directory, "answers")
            with open(path, "w") as file:
                file.write("".join(f"{node}\t{answer}\n" for node, answer in answers.items()))
            problems = []
            check(history_path, path, problems)
            if (not problems) != passes:
                failures += 1
                print(f"chaos_check self-test: FAILED: {what}, {name}: {problems or 'no problem found'}")
    return failures


def self_test():
    """The checks against doctored runs: the counter's against a lost acknowledged increment, a
    doubled one, peers that disagree and an honest run; the set's against a lost add, an undone
    remove, an invented member, peers that disagree and honest runs."""
    history = "1\t5\t5\t:5|:2|+OK\n2\t10\t3\t:8|:3|+OK\n3\t20\t4\t:12|:1|+OK\n4\t25\t2\t-ERR INCRBY refused\n5\t35\t6\t\n"
    cases = [({"1": 8, "2": 8}, True, "honest: the acknowledged 8"), ({"1": 18, "2": 18}, True, "honest: all that may have committed"),
             ({"1": 5, "2": 5}, False, "an acknowledged increment lost"), ({"1": 23, "2": 23}, False, "an increment counted twice"),
             ({"1": 8, "2": 12}, False, "peers that disagree")]
    failures = doctored(check_counter, history, [({node: str(total) for node, total in totals.items()}, passes, name)
                                                 for totals, passes, name in cases], "counter")
    # The set: n1-0 added then removed, n1-1 added (an SREM that found nothing after), n2-0 added
    # with its WAIT cut short, n2-1 refused.
    set_history = ("1\t1\tSADD\tn1-0\t:1|:2|+OK\n1\t8\tSREM\tn1-0\t:1|:3|+OK\n1\t22\tSADD\tn1-1\t:1|:2|+OK\n"
                   "1\t29\tSREM\tn1-1\t:0|:2|+OK\n"
                   "2\t1\tSADD\tn2-0\t:1|:1|+OK\n2\t8\tSADD\tn2-1\t-ERR SADD refused\n")
    set_cases = [({"1": "n1-1", "2": "n1-1"}, True, "honest"), ({"1": "n1-1|n2-0", "2": "n1-1|n2-0"}, True, "honest, the unacknowledged add in"),
                 ({"1": "", "2": ""}, False, "an acknowledged add lost"), ({"1": "n1-0|n1-1", "2": "n1-0|n1-1"}, False, "an acknowledged remove undone"),
                 ({"1": "n1-1|x", "2": "n1-1|x"}, False, "a member no SADD sent"), ({"1": "n1-1", "2": "n1-1|n2-0"}, False, "peers that disagree")]
    failures += doctored(check_set, set_history, set_cases, "set")
    print("chaos_check self-test: " + ("FAILED" if failures else "PASSED: the counter check catches a lost, a doubled and a split total; "
                                      "the set check a lost add, an undone remove, an invented member and a split"))
    sys.exit(1 if failures else 0)


def version_key(ms, logical, node):
    return (int(ms), int(logical), node.encode())


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    history_path, dump_path, converged, seed = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
    final = {}
    with open(dump_path) as dump:
        for line in dump:
            entry = json.loads(line)
            version = entry["version"]
            final[entry["key"]] = (version_key(version["ms"], version["logical"], version["node"]),
                                   None if entry["deleted"] else entry["value"])
    acknowledged = unacknowledged = failed = 0
    problems = []
    once_keys = 0
    with open(history_path) as history:
        for record in history:
            node, status, sent, output = record.rstrip("\n").split("\t", 3)
            lines = [part for part in output.split("|") if part]
            match = next((found for found in map(PUT.match, lines) if found), None)
            if status != "0":
                if status == "3" and match:
                    unacknowledged += 1   # committed on its node, fewer than 2 peers said so in time
                else:
                    failed += 1           # refused or unreachable (a killed node): not committed
                continue
            if not match:
                problems.append(f"n{node}: exit 0 without a version: {output}")
                continue
            acknowledged += 1
            key = match["key"]
            written = version_key(match["ms"], match["logical"], match["node"])
            value = json.loads(sent)
            if key.startswith("once["):
                once_keys += 1
            stored = final.get(key)
            if stored is None:
                problems.append(f"{key}: acknowledged at {written} by n{node}, missing after convergence")
                continue
            stored_version, stored_value = stored
            if stored_version < written:
                problems.append(f"{key}: acknowledged at {written}, final version is older: {stored_version}")
            elif key.startswith("once[") and (stored_version != written or stored_value != value):
                problems.append(f"{key}: written once ({value} at {written}), holds {stored_value!r} at {stored_version}")
            elif stored_version == written and stored_value != value:
                problems.append(f"{key}: same version {written}, value {stored_value!r} instead of {value!r}")
    print(f"chaos: {acknowledged} acknowledged writes ({once_keys} to keys written once), "
          f"{unacknowledged} committed without enough acknowledgements, {failed} refused or unreachable; "
          f"{len(final)} keys after healing")
    if len(sys.argv) > 5:
        blocks = check_blocks(sys.argv[5], final, problems)
        print(f"chaos: MULTI blocks: {blocks[0]} acknowledged, {blocks[1]} refused, {blocks[2]} unacknowledged or cut off")
        if blocks[0] == 0:
            problems.append("no MULTI block was acknowledged: the block check proves nothing")
    if len(sys.argv) > 7:
        counted = check_counter(sys.argv[6], sys.argv[7], problems)
        print(f"chaos: counter: {counted[0]} increments acknowledged; total {sorted(set(counted[3].values()))} "
              f"within [{counted[1]}, {counted[2]}]")
        if counted[0] == 0:
            problems.append("no counter increment was acknowledged: the counter check proves nothing")
    if len(sys.argv) > 11:
        counted = check_counter(sys.argv[10], sys.argv[11], problems, label="hash counter field")
        print(f"chaos: hash counter field: {counted[0]} increments acknowledged; total {sorted(set(counted[3].values()))} "
              f"within [{counted[1]}, {counted[2]}]")
        if counted[0] == 0:
            problems.append("no HINCRBY was acknowledged: the hash counter field check proves nothing")
    if len(sys.argv) > 9:
        changed = check_set(sys.argv[8], sys.argv[9], problems)
        print(f"chaos: set: {changed[0]} changes acknowledged; {changed[1]} members checked against their last acknowledged change; "
              f"{changed[2]} members held")
        if changed[1] == 0:
            problems.append("no set change was acknowledged as a member's last: the set check proves nothing")
    if not converged:
        problems.insert(0, "the five peers did not converge to identical dumps within 90 s of healing")
    if acknowledged == 0:
        problems.append("no write was acknowledged: the run proves nothing")
    if problems:
        print(f"chaos: FAILED (seed {seed}; replay the nemesis with CHAOS_SEED={seed} make chaos):")
        for problem in problems[:40]:
            print("  " + problem)
        sys.exit(1)
    print(f"chaos: PASSED: converged, no acknowledged write lost (seed {seed})")


if __name__ == "__main__":
    main()
