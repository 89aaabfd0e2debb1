#!/usr/bin/env bash
# Start, stop and inspect N local syncnode peers on loopback.
#
#   Cluster/cluster.sh up [-n N] [-c CONFIG]   start node1..nodeN (node1 is every other's seed)
#   Cluster/cluster.sh down [-c CONFIG]        SIGTERM every peer this run folder started
#   Cluster/cluster.sh status [-c CONFIG]      `syncnode status` of every running peer
#   Cluster/cluster.sh logs [-c CONFIG]        the last lines of every peer's log
#
# Settings come from Cluster/local.conf (or -c FILE), then the environment (N, BASE_PORT,
# ADMIN_BASE_PORT, CLUSTER, LOG_LEVEL, RUN_DIR, SYNCNODE), then -n. Each peer keeps its pid
# file, log and data dir in $RUN_DIR/node<i>/; `down` signals only processes whose command line
# matches what this script started (Cluster/lib.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source Cluster/lib.sh

command=${1:-}
[ -n "$command" ] && shift
config=Cluster/local.conf
count=""
while [ $# -gt 0 ]; do
    case "$1" in
        -n) count=$2; shift 2 ;;
        -c) config=$2; shift 2 ;;
        *) echo "unknown argument: $1 (see the top of $0)" >&2; exit 64 ;;
    esac
done

# The environment wins over the file: remember it, read the file, put it back.
saved=$(for name in N BASE_PORT ADMIN_BASE_PORT CLUSTER LOG_LEVEL RUN_DIR; do
    [ -n "${!name:-}" ] && printf '%s=%q\n' "$name" "${!name}"; done || true)
# shellcheck disable=SC1090
source "$config"
eval "$saved"
[ -n "$count" ] && N=$count
case "$RUN_DIR" in /*) ;; *) RUN_DIR="$ROOT/$RUN_DIR" ;; esac
export RUN_DIR

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

case "$command" in
up)
    mkdir -p "$RUN_DIR"
    for i in $(seq 1 "$N"); do
        name="node$i" listen="127.0.0.1:$((BASE_PORT + i - 1))" admin="127.0.0.1:$((ADMIN_BASE_PORT + i - 1))"
        if peer_pid "$name" >/dev/null; then echo "$name already running (pid $(peer_pid "$name"))"; continue; fi
        for port in "${listen##*:}" "${admin##*:}"; do
            port_free "$port" || { echo "port $port on 127.0.0.1 is taken: stop what uses it or set BASE_PORT/ADMIN_BASE_PORT" >&2; exit 1; }
        done
        seed=()
        [ "$i" -gt 1 ] && seed=(--peer "127.0.0.1:$BASE_PORT")
        peer_start "$name" "$listen" "$admin" --cluster "$CLUSTER" --log-level "$LOG_LEVEL" "${seed[@]}"
        echo "$name up: listen $listen, admin $admin, pid $(cat "$RUN_DIR/$name/pid"), log $RUN_DIR/$name/log"
    done
    echo "try: $(syncnode_binary) status --admin 127.0.0.1:$ADMIN_BASE_PORT"
    ;;
down)
    stopped=0
    for name in $(peer_names); do
        if peer_pid "$name" >/dev/null; then
            peer_stop "$name" TERM && echo "$name stopped" && stopped=$((stopped + 1))
        else
            peer_stop "$name"   # removes a stale pid file, signals nothing
        fi
    done
    echo "$stopped peer(s) stopped; logs and data stay in $RUN_DIR"
    ;;
status)
    binary=$(syncnode_binary)
    for name in $(peer_names); do
        if peer_pid "$name" >/dev/null; then
            echo "== $name (pid $(peer_pid "$name"))"
            "$binary" status --admin "$(peer_admin "$name")" || true
        else
            echo "== $name: not running"
        fi
        echo
    done
    ;;
logs)
    for name in $(peer_names); do
        echo "== $name ($RUN_DIR/$name/log)"
        tail -n 15 "$RUN_DIR/$name/log" 2>/dev/null || true
    done
    ;;
*)
    sed -n '2,12p' "$0" >&2
    exit 64
    ;;
esac
