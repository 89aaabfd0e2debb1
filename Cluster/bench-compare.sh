#!/usr/bin/env bash
# Decide beside Redis, in one run on 127.0.0.1 (`make bench-compare`; docs/performance.md).
#
#   Redis:  a master and a replica (replicaof), no persistence, each in its own temp dir.
#   Decide: two syncnode peers (memory durability), and two library nodes linked by DecideUV
#           in one process.
#   (a) The same redis-benchmark command line against the Redis master and syncnode peer 1:
#       SET, GET, INCR, SADD and HSET, -d 64 -c 50, -P 1 and -P 16, -r COMPARE_KEYS and -n COMPARE_KEYS × P (so a
#       run at -P 16 lasts about as long as one at -P 1, not a seventh of it). After each SET run
#       the second server is polled until it holds everything the first does (Redis: the
#       replica's replication offset reaches the master's; syncnode: peer 2's state digest
#       equals peer 1's), which gives the replicated rate: writes ÷ time until then.
#   (b) A pipelined stream of COMPARE_KEYS SETs on the Redis master, the replica polled for the
#       last, beside the library (one thread and 50) with the second node polled the same way.
#   (c) Memory: COMPARE_MEMORY_KEYS (1,000,000) SETs through one pipelined connection into a
#       fresh lone Redis and a fresh lone syncnode: resident bytes a key.
#
# Prints one table and writes it between the markers in docs/performance.md. Every server it
# starts is recorded by pid and stopped on exit (success, failure or Ctrl-C), and only after
# its /proc command line shows it is the process this script started.
#
# Environment: DECIDE_BENCH, SYNCNODE (release binaries; the Makefile passes them),
# COMPARE_KEYS (default 100000), COMPARE_OUTPUT (default docs/performance.md).

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BENCH="${DECIDE_BENCH:-.build-bench/release/DecideBench}"
SYNCNODE="${SYNCNODE:-.build-bench/release/syncnode}"
KEYS="${COMPARE_KEYS:-100000}"
CLIENTS=50
ROUNDS="${COMPARE_ROUNDS:-5}"
OUTPUT="${COMPARE_OUTPUT:-docs/performance.md}"
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "bench-compare: $tool missing (make deps-bench)" >&2; exit 1; }
done
[ -x "$BENCH" ] && [ -x "$SYNCNODE" ] || { echo "bench-compare: build $BENCH and $SYNCNODE first (make bench-compare)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/decide-compare.XXXXXX)"
RESULTS="$WORK/results"
: > "$RESULTS"
# "pid|pattern": a pid is signalled only while its command line contains pattern.
STARTED=()

owned() { # owned PID PATTERN: true while PID is alive and its command line contains PATTERN
    local cmdline
    [ -r "/proc/$1/cmdline" ] || return 1
    cmdline=$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null) || return 1
    [[ "$cmdline" == *"$2"* ]]
}

gone() { # gone PID: exited (or a zombie)
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}

cleanup() {
    local status=$? entry pid pattern waited
    trap - EXIT INT TERM
    for entry in "${STARTED[@]+"${STARTED[@]}"}"; do
        pid=${entry%%|*}; pattern=${entry#*|}
        if owned "$pid" "$pattern"; then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    for entry in "${STARTED[@]+"${STARTED[@]}"}"; do
        pid=${entry%%|*}; pattern=${entry#*|}
        waited=0
        while ! gone "$pid" && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
        if ! gone "$pid" && owned "$pid" "$pattern"; then
            echo "bench-compare: pid $pid ($pattern) ignored SIGTERM for 10 s; SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    if [ $status -ne 0 ]; then
        echo "bench-compare: failed (status $status); logs kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { # a port in 20000-59999 nothing listens on now (bind failures are caught later)
    local port tries=0
    while [ $tries -lt 200 ]; do
        port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
        tries=$((tries + 1))
    done
    echo "bench-compare: no free port found" >&2
    return 1
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 description=$2 deadline
    shift 2
    deadline=$(( $(date +%s) + seconds ))
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then echo "bench-compare: timed out waiting for $description" >&2; return 1; fi
        sleep 0.1
    done
}

record() { # record NAME VALUE
    echo "$1 $2" >> "$RESULTS"
}

collect() { # collect: COMPARE lines of stdin into the results, the rest to the terminal
    local line
    while IFS= read -r line; do
        case "$line" in
            "COMPARE "*) echo "${line#COMPARE }" >> "$RESULTS" ;;
            *) echo "$line" ;;
        esac
    done
}

