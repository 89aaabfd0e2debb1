#!/usr/bin/env bash
# `make chaos`: five syncnode peers in network namespaces of our own (a bridge in a hub
# namespace, one veth per peer, addresses 10.213.0.1-5), clients writing through every peer
# with `put --wait 2`, and a seeded nemesis cycling partitions (iptables DROP), packet loss
# (iptables statistic) and kill -9 restarts, each restart with the peer's wall clock moved up to
# 30 s ahead or behind (within the 60 s skew bound, so the clock vote refuses nothing), then
# healing. A checker over the whole history
# (Cluster/chaos_check.py) asserts that every peer converged to the same state and that no
# acknowledged write was lost: each key's final version is at least every acknowledged write's
# version, and an equal version carries that write's value; keys written only once must hold
# their one value, so a loss cannot hide behind a later write. MULTI blocks (the Redis protocol)
# must never show half: both keys of a pair or neither, with one version. A counter every peer
# INCRBYs, and a counter field of a hash every peer HINCRBYs, must end at the sum of the
# acknowledged increments, and a set every peer SADDs to and
# SREMs from must hold each member as its last acknowledged change left it.
#
#   CHAOS_SECONDS   how long the nemesis runs (default 60; `make test` runs 20)
#   CHAOS_SEED      the nemesis's seed (default: from the clock; printed for a replay)
#   CHAOS_REQUIRED  1: fail when root, namespaces or iptables are missing (default: skip, saying so)
#
# Every namespace and process made here is deleted on exit (trap), by name and by pid.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source Cluster/lib.sh
SECONDS_TO_RUN=${CHAOS_SECONDS:-60}
SEED=${CHAOS_SEED:-$(( $(date +%s) % 100000 ))}
REQUIRED=${CHAOS_REQUIRED:-0}
export RUN_DIR="$ROOT/.run/chaos"
BIN=$(syncnode_binary)
PYTHON="${PYTHON:-python3}"
NODES=(1 2 3 4 5)
HUB=dc-hub
SUBNET=10.213.0

skip() {
    if [ "$REQUIRED" = 1 ]; then echo "chaos: cannot run: $1" >&2; exit 1; fi
    echo "chaos: SKIPPED: $1 (the nemesis needs root, ip netns and iptables; CHAOS_REQUIRED=1 makes this a failure)"
    exit 0
}
[ "$(id -u)" -eq 0 ] || skip "not root"
command -v ip >/dev/null && command -v iptables >/dev/null || skip "ip or iptables is not installed (make deps)"
[ -x "$BIN" ] || { echo "chaos: no syncnode binary at $BIN: run make syncnode" >&2; exit 2; }
ip netns add dc-probe 2>/dev/null || skip "cannot create a network namespace here"
ip netns exec dc-probe iptables -L INPUT >/dev/null 2>&1 || { ip netns del dc-probe; skip "iptables does not work inside a namespace here"; }
ip netns del dc-probe

rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"
declare -A PID=()
# Each peer's wall clock shift in ms (Cluster/preload/wallclock_shift.c), chosen by the nemesis
# when it kills the peer and used from its next start on; 0 at first.
declare -A CLOCK_SHIFT=()
WRITERS=()
SHIFT_LIBRARY=$(preload_library wallclock_shift) || { echo "chaos: cannot build the wall clock preload" >&2; exit 2; }

ns() { echo "dc-n$1"; }
in_ns() { local node=$1; shift; ip netns exec "$(ns "$node")" "$@"; }

# Stops what this script started: writers, peers (by pid, after checking the command line), then
# the namespaces (by name). Safe to run twice.
cleanup() {
    for writer in "${WRITERS[@]}"; do kill "$writer" 2>/dev/null; done
    for node in "${NODES[@]}"; do stop_peer "$node" KILL; done
    # Anything else still running inside our namespaces (they hold only what we started there).
    for node in "${NODES[@]}"; do
        ip netns pids "$(ns "$node")" 2>/dev/null | xargs -r kill -9 2>/dev/null
    done
    for node in "${NODES[@]}"; do ip netns del "$(ns "$node")" 2>/dev/null; done
    ip netns del "$HUB" 2>/dev/null
    return 0
}
trap cleanup EXIT

# stop_peer NODE SIGNAL: signals NODE's syncnode if the pid is still ours, and waits for it.
stop_peer() {
    local node=$1 signal=$2 pid=${PID[$1]:-}
    [ -n "$pid" ] || return 0
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "syncnode run --id n$node "; then
        kill -"$signal" "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    PID[$node]=""
}

