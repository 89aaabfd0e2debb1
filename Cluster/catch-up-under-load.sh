#!/usr/bin/env bash
# A peer that joins another while it takes sustained pipelined writes (`make bench-catch-up`;
# docs/operations.md, `--change-log-entries`): how often the catch-up walks start over because
# more changed during a walk than the change log holds, and how long until the first walk
# finishes, at the default change log and at CATCH_UP_ENTRIES.
#
#   Peer A (memory durability) gets CATCH_UP_PRELOAD SETs, then redis-benchmark SADD -P 16 over
#   CATCH_UP_KEYS members for CATCH_UP_WRITES commands; peer B starts CATCH_UP_JOIN_SECONDS into
#   that and links to A. One line per change-log size: restarts counted in both logs.
#
# Every process it starts is recorded by pid and stopped on exit, checked by its /proc command
# line first; its temp dir is removed. Environment: SYNCNODE (a release binary; the Makefile
# passes it), CATCH_UP_ENTRIES (default 4194304), CATCH_UP_PRELOAD (2000000), CATCH_UP_KEYS
# (1000000), CATCH_UP_WRITES (9000000), CATCH_UP_JOIN_SECONDS (3).

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SYNCNODE="${SYNCNODE:-.build-bench/release/syncnode}"
ENTRIES="${CATCH_UP_ENTRIES:-4194304}"
PRELOAD="${CATCH_UP_PRELOAD:-2000000}"
KEYS="${CATCH_UP_KEYS:-1000000}"
WRITES="${CATCH_UP_WRITES:-9000000}"
JOIN="${CATCH_UP_JOIN_SECONDS:-3}"
for tool in redis-benchmark redis-cli "$SYNCNODE"; do
    command -v "$tool" >/dev/null || { echo "catch-up-under-load: $tool not found" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/decide-catch-up.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qE "syncnode run --id cu|redis-benchmark -p 1742"; then
            kill "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# peer NAME LISTEN ADMIN ENTRIES [--peer ADDR]: starts a peer and waits until it answers.
peer() {
    local name=$1 listen=$2 admin=$3 entries=$4
    shift 4
    local sized=()
    [ "$entries" = default ] || sized=(--change-log-entries "$entries")
    setsid "$SYNCNODE" run --id "$name" --listen "$listen" --admin "$admin" --durability memory "${sized[@]}" "$@" \
        > "$WORK/$name.log" 2>&1 < /dev/null &
    PIDS+=($!)
    local tries=0
    until redis-cli -p "${admin##*:}" PING >/dev/null 2>&1; do
        tries=$((tries + 1))
        [ $tries -lt 200 ] || { echo "catch-up-under-load: $name did not start:" >&2; tail -3 "$WORK/$name.log" >&2; exit 1; }
        sleep 0.1
    done
}

now() { date +%s.%N; }

run() {
    local entries=$1
    rm -f "$WORK"/*.log "$WORK/writes.end"
    peer cua 127.0.0.1:17421 127.0.0.1:17321 "$entries"
    redis-benchmark -p 17321 -t set -c 50 -P 16 -n "$PRELOAD" -r "$KEYS" -q > /dev/null 2>&1
    ( redis-benchmark -p 17321 -t sadd -c 50 -P 16 -n "$WRITES" -r "$KEYS" -q > /dev/null 2>&1; now > "$WORK/writes.end" ) &
    PIDS+=($!)
    sleep "$JOIN"
    peer cub 127.0.0.1:17422 127.0.0.1:17322 "$entries" --peer 127.0.0.1:17421
    local joined first=""
    joined=$(now)
    while [ ! -f "$WORK/writes.end" ]; do
        if [ -z "$first" ] && grep -q "catch-up finished" "$WORK/cua.log" "$WORK/cub.log"; then first=$(now); fi
        sleep 0.5
    done
    local restarts finished
    restarts=$(cat "$WORK/cua.log" "$WORK/cub.log" | grep -c 'restarting catch-up' || true)
    finished=$([ -n "$first" ] && printf '%.1f s after the join' "$(echo "$first - $joined" | bc)" || echo "not while writes ran")
    printf 'change log %-9s walk restarts while writing: %-4s first catch-up finished: %s (writes ran %.0f s after the join)\n' \
        "$entries" "$restarts" "$finished" "$(echo "$(cat "$WORK/writes.end") - $joined" | bc)"
    cleanup_run
}

# Stops this run's peers (the trap stops anything left).
cleanup_run() {
    local pid
    for pid in "${PIDS[@]}"; do
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "syncnode run --id cu"; then kill "$pid" 2>/dev/null || true; fi
    done
    wait 2>/dev/null || true
    PIDS=()
}

echo "== catch-up under load: $PRELOAD SETs, then SADD -P 16 over $KEYS members ($WRITES commands); peer B joins ${JOIN} s in"
run default
run "$ENTRIES"