# ---------------------------------------------------------------- Redis
start_redis() { # start_redis NAME PORT [extra args...]
    local name=$1 port=$2
    shift 2
    mkdir -p "$WORK/$name"
    setsid redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
        --dir "$WORK/$name" --logfile "$WORK/$name/log" "$@" </dev/null >/dev/null 2>&1 &
    local pid=$!
    STARTED+=("$pid|127.0.0.1:$port")
    echo "$pid" > "$WORK/$name/pid"
    if ! wait_for 10 "redis $name on port $port" redis-cli -h 127.0.0.1 -p "$port" ping; then
        tail -5 "$WORK/$name/log" >&2 || true
        return 1
    fi
}

replica_up() { redis-cli -h 127.0.0.1 -p "$REPLICA_PORT" info replication | grep -q 'master_link_status:up'; }

MASTER_PORT=$(free_port)
REPLICA_PORT=$(free_port)
while [ "$REPLICA_PORT" = "$MASTER_PORT" ]; do REPLICA_PORT=$(free_port); done
echo "== Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'): master 127.0.0.1:$MASTER_PORT, replica 127.0.0.1:$REPLICA_PORT (no persistence)"
start_redis master "$MASTER_PORT"
start_redis replica "$REPLICA_PORT" --replicaof 127.0.0.1 "$MASTER_PORT"
wait_for 20 "the Redis replica to link to its master" replica_up

# The Redis stream and the library, ROUNDS times each, alternating, so that a slow moment of
# this shared machine does not land on one side only; the table takes the median round, and
# each round's own Decide/Redis ratio (paired).
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round of $ROUNDS: Redis stream, then the library"
    COMPARE_MODE=redis-stream COMPARE_KEYS="$KEYS" COMPARE_MASTER="127.0.0.1:$MASTER_PORT" \
        COMPARE_REPLICA="127.0.0.1:$REPLICA_PORT" "$BENCH" compare | collect
    grep -q '^redis_stream_incomplete' "$RESULTS" && { echo "bench-compare: Redis stream incomplete" >&2; exit 1; }
    COMPARE_MODE=library COMPARE_KEYS="$KEYS" COMPARE_CLIENTS=$CLIENTS "$BENCH" compare | collect
    grep -q '^library_.*_incomplete' "$RESULTS" && { echo "bench-compare: library run incomplete" >&2; exit 1; }
done

# ---------------------------------------------------------------- redis-benchmark, both servers
start_syncnode() { # start_syncnode ID [run flags...]: starts it, waits for ready, sets LISTEN_ADDR and ADMIN_ADDR
    local id=$1 pid ready=""
    shift
    mkdir -p "$WORK/$id"
    setsid "$SYNCNODE" run --id "$id" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --cluster bench-compare \
        --durability memory "$@" </dev/null >"$WORK/$id/log" 2>&1 &
    pid=$!
    SYNCNODE_PID=$pid
    STARTED+=("$pid|syncnode run --id $id ")
    local deadline=$(( $(date +%s) + 20 ))
    while [ -z "$ready" ]; do
        ready=$(grep -m1 'syncnode ready' "$WORK/$id/log" || true)
        if [ -z "$ready" ]; then
            if gone "$pid"; then echo "bench-compare: syncnode $id exited; its log:" >&2; tail -5 "$WORK/$id/log" >&2; return 1; fi
            if [ "$(date +%s)" -ge "$deadline" ]; then echo "bench-compare: syncnode $id not ready in 20 s" >&2; return 1; fi
            sleep 0.05
        fi
    done
    LISTEN_ADDR=$(echo "$ready" | sed -n 's/.* listen=\([^ ]*\).*/\1/p')
    ADMIN_ADDR=$(echo "$ready" | sed -n 's/.* admin=\([^ ,]*\).*/\1/p')
}