echo "== chaos: seed $SEED (replay the nemesis: CHAOS_SEED=$SEED make chaos), $SECONDS_TO_RUN s"
# The network: a bridge in a hub namespace, each peer's namespace wired to it by a veth pair.
ip netns add "$HUB"
ip -n "$HUB" link add dcbr0 type bridge
ip -n "$HUB" link set dcbr0 up
for node in "${NODES[@]}"; do
    ip netns add "$(ns "$node")"
    ip -n "$HUB" link add "dcv$node" type veth peer name eth0 netns "$(ns "$node")"
    ip -n "$HUB" link set "dcv$node" master dcbr0
    ip -n "$HUB" link set "dcv$node" up
    in_ns "$node" ip addr add "$SUBNET.$node/24" dev eth0
    in_ns "$node" ip link set eth0 up
    in_ns "$node" ip link set lo up
done
head -c 32 /dev/urandom | base64 > "$RUN_DIR/secret"
chmod 600 "$RUN_DIR/secret"

# start_peer NODE: syncnode in NODE's namespace, durable (strict), seeded with peer 1, its wall
# clock moved by CLOCK_SHIFT[NODE] ms.
start_peer() {
    local node=$1 dir="$RUN_DIR/n$1"
    mkdir -p "$dir/data"
    # Not through in_ns: a backgrounded function runs in a subshell, and $! must be syncnode's pid.
    local before
    before=$(grep -c 'syncnode ready' "$dir/log" 2>/dev/null)
    local moved=()
    if [ "${CLOCK_SHIFT[$node]:-0}" != 0 ]; then moved=(env LD_PRELOAD="$SHIFT_LIBRARY" WALLCLOCK_SHIFT_MS="${CLOCK_SHIFT[$node]}"); fi
    ip netns exec "$(ns "$node")" "${moved[@]}" "$BIN" run --id "n$node" --listen "$SUBNET.$node:7400" --admin 127.0.0.1:7500 \
        --data-dir "$dir/data" --durability strict --cluster chaos --cluster-secret-file "$RUN_DIR/secret" \
        --failure-timeout-ms 2000 --anti-entropy-interval-ms 1000 --peer "$SUBNET.1:7400" \
        >>"$dir/log" 2>&1 </dev/null &
    PID[$node]=$!
    local deadline=$(( $(date +%s) + 20 ))
    until [ "$(grep -c 'syncnode ready' "$dir/log" 2>/dev/null)" -gt "${before:-0}" ]; do
        if [ "$(date +%s)" -ge "$deadline" ] || [ ! -d "/proc/${PID[$node]}" ]; then
            echo "chaos: n$node did not start; its log:" >&2
            tail -5 "$dir/log" >&2
            return 1
        fi
        sleep 0.05
    done
}
cli() { local node=$1; shift; in_ns "$node" "$BIN" "$@" --admin 127.0.0.1:7500; }
for node in "${NODES[@]}"; do start_peer "$node" || exit 1; done
linked_all() {
    local node
    for node in "${NODES[@]}"; do
        [ "$(cli "$node" status --json 2>/dev/null | grep -o '"link":"connected"' | wc -l)" -eq 4 ] || return 1
    done
}
wait_until 60 "a full mesh of five" linked_all || { echo "chaos: the five peers never linked" >&2; exit 1; }

