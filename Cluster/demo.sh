#!/usr/bin/env bash
# `make demo`: three syncnode peers on loopback; a value put on one shows up on the other two
# (with `get`, and in a `watch` started before the put); the status table; then a clean stop.
# Ports are picked by the kernel (127.0.0.1:0); everything lives in .run/demo/ and every process
# started here is stopped on exit, whatever happens.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source Cluster/lib.sh
export RUN_DIR="$ROOT/.run/demo"
BIN=$(syncnode_binary)
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"
watch_pid=""

cleanup() {
    [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
    for name in a b c; do peer_stop "$name" TERM || true; done
}
trap cleanup EXIT

# run CMD...: prints the command as typed (with the binary as `syncnode`), then runs it.
run() {
    local line="syncnode" arg
    for arg in "${@:2}"; do
        if [[ "$arg" =~ ^[A-Za-z0-9._:/=@-]+$ ]]; then line+=" $arg"; else line+=" '${arg//\'/\'\\\'\'}'"; fi
    done
    echo "\$ $line"
    "$@"
}

started=$(date +%s%N)
echo "== starting three peers (logs in $RUN_DIR/*/log)"
peer_start a 127.0.0.1:0 127.0.0.1:0 --cluster demo
A=$(peer_admin a)
peer_start b 127.0.0.1:0 127.0.0.1:0 --cluster demo --peer "$(peer_listen a)"
B=$(peer_admin b)
peer_start c 127.0.0.1:0 127.0.0.1:0 --cluster demo --peer "$(peer_listen a)"
C=$(peer_admin c)
for name in a b c; do echo "   $name: peers on $(peer_listen $name), admin on $(peer_admin $name)"; done

mesh_up() {
    local admin=$1
    [ "$("$BIN" status --admin "$admin" --json | grep -o '"link":"connected"' | wc -l)" -eq 2 ]
}
mesh() { mesh_up "$A" && mesh_up "$B" && mesh_up "$C"; }
wait_until 20 "a full mesh" mesh

echo
echo "== a watch on c, started before the write"
"$BIN" watch --admin "$C" maintenance >"$RUN_DIR/watch.out" 2>"$RUN_DIR/watch.err" &
watch_pid=$!
wait_until 10 "the watch to start" grep -q watching "$RUN_DIR/watch.err"
echo "$ syncnode watch --admin $C maintenance &"

echo
echo "== write on a"
run "$BIN" put --admin "$A" maintenance '{"on":true,"reason":"deploy"}'
run "$BIN" put --admin "$A" 'quota[batch-jobs]' 0

echo
echo "== read on b and c"
wait_until 10 "the value on b" "$BIN" get --admin "$B" maintenance
wait_until 10 "the value on c" "$BIN" get --admin "$C" 'quota[batch-jobs]'
run "$BIN" get --admin "$B" maintenance
run "$BIN" get --admin "$C" 'quota["batch-jobs"]'

echo
echo "== what the watch on c printed"
wait_until 10 "the watch to print the change" grep -q maintenance "$RUN_DIR/watch.out"
cat "$RUN_DIR/watch.out"
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=""

echo
echo "== status of b"
run "$BIN" status --admin "$B"

echo
echo "== stopping (SIGTERM: each peer leaves the cluster gracefully)"
for name in a b c; do peer_stop "$name" TERM; done
echo "demo done in $(( ($(date +%s%N) - started) / 1000000 )) ms"