start_syncnode cmp1
ADMIN1=$ADMIN_ADDR; LISTEN1=$LISTEN_ADDR; SYNCNODE1_PID=$SYNCNODE_PID
start_syncnode cmp2 --peer "$LISTEN1"
ADMIN2=$ADMIN_ADDR; SYNCNODE2_PID=$SYNCNODE_PID
linked() { "$SYNCNODE" status --admin "$ADMIN2" --json | grep -q '"link":"connected"'; }
wait_for 20 "syncnode cmp2 to link to cmp1" linked
echo "== syncnode: cmp1 at $ADMIN1, cmp2 at $ADMIN2 (memory durability, no secret, loopback)"

info_field() { # info_field HOST:PORT SECTION FIELD
    redis-cli -h "${1%:*}" -p "${1##*:}" info "$2" | tr -d '\r' | sed -n "s/^$3://p"
}
redis_converged() { [ "$(info_field "127.0.0.1:$REPLICA_PORT" replication master_repl_offset)" = "$(info_field "127.0.0.1:$MASTER_PORT" replication master_repl_offset)" ]; }
syncnode_converged() { [ "$(info_field "$ADMIN2" decide digest)" = "$(info_field "$ADMIN1" decide digest)" ]; }

cpu_ticks() { # cpu_ticks PID: "USER SYSTEM" clock ticks of all of PID's threads so far (/proc/PID/stat)
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo "0 0"; return; }
    stat=${stat##*) }   # after the command name: field 3 (state) on
    set -- $stat
    echo "${12} ${13}"
}
per_request_us() { # per_request_us TICKS REQUESTS: microseconds of CPU a request
    awk -v t="$1" -v hz="$TICKS_PER_SECOND" -v n="$2" 'BEGIN { printf "%.3f", t * 1e6 / hz / n }'
}
TICKS_PER_SECOND=$(getconf CLK_TCK)

# run_benchmark NAME ADDRESS CONVERGED PID SECOND_PID PIPELINE TEST: one redis-benchmark run
# (TEST set, get, incr, sadd or hset at -P PIPELINE) against ADDRESS; after every write run, polls
# CONVERGED until the second server holds everything (after SET, timed: the replicated rate). Beside the rate it records the server's CPU time per request (PID's
# threads, from /proc), and of it the user-space part; the second server's (SECOND_PID, the replica
# or peer 2) per SET; and the client's own CPU use: redis-benchmark is one thread, and when it is
# the busy side the rate measures the client, whichever server it talks to. The three processes
# share the machine's cores, so a second server that spends less per write leaves more to the
# other two.
run_benchmark() {
    local name=$1 address=$2 converged=$3 pid=$4 second=$5 pipeline=$6 test=$7 csv rps start end requests client finished
    local user0 system0 user1 system1 second_user0 second_system0 second_user1 second_system1
    local TIMEFORMAT='%U %S'
    requests=$(( KEYS * pipeline ))
    start=$(date +%s%N)
    read -r user0 system0 <<< "$(cpu_ticks "$pid")"
    read -r second_user0 second_system0 <<< "$(cpu_ticks "$second")"
    client=$( { time redis-benchmark -h "${address%:*}" -p "${address##*:}" -t $test -d 64 -c $CLIENTS -P $pipeline \
          -n "$requests" -r "$KEYS" --csv >"$WORK/benchmark.csv" 2>/dev/null; } 2>&1 )
    finished=$(date +%s%N)
    read -r user1 system1 <<< "$(cpu_ticks "$pid")"
    csv=$(tr -d '\r' < "$WORK/benchmark.csv" | grep -i "^\"$test\"" || true)
    rps=$(echo "$csv" | cut -d, -f2 | tr -d '"')
    [ -n "$rps" ] || { echo "bench-compare: redis-benchmark -t $test -P $pipeline against $name gave no figure" >&2; exit 1; }
    record "${name}_${test}_p${pipeline}_per_s" "$rps"
    record "${name}_${test}_p${pipeline}_server_cpu_us" "$(per_request_us $(( user1 + system1 - user0 - system0 )) "$requests")"
    record "${name}_${test}_p${pipeline}_server_user_us" "$(per_request_us $(( user1 - user0 )) "$requests")"
    record "${name}_${test}_p${pipeline}_client_cpu_percent" "$(echo "$client" | awk -v ns=$((finished - start)) '{ printf "%.0f", ($1 + $2) * 1e11 / ns }')"
    record "${name}_${test}_p${pipeline}_client_cpu_us" "$(echo "$client" | awk -v n="$requests" '{ printf "%.3f", ($1 + $2) * 1e6 / n }')"
    if [ $test = set ]; then
        wait_for 120 "$name's second server to hold every write" "$converged"
        end=$(date +%s%N)
        read -r second_user1 second_system1 <<< "$(cpu_ticks "$second")"
        record "${name}_set_p${pipeline}_second_cpu_us" \
            "$(per_request_us $(( second_user1 + second_system1 - second_user0 - second_system0 )) "$requests")"
        record "${name}_set_p${pipeline}_replicated_per_s" "$(awk -v n="$requests" -v ns=$((end - start)) 'BEGIN { printf "%.0f", n * 1e9 / ns }')"
        echo "   $name: redis-benchmark -t set -d 64 -c $CLIENTS -P $pipeline -n $requests -r $KEYS: $rps requests/s; second server holds all after $(( (end - start) / 1000000 )) ms"
    else
        echo "   $name: redis-benchmark -t $test -d 64 -c $CLIENTS -P $pipeline -n $requests -r $KEYS: $rps requests/s"
        # Every write line waits for the second server too, so the next line does not run
        # while this one's writes are still being replicated (a SADD run's backlog had cut
        # the HSET line after it from 250 k/s to 44 k/s).
        if [ $test != get ]; then wait_for 180 "$name's second server to hold the $test writes" "$converged"; fi
    fi
}