# Writers, one per peer: keys written once (once[nK-i]) and keys everyone overwrites
# (shared[j]); each `put --wait 2` is a line of the history: node, exit status, the JSON value
# sent, the CLI's output. Every third write is a MULTI block on a connection of its own
# instead: a pair of keys written once (pair[nK-i-a], pair[nK-i-b]) and a shared key, then
# WAIT 2; a line of the block history: node, the pair's value, the replies as received.
writer() {
    local node=$1 index=0 set_ops=0 out status key value member op counter request amount
    while true; do
        index=$((index + 1))
        if [ $((index % 3)) -eq 0 ]; then
            # One connection of our own (bash's /dev/tcp), not redis-cli: redis-cli reconnects
            # after a reset and sends the rest of the block outside it, which is half a block by
            # the client's doing. QUIT closes the connection once everything is answered.
            request=$(printf 'MULTI\r\nSET pair[n%s-%s-a] %s\r\nSET pair[n%s-%s-b] %s\r\nSET shared[%s] b%s-%s\r\nEXEC\r\nWAIT 2 1500\r\nQUIT\r\n' \
                "$node" "$index" "$index" "$node" "$index" "$index" "$((index % 7))" "$node" "$index")
            out=$(in_ns "$node" timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7500 && printf "%s\n" "$1" >&3 && cat <&3' _ "$request" 2>&1)
            printf '%s\t%s\t%s\n' "$node" "$index" "$(echo "$out" | tr -d '\r' | tr '\n' '|')" >> "$RUN_DIR/blocks.n$node"
            continue
        fi
        if [ $((index % 5)) -eq 0 ]; then
            # An increment of the one counter every peer changes (INCRBY ctr N, then WAIT 2), or,
            # every other time, of the one counter field of a hash every peer changes (HINCRBY
            # quotas jobs N), on a connection of its own; a line of that counter's history: node,
            # amount, replies. Its amount is recorded before it is sent: a writer stopped at the
            # end while one is in flight leaves it there unanswered, and the checker counts it as
            # may-have-committed.
            amount=$((index % 9 + 1))
            if [ $((index / 5 % 2)) -eq 0 ]; then
                counter=counter request=$(printf 'INCRBY ctr %s\r\nWAIT 2 1500\r\nQUIT\r\n' "$amount")
            else
                counter=hcounter request=$(printf 'HINCRBY quotas jobs %s\r\nWAIT 2 1500\r\nQUIT\r\n' "$amount")
            fi
            printf '%s\t%s\t%s\n' "$node" "$index" "$amount" >> "$RUN_DIR/$counter-sent.n$node"
            out=$(in_ns "$node" timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7500 && printf "%s\n" "$1" >&3 && cat <&3' _ "$request" 2>&1)
            printf '%s\t%s\t%s\t%s\n' "$node" "$index" "$amount" "$(echo "$out" | tr -d '\r' | tr '\n' '|')" >> "$RUN_DIR/$counter.n$node"
            continue
        fi
        if [ $((index % 7)) -eq 1 ]; then
            # A change of the one set every peer changes: SADD of a member of this peer's own
            # (n<node>-<k>, k cycling over 8), or SREM of one, then WAIT 2, on a connection of
            # its own; a line of the set history: node, index, op, member, replies. Each member
            # has one writer, whose changes run one after another, so its last answered and
            # acknowledged change says what the set must hold of it.
            set_ops=$((set_ops + 1))
            member="n$node-$((set_ops / 2 % 8))"
            if [ $((set_ops % 2)) -eq 0 ]; then op=SADD; else op=SREM; fi
            printf '%s\t%s\t%s\t%s\n' "$node" "$index" "$op" "$member" >> "$RUN_DIR/set-sent.n$node"
            request=$(printf '%s online %s\r\nWAIT 2 1500\r\nQUIT\r\n' "$op" "$member")
            out=$(in_ns "$node" timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7500 && printf "%s\n" "$1" >&3 && cat <&3' _ "$request" 2>&1)
            printf '%s\t%s\t%s\t%s\t%s\n' "$node" "$index" "$op" "$member" "$(echo "$out" | tr -d '\r' | tr '\n' '|')" >> "$RUN_DIR/set.n$node"
            continue
        fi
        if [ $((index % 2)) -eq 0 ]; then
            key="once[n$node-$index]" value="$index"
        else
            key="shared[$((index % 7))]" value="\"n$node-$index\""
        fi
        out=$(cli "$node" put --wait 2 --wait-timeout-ms 1500 "$key" "$value" 2>&1); status=$?
        printf '%s\t%s\t%s\t%s\n' "$node" "$status" "$value" "$(echo "$out" | tr '\n' '|')" >> "$RUN_DIR/history.n$node"
    done
}
for node in "${NODES[@]}"; do writer "$node" & WRITERS+=($!); done

# The nemesis: every 2 s one seeded action; at most one peer down at a time.
RANDOM=$SEED
down=""
heal() {
    local node
    for node in "${NODES[@]}"; do in_ns "$node" iptables -F INPUT 2>/dev/null; done
    if [ -n "$down" ]; then
        start_peer "$down" || { echo "chaos: FAILED: n$down did not restart" >&2; exit 1; }
        echo "   restart n$down (wall clock $(( ${CLOCK_SHIFT[$down]} / 1000 )) s)"
        down=""
    fi
}
actions=0
end=$(( $(date +%s) + SECONDS_TO_RUN ))
while [ "$(date +%s)" -lt "$end" ]; do
    actions=$((actions + 1))
    case $((RANDOM % 4)) in
        0)  heal
            # A random split: each peer joins side A or B; both sides drop the other's packets.
            side_a=() side_b=()
            for node in "${NODES[@]}"; do if [ $((RANDOM % 2)) -eq 0 ]; then side_a+=("$node"); else side_b+=("$node"); fi; done
            for a in "${side_a[@]}"; do for b in "${side_b[@]}"; do
                in_ns "$a" iptables -A INPUT -s "$SUBNET.$b" -j DROP
                in_ns "$b" iptables -A INPUT -s "$SUBNET.$a" -j DROP
            done; done
            echo "   partition {${side_a[*]}} | {${side_b[*]}}" ;;
        1)  node=${NODES[$((RANDOM % 5))]}
            in_ns "$node" iptables -A INPUT -m statistic --mode random --probability 0.3 -j DROP
            echo "   30% loss into n$node" ;;
        2)  if [ -z "$down" ]; then
                down=${NODES[$((RANDOM % 5))]}
                stop_peer "$down" KILL
                # Its next start: the wall clock 30 or 15 s behind, right, or 15 or 30 s ahead.
                CLOCK_SHIFT[$down]=$(( (RANDOM % 5 - 2) * 15000 ))
                echo "   kill -9 n$down"
            fi ;;
        *)  heal; echo "   heal" ;;
    esac
    sleep 2
done
for writer in "${WRITERS[@]}"; do kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null; done
WRITERS=()
heal
echo "== healed after $actions nemesis actions; waiting for the five to converge"
dump_all() { local node; for node in "${NODES[@]}"; do cli "$node" dump > "$RUN_DIR/n$node.dump" 2>/dev/null || return 1; done; }
converged() {
    dump_all || return 1
    local node
    for node in 2 3 4 5; do cmp -s "$RUN_DIR/n1.dump" "$RUN_DIR/n$node.dump" || return 1; done
    [ -s "$RUN_DIR/n1.dump" ]
}
converged_ok=1
wait_until 90 "the five dumps to be identical" converged || converged_ok=0
cat "$RUN_DIR"/history.n* > "$RUN_DIR/history"
cat "$RUN_DIR"/blocks.n* > "$RUN_DIR/blocks" 2>/dev/null || : > "$RUN_DIR/blocks"
# A counter's history (NAME: counter, hcounter): every increment sent, answered or not (those with
# no reply line were cut off), and its total as each peer reads it (READ: GET ctr, HGET quotas
# jobs), a line each: node, total.
collect_counter() {
    local name=$1 read=$2 node index amount total
    cat "$RUN_DIR"/$name.n* > "$RUN_DIR/$name" 2>/dev/null || : > "$RUN_DIR/$name"
    cat "$RUN_DIR"/$name-sent.n* 2>/dev/null | while IFS=$'\t' read -r node index amount; do
        grep -q "^$node"$'\t'"$index"$'\t' "$RUN_DIR/$name" || printf '%s\t%s\t%s\t\n' "$node" "$index" "$amount"
    done >> "$RUN_DIR/$name"
    : > "$RUN_DIR/$name-totals"
    for node in "${NODES[@]}"; do
        total=$(in_ns "$node" timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7500 && printf "%s\r\nQUIT\r\n" "$1" >&3 && cat <&3' _ "$read" 2>/dev/null \
            | tr -d '\r' | sed -n 2p)
        printf '%s\t%s\n' "$node" "$total" >> "$RUN_DIR/$name-totals"
    done
}
collect_counter counter "GET ctr"
collect_counter hcounter "HGET quotas jobs"
# Every set change sent, answered or not (those with no reply line were cut off), and the
# members each peer holds (SMEMBERS online), a line each: node, members joined by '|'.
cat "$RUN_DIR"/set.n* > "$RUN_DIR/set" 2>/dev/null || : > "$RUN_DIR/set"
cat "$RUN_DIR"/set-sent.n* 2>/dev/null | while IFS=$'\t' read -r node index op member; do
    grep -q "^$node"$'\t'"$index"$'\t' "$RUN_DIR/set" || printf '%s\t%s\t%s\t%s\t\n' "$node" "$index" "$op" "$member"
done >> "$RUN_DIR/set"
: > "$RUN_DIR/set-members"
for node in "${NODES[@]}"; do
    members=$(in_ns "$node" timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7500 && printf "SMEMBERS online\r\nQUIT\r\n" >&3 && cat <&3' 2>/dev/null \
        | tr -d '\r' | grep -v '^[*$+]' | sort | tr '\n' '|')
    printf '%s\t%s\n' "$node" "$members" >> "$RUN_DIR/set-members"
done
"$PYTHON" Cluster/chaos_check.py "$RUN_DIR/history" "$RUN_DIR/n1.dump" "$converged_ok" "$SEED" "$RUN_DIR/blocks" \
    "$RUN_DIR/counter" "$RUN_DIR/counter-totals" "$RUN_DIR/set" "$RUN_DIR/set-members" "$RUN_DIR/hcounter" "$RUN_DIR/hcounter-totals"