run_redis() { run_benchmark redis "127.0.0.1:$MASTER_PORT" redis_converged "$(cat "$WORK/master/pid")" "$(cat "$WORK/replica/pid")" "$@"; }
run_syncnode() { run_benchmark syncnode "$ADMIN1" syncnode_converged "$SYNCNODE1_PID" "$SYNCNODE2_PID" "$@"; }

# Paired runs: each line's two runs go back to back (seconds apart, not the minute a round of
# all four lines takes), and which server goes first alternates from round to round, so neither
# always runs in the other's wake (its replication or its freed memory). Each round's ratio
# compares the same seconds of this machine.
for round in $(seq 1 "$ROUNDS"); do
    if [ $(( round % 2 )) -eq 1 ]; then first=run_redis second=run_syncnode order="Redis, then syncnode"
    else first=run_syncnode second=run_redis order="syncnode, then Redis"; fi
    echo "== round $round of $ROUNDS: redis-benchmark, each line against $order"
    for pipeline in 1 16; do
        for test in set get incr sadd hset; do
            $first "$pipeline" "$test"
            $second "$pipeline" "$test"
        done
    done
done

# ---------------------------------------------------------------- memory per key
# One fresh lone server of each kind takes MEMORY_KEYS SETs of a 12-byte key (k:0000000001) and a
# 64-byte value through one pipelined connection (redis-cli --pipe); the row is the growth of its
# resident memory (/proc/PID/status VmRSS, the same measure for both) over the keys, once every key
# is held. Bytes a key are the cost a user pays for a large keyspace: structures, allocator
# slack and, for Decide, a version and a digest contribution a key.
MEMORY_KEYS="${COMPARE_MEMORY_KEYS:-1000000}"
awk -v n="$MEMORY_KEYS" 'BEGIN {
    value = ""; for (i = 0; i < 64; i++) value = value "v"
    for (i = 1; i <= n; i++) printf "*3\r\n$3\r\nSET\r\n$12\r\nk:%010d\r\n$64\r\n%s\r\n", i, value
}' > "$WORK/memory.req"
rss_bytes() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
holds_all() { [ "$(redis-cli -h "${1%:*}" -p "${1##*:}" dbsize | tr -d '\r')" = "$MEMORY_KEYS" ]; }
memory_per_key() { # memory_per_key NAME ADDRESS PID: loads the keys, records NAME_memory_bytes_per_key
    local before after
    before=$(rss_bytes "$3")
    redis-cli -h "${2%:*}" -p "${2##*:}" --pipe < "$WORK/memory.req" > "$WORK/$1-memory.out" 2>&1 \
        || { echo "bench-compare: redis-cli --pipe into $1 failed: $(tail -2 "$WORK/$1-memory.out")" >&2; exit 1; }
    wait_for 120 "$1 to hold the $MEMORY_KEYS keys" holds_all "$2"
    sleep 1   # the last replies' buffers handed back
    after=$(rss_bytes "$3")
    record "$1_memory_bytes_per_key" "$(awk -v b="$before" -v a="$after" -v n="$MEMORY_KEYS" 'BEGIN { printf "%.1f", (a - b) / n }')"
    echo "   $1: $MEMORY_KEYS SETs of a 12-byte key and a 64-byte value: resident memory $((before / 1048576)) MiB -> $((after / 1048576)) MiB"
}
echo "== memory: $MEMORY_KEYS keys into a fresh lone Redis and a fresh lone syncnode"
MEMORY_PORT=$(free_port)
start_redis memredis "$MEMORY_PORT"
memory_per_key redis "127.0.0.1:$MEMORY_PORT" "$(cat "$WORK/memredis/pid")"
start_syncnode memsync
memory_per_key syncnode "$ADMIN_ADDR" "$SYNCNODE_PID"
rm -f "$WORK/memory.req"

# ---------------------------------------------------------------- the table
# sort_median(V, N): sorts V[1..N] in place and answers its median (of an even count, the mean of
# the middle two). Prepended to the awk programs below.
MEDIAN_AWK='function sort_median(v, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = v[i]; j = i - 1; while (j >= 1 && v[j] > t) { v[j + 1] = v[j]; j-- } v[j + 1] = t }
    return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'
# A figure over its rounds: the median. The best round would favour the noisier side; the median
# of a machine this shared is steadier.
value() { awk -v name="$1" "$MEDIAN_AWK"' $1 == name { v[++n] = $2 }
    END { if (n) print sort_median(v, n) }' "$RESULTS"; }
# paired KIND DECIDE_NAME REDIS_NAME: "MEDIAN LOWEST HIGHEST COUNT" of each round's own speed
# ratio (rates: Decide ÷ Redis; times: Redis ÷ Decide). Both sides of a round run back to back,
# so a slow minute of the machine lands on both; rounds where a time is not positive (a lag
# held before the last reply) have no ratio. Nothing when no round has one.
paired() { awk -v kind="$1" -v d="$2" -v r="$3" "$MEDIAN_AWK"'
    $1 == d { dv[++nd] = $2 } $1 == r { rv[++nr] = $2 }
    END { n = (nd < nr) ? nd : nr
        for (i = 1; i <= n; i++) {
            if (kind == "rate") { if (rv[i] > 0) v[++m] = dv[i] / rv[i] }
            else if (dv[i] > 0 && rv[i] > 0) v[++m] = rv[i] / dv[i]
        }
        if (!m) exit
        median = sort_median(v, m)
        printf "%f %f %f %d\n", median, v[1], v[m], m }' "$RESULTS"; }
rate() { awk -v v="$1" 'BEGIN { if (v >= 1e6) printf "%.2f M/s", v / 1e6; else printf "%.1f k/s", v / 1e3 }'; }
micros() { awk -v v="$1" 'BEGIN { printf "%.2f µs", v }'; }
millis() { awk -v v="$1" 'BEGIN { if (v <= 0) printf "0 (%.2f ms before the reply)", -v; else if (v >= 100) printf "%.0f ms", v; else printf "%.2f ms", v }'; }
# ratio PAIRED: the median paired ratio and the range of the rounds' ratios, so above 1× Decide
# is ahead; "n/a" when no round has one.
ratio() { [ -n "$1" ] || { echo "n/a (held before the last reply)"; return; }
    echo "$1" | awk '{ printf "%.2f× (rounds %.2f–%.2f×)", $1, $2, $3 }'; }

# goal MINIMUM PAIRED: "≥ MINIMUM×: met" or "not met", judged on the median paired ratio
# (empty MINIMUM: no goal set).
goal() { [ -z "$1" ] && { echo "—"; return; }
    awk -v min="$1" -v x="${2%% *}" 'BEGIN { printf "≥ %s×: %s", min, (x != "" && x + 0 >= min) ? "met" : "not met" }'; }

client_cpu() { # client_cpu RUN: redis-benchmark's CPU use in RUN (e.g. redis_get_p1), the highest of its rounds
    awk -v name="$1_client_cpu_percent" '$1 == name { if (!seen || $2 > high) high = $2; seen = 1 }
        END { if (seen) printf "%d %%", high; else printf "n/a" }' "$RESULTS"; }

ROWS=()
row() { # row WORKLOAD KIND REDIS_NAME DECIDE_NAME [GOAL_RATIO]
    local redis decide shown_redis shown_decide pairs
    redis=$(value "$3"); decide=$(value "$4")
    [ -n "$redis" ] && [ -n "$decide" ] || { echo "bench-compare: missing figure $3 or $4" >&2; exit 1; }
    case "$2" in
        rate) shown_redis=$(rate "$redis"); shown_decide=$(rate "$decide") ;;
        us) shown_redis=$(micros "$redis"); shown_decide=$(micros "$decide") ;;
        bytes) shown_redis="$redis B"; shown_decide="$decide B" ;;
        *) shown_redis=$(millis "$redis"); shown_decide=$(millis "$decide") ;;
    esac
    pairs=$(paired "$2" "$4" "$3")
    ROWS+=("$1|$shown_redis|$shown_decide|$(ratio "$pairs")|$(goal "${5:-}" "$pairs")")
}
# Goals: syncnode at least 1.0× Redis on every redis-benchmark line and replicated (issue 13);
# the library, replicated, at least 1.5× Redis master→replica (issue 12).
for pipeline in 1 16; do
    row "redis-benchmark SET -P $pipeline, 50 clients: Redis master vs syncnode" rate redis_set_p${pipeline}_per_s syncnode_set_p${pipeline}_per_s 1.0
    row "redis-benchmark GET -P $pipeline, 50 clients: Redis master vs syncnode" rate redis_get_p${pipeline}_per_s syncnode_get_p${pipeline}_per_s 1.0
    row "redis-benchmark INCR -P $pipeline, 50 clients: Redis master vs syncnode (a counter no concurrent change is lost from)" rate redis_incr_p${pipeline}_per_s syncnode_incr_p${pipeline}_per_s 1.0
    row "redis-benchmark SADD -P $pipeline, 50 clients: Redis master vs syncnode (a set whose concurrent adds stay)" rate redis_sadd_p${pipeline}_per_s syncnode_sadd_p${pipeline}_per_s 1.0
    row "redis-benchmark HSET -P $pipeline, 50 clients: Redis master vs syncnode (a hash whose fields are kept one by one)" rate redis_hset_p${pipeline}_per_s syncnode_hset_p${pipeline}_per_s 1.0
    row "replicated, SET -P $pipeline: writes / time until the second server holds all (Redis replica vs syncnode peer 2)" rate redis_set_p${pipeline}_replicated_per_s syncnode_set_p${pipeline}_replicated_per_s 1.0
done
for pipeline in 1 16; do
    for test in SET GET; do
        lower=$(echo $test | tr 'A-Z' 'a-z')
        row "server CPU time per request, $test -P $pipeline (redis-benchmark itself busy $(client_cpu redis_${lower}_p${pipeline}) / $(client_cpu syncnode_${lower}_p${pipeline}) of a core)" us redis_${lower}_p${pipeline}_server_cpu_us syncnode_${lower}_p${pipeline}_server_cpu_us
        row "of which user space, $test -P $pipeline" us redis_${lower}_p${pipeline}_server_user_us syncnode_${lower}_p${pipeline}_server_user_us
        row "redis-benchmark's own CPU time per request, $test -P $pipeline (the client, one thread)" us redis_${lower}_p${pipeline}_client_cpu_us syncnode_${lower}_p${pipeline}_client_cpu_us
    done
    row "second server's CPU time per SET -P $pipeline, until it holds all (Redis replica vs syncnode peer 2)" us redis_set_p${pipeline}_second_cpu_us syncnode_set_p${pipeline}_second_cpu_us
done
row "writes acknowledged, one writer: Redis stream (pipelined) vs library decide() on A" rate redis_stream_write_per_s library_w1_write_per_s
row "replicated: writes / time until the second server holds all: Redis stream vs library, 1 thread" rate redis_stream_replicated_per_s library_w1_replicated_per_s 1.5
row "replicated: Redis stream vs library, 50 threads" rate redis_stream_replicated_per_s library_w50_replicated_per_s 1.5
row "time from the first write until the second server holds the last: Redis stream vs library, 1 thread" ms redis_stream_total_ms library_w1_total_ms
row "second server behind the last acknowledged write: Redis stream vs library, 1 thread" ms redis_stream_lag_ms library_w1_lag_ms
row "resident memory a key after $MEMORY_KEYS SETs of a 12-byte key and a 64-byte value (one pipelined connection, a fresh lone server each)" bytes redis_memory_bytes_per_key syncnode_memory_bytes_per_key 1.0

CORES=$(nproc)
MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
MEMORY=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
WHEN=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
REDIS_VERSION=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')

echo
echo "== bench-compare: Redis $REDIS_VERSION vs Decide, $KEYS keys, 64-byte values, 127.0.0.1 ($CORES cores, $MEMORY, load $LOAD)"
{
    echo "workload|Redis|Decide|Decide/Redis (speed, median of paired rounds)|goal"
    for entry in "${ROWS[@]}"; do echo "$entry"; done
} | awk -F'|' '
    { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > width[i]) width[i] = length($i) } rows = NR; cols = NF }
    END {
        for (r = 1; r <= rows; r++) {
            line = ""
            for (i = 1; i <= cols; i++) line = line sprintf("%-" width[i] "s  ", cell[r, i])
            print line
            if (r == 1) { line = ""; for (i = 1; i <= cols; i++) { d = ""; for (k = 0; k < width[i]; k++) d = d "-"; line = line d "  " } print line }
        }
    }'

BLOCK="$WORK/block.md"
{
    echo "<!-- bench-compare:begin (written by \`make bench-compare\`; edits inside are overwritten) -->"
    echo "Measured $WHEN on $CORES cores ($MODEL), $MEMORY memory, load average at the end $LOAD;"
    echo "Redis $REDIS_VERSION (no persistence), Decide release build, syncnode with memory durability."
    echo "$KEYS keys, 64-byte values (Decide: a 64-character JSON string), everything on 127.0.0.1;"
    echo "redis-benchmark rows: the same command line against both servers (\`-n\` the key count × the pipeline depth); the Redis stream and the library;"
    echo "$ROUNDS alternating rounds (\`COMPARE_ROUNDS\`), each running both sides back to back (each redis-benchmark line against both servers in turn, the first alternating by round): each figure is the median round; Decide ÷ Redis is the median of the rounds' own ratios, with their range, and the goal is judged on it."
    echo "Server CPU rows: user and system time of all the server's threads per request (less is better), the user-space part of it, and how busy redis-benchmark (one thread) was against each server; near 100 %, the rate rows measure the client as much as the server, and the CPU rows tell the servers apart."
    echo "Client rows: redis-benchmark's own user and system time per request against each server. When it was busy most of the run, a rate row is about 1 ÷ this figure: the two rates then differ by what the client spent, and a server's own cost shows in its CPU rows only."
    echo "Second server rows: the replica's (peer 2's) user and system time per SET, from the run's start until it holds every write. Client, server and second server share the machine's $CORES cores, so what one spends the others do not get."
    echo "Reproduce with \`make bench-compare\` (\`COMPARE_KEYS=N\` to change the key count)."
    echo
    echo "| workload | Redis | Decide | Decide ÷ Redis (speed, median of paired rounds; above 1× Decide is ahead) | goal |"
    echo "| --- | ---: | ---: | ---: | --- |"
    for entry in "${ROWS[@]}"; do
        IFS='|' read -r workload redis decide ratio_text goal_text <<< "$entry"
        echo "| $workload | $redis | $decide | $ratio_text | $goal_text |"
    done
    echo "<!-- bench-compare:end -->"
} > "$BLOCK"

if [ -f "$OUTPUT" ] && grep -q '<!-- bench-compare:begin' "$OUTPUT" && grep -q '<!-- bench-compare:end -->' "$OUTPUT"; then
    awk -v block="$BLOCK" '
        /<!-- bench-compare:begin/ { while ((getline line < block) > 0) print line; skipping = 1; next }
        /<!-- bench-compare:end -->/ { skipping = 0; next }
        !skipping { print }' "$OUTPUT" > "$WORK/performance.md"
    cat "$WORK/performance.md" > "$OUTPUT"
else
    { echo "# Performance"; echo; echo "## Decide beside Redis"; echo; cat "$BLOCK"; } > "$OUTPUT"
fi
echo
echo "bench-compare: table written into $OUTPUT"
