#!/usr/bin/env bash
# `make integration`: multi-process tests with real syncnode peers on 127.0.0.1.
#
#   (a) a put on one peer is visible on every peer
#   (b) kill -9 one peer, write 1,000 keys and some deletes elsewhere, restart it: every peer's
#       dump becomes identical
#   (c) a peer started later with only one seed learns every member (and they learn it)
#   (d) SIGTERM makes a peer leave gracefully: it exits 0 and the others report it left
#   (e) a peer with a wrong cluster secret is refused, and both sides log why
#   (f) the client endpoint and the CLI: bad commands get error replies on a connection that
#       stays usable; KEY syntax; exit codes 1 (no value, deleted) and 2 (nobody answers)
#   (g) durability: a lone peer with --durability strict, killed with -9 right after 1,000
#       acknowledged puts, restarts with all 1,000
#   (h) durability: a three-peer cluster in which every peer is killed with -9 and restarted
#       keeps everything
#   (i) tombstones: three durable peers collect the tombstones of 10 deletes (every member
#       reported covering them); one is killed with -9 and restarted: no deleted key comes back
#   (j) forget: a member killed with -9 is forgotten with `syncnode forget`; the others collect
#       a delete it never saw; restarted with its stale data, it is refused and the key stays gone
#   (w) counter lifetimes: PEXPIRE of a counter while w3 (which counted) is down leaves w3's share
#       past the instant; once w3 is forgotten, that share goes too
#   (l) Redis clients: a scripted redis-cli session (replies exactly as Redis words them), the CLI
#       and redis-cli reading each other's writes across peers, SCAN and INFO replication
#   (m) a Python service (redis-py, in the venv `make deps-python` makes) writes on a and reads
#       and subscribes on b: keyspace notifications of remote and local changes, the value
#       mapping, MSET as one version, pipelining, RESP3 pushes, malformed requests; a rate limiter
#       INCRing on both at once (exact total), online users SREMed on a while SADDed on b, and a
#       session hash written field by field on both, and a leaderboard (ZADD) scored on both
#   (n) access: AUTH with a password file (NOAUTH before, WRONGPASS for a wrong one, the CLI
#       with --password-file), a Unix socket of mode 600, a non-loopback address refused
#       without a password
#   (o) expiring keys: a key written with a 2 s lifetime (redis-cli SET PX, and the CLI's put
#       --expire-after) is on every peer at once and gone from every peer after 2 s, not before
#   (p) node-owned keys: c writes its presence (SET ... OWNED) and a shared key; kill -9 of c
#       hides its presence on a and b (the shared key stays) within the failure-detection time;
#       c restarted on its ports: its presence reads again everywhere
#   (q) acknowledged writes: `put --wait 2` on a returns once b and c hold the value; a killed
#       with -9 at once, b and c still answer it; `--wait` for more peers than exist exits 3;
#       `syncnode lease` on a (acknowledged by both), refused on b, released with its token
#   (r) rotating the cluster secret on running a, b, c: the new one accepted, then proved, then
#       the old retired (reload-secrets and SIGHUP); every link ends sealed under the new one,
#       writes keep flowing; a secrets file that cannot be used changes nothing
#   (s) metrics: curl scrapes a's and b's Prometheus endpoints; the counters move with 50 writes;
#       a's /health and /ready answer 200
#   (t) a wrong wall clock (one peer's moved by a preload): w 300 s ahead of m1 and m2 refuses every
#       decision and says why, while it still receives theirs; restarted with the right clock on
#       its data (its stored clock still ahead) it refuses too; 300 s behind, it refuses, and
#       refuses their entries; with the right clock and fresh data it decides again and all three
#       hold the same entries
#   (u) acknowledgement means held (issue 58): u1 takes a write alone; u3 links 300 s behind and
#       refuses it: WAIT 1 on u1 answers 0 while u3 holds nothing. u2 runs strict on a 3 MiB
#       tmpfs filled until its store fails: it still applies u1's writes in memory, and WAIT 1
#       answers 0 for them
#   (flood) a stranger trying to hold 1,100 idle sockets to a peer's --listen: its link stays up
#       and comes back after its peer's kill -9; over a thousand refusals, at most 30 log lines
#       (Cluster/handshake_flood.sh)
#   (v) hostile clients (at the end, its own function): 16 strangers declaring 64 MiB AUTH
#       arguments to a password-protected peer leave its RSS within 64 MiB; 2,000 costly
#       patterns do not hold another client's PING 1 s (Cluster/hostile_clients.py)
#   (k) a large join: a peer holding 100,000 values of 1 KiB (100 MB), loaded through one
#       pipelined connection (redis-cli --pipe); a new peer seeded with it reaches the same digest (prints
#       the seconds, the joiner's peak RSS and what it copied)
#   (feed) a redis-py reader tails one peer's change feed while that peer is killed with -9 and
#       restarted: it resumes from its position and gets every acknowledged write exactly once
#
# `CASES="j w"` (make integration CASES="j w") runs only the cases named: g, h, i, j, w, n, t, u,
# flood, k, v and feed each start peers of their own; the cases on the shared a, b, c cluster ((a)-(f),
# (l), (m), (o)-(s), (q)) build on each other's state and run together, as "abc" or by any of
# their letters.
#
# Every wait polls with a deadline; ports are picked by the kernel (127.0.0.1:0) and reused
# only for restarts ((b), (h), (i), (j)). Every process started here is stopped on exit (trap), by pid,
# after checking its command line (Cluster/lib.sh). Ends with `N passed, N failed`; exits 1 on
# any failure. Logs stay in .run/integration/ for a look after a failure.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source Cluster/lib.sh
export RUN_DIR="$ROOT/.run/integration"
BIN=$(syncnode_binary)
[ -x "$BIN" ] || { echo "no syncnode binary at $BIN: run make syncnode" >&2; exit 2; }
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"
PEERS=(a b c d e s x y z t1 t2 t3 f1 f2 f3 w1 w2 w3 p m1 m2 w u1 u2 u3 load join fd1 fd2)
PYTHON="${PYTHON:-$ROOT/.build-venv/bin/python}"
passed=0
failed=0

# The small disk of (u), mounted over u2's data directory (root only).
SMALL_DISK="$RUN_DIR/u2/data"
cleanup() {
    for name in "${PEERS[@]}"; do
        peer_stop "$name" TERM >/dev/null 2>&1 || peer_stop "$name" KILL >/dev/null 2>&1 || true
    done
    if mountpoint -q "$SMALL_DISK" 2>/dev/null; then umount "$SMALL_DISK" || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# CASES="g w" (make integration CASES="g w") runs only the cases named. The cases on the shared
# a, b, c cluster build on each other's state and run together: "abc", or any of their letters,
# runs the cluster and all of them.
ALL_CASES="abc g h i j w n t u flood k v feed"
ABC_CASES="a b c d e f l m o p q r s"
CASES="${CASES:-}"
for wanted in ${CASES//,/ }; do
    [[ " $ALL_CASES $ABC_CASES " == *" $wanted "* ]] || { echo "integration: no case '$wanted' (cases: $ALL_CASES, or a letter of $ABC_CASES)" >&2; exit 2; }
done
want() {   # want CASE: whether CASES names CASE (every case when CASES is empty)
    [ -z "${CASES:-}" ] && return 0
    local wanted
    for wanted in ${CASES//,/ }; do
        [ "$wanted" = "$1" ] && return 0
        if [ "$1" = abc ] && [[ " $ABC_CASES " == *" $wanted "* ]]; then return 0; fi
    done
    return 1
}
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {
    failed=$((failed + 1)); echo "FAIL $1"
    [ $# -gt 1 ] && echo "     $2"
    return 0
}

# The cluster's secret (mode 600), and a wrong one for (e).
head -c 32 /dev/urandom | base64 > "$RUN_DIR/secret"
head -c 32 /dev/urandom | base64 > "$RUN_DIR/wrong-secret"
: > "$RUN_DIR/accepted"   # secrets accepted beside it: none until the rotation in (r)
chmod 600 "$RUN_DIR/secret" "$RUN_DIR/wrong-secret" "$RUN_DIR/accepted"
COMMON=(--cluster integration --cluster-secret-file "$RUN_DIR/secret" --accepted-secrets-file "$RUN_DIR/accepted")

status_json() { "$BIN" status --admin "$(peer_admin "$1")" --json; }
# link_of OBSERVER MEMBER: MEMBER's link state in OBSERVER's status ("" when unknown).
link_of() {
    status_json "$1" | tr '{' '\n' | grep "\"id\":\"$2\"" | sed -n 's/.*"link":"\([a-z]*\)".*/\1/p'
}
linked() { [ "$(link_of "$1" "$2")" = connected ]; }
# connected_all OBSERVER MEMBER...: OBSERVER has a live link to every MEMBER.
connected_all() {
    local observer=$1 member
    shift
    for member in "$@"; do linked "$observer" "$member" || return 1; done
}
# rcli PEER ARGS...: redis-cli against PEER's client endpoint (no tty: raw replies, one per line).
rcli() { local address; address=$(peer_admin "$1"); shift; redis-cli -h "${address%:*}" -p "${address##*:}" "$@"; }
value_is() { [ "$("$BIN" get --admin "$(peer_admin "$1")" "$2" 2>/dev/null)" = "$3" ]; }
dump_of() { "$BIN" dump --admin "$(peer_admin "$1")" > "$RUN_DIR/$1.dump"; }
# dumps_equal PEER...: every peer's dump is byte-for-byte the first one's.
dumps_equal() {
    local first=$1 name
    dump_of "$first" || return 1
    for name in "$@"; do
        dump_of "$name" || return 1
        cmp -s "$RUN_DIR/$first.dump" "$RUN_DIR/$name.dump" || return 1
    done
}
# resp_batch PEER FILE [SECONDS]: sends every command of FILE (one per line, arguments split at
# spaces) pipelined on one connection with `redis-cli --pipe`, and prints its last line,
# `errors: E, replies: R`; gives up after SECONDS (default 60).
resp_batch() {
    local address
    address=$(peer_admin "$1")
    LC_ALL=C awk '{ printf "*%d\r\n", NF; for (i = 1; i <= NF; i++) printf "$%d\r\n%s\r\n", length($i), $i }' "$2" \
        | timeout "${3:-60}" redis-cli -h "${address%:*}" -p "${address##*:}" --pipe 2>&1 | tail -n 1
}
# batch_ok REPLY-FILE N: the batch got N replies and no error.
batch_ok() { grep -q "^errors: 0, replies: $2\$" "$1"; }
# status_number PEER FIELD: a top-level number of PEER's status reply (entries, tombstones, ...).
status_number() { status_json "$1" | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"; }
digest_of() { status_json "$1" | sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
# holds_collected N PEER...: every PEER holds N entries and no tombstone.
holds_collected() {
    local want=$1 name
    shift
    for name in "$@"; do
        [ "$(status_number "$name" entries)" = "$want" ] && [ "$(status_number "$name" tombstones)" = 0 ] || return 1
    done
}
# stays_true SECONDS COMMAND...: COMMAND holds at every check (every 0.2 s) for SECONDS; fails
# at the first check where it does not.
stays_true() {
    local deadline=$(( $(date +%s%N) + $1 * 1000000000 ))
    shift
    while [ "$(date +%s%N)" -lt "$deadline" ]; do
        "$@" >/dev/null 2>&1 || return 1
        sleep 0.2
    done
}
# collected_total PEER: the tombstones PEER's log says it collected, in all.
collected_total() {
    grep 'collected tombstones' "$RUN_DIR/$1/log" | sed -n 's/.* count=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}'
}
seconds_since() { local ns=$(( $(date +%s%N) - $1 )); echo "$((ns / 1000000000)).$(( ns / 100000000 % 10 ))"; }
kill9() {   # kill9 NAME: SIGKILL, reaped, pid file removed
    local pid
    pid=$(peer_pid "$1") || return 0
    { kill -9 "$pid"; wait "$pid"; } 2>/dev/null
    rm -f "$RUN_DIR/$1/pid"
}
entry_count() { dump_of "$1" && wc -l < "$RUN_DIR/$1.dump"; }
count_is() { [ "$(entry_count "$1")" = "$2" ]; }
# Replication settings that make the tombstone and forget cases quick: a walk every 500 ms, and
# collect MS, tombstone collection every MS.
fast=(--anti-entropy-interval-ms 500)
collect() { echo "--tombstone-collection-interval-ms"; echo "$1"; }

if want abc; then  # the a, b, c cluster the cases (a)-(f), (l), (m), (o)-(s) and (q) share
echo "== starting a, b, c (secret-protected cluster; b and c have a as their only seed)"
peer_start a 127.0.0.1:0 127.0.0.1:0 "${COMMON[@]}" --metrics 127.0.0.1:0 || { echo "0 passed, 1 failed"; exit 1; }
peer_start b 127.0.0.1:0 127.0.0.1:0 "${COMMON[@]}" --metrics 127.0.0.1:0 --peer "$(peer_listen a)" || { echo "0 passed, 1 failed"; exit 1; }
peer_start c 127.0.0.1:0 127.0.0.1:0 "${COMMON[@]}" --peer "$(peer_listen a)" || { echo "0 passed, 1 failed"; exit 1; }
mesh_abc() { connected_all a b c && connected_all b a c && connected_all c a b; }
if wait_until 20 "a full mesh of a, b, c" mesh_abc; then
    pass "mesh: a, b and c link to each other (c learnt b from gossip)"
else
    fail "mesh: a, b and c link to each other" "$(status_json a)"
fi
fi  # the a, b, c cluster

# --- (a) -----------------------------------------------------------------------------------
if want abc; then
"$BIN" put --admin "$(peer_admin b)" 'itest[visible]' '{"from":"b","n":1}' >/dev/null
ok=1
for name in a b c; do
    wait_until 10 "the put on $name" value_is "$name" 'itest[visible]' '{"from":"b","n":1}' || ok=0
done
if [ $ok = 1 ]; then pass "(a) a put on b is visible on a, b and c"; else fail "(a) a put on b is visible on a, b and c"; fi
fi  # (a)

# --- (b) -----------------------------------------------------------------------------------
if want abc; then
c_listen=$(peer_listen c)
c_admin=$(peer_admin c)
c_pid=$(peer_pid c)
{ kill -9 "$c_pid"; wait "$c_pid"; } 2>/dev/null   # reaps it, keeping bash's "Killed" notice out of the output
rm -f "$RUN_DIR/c/pid"
c_unlinked() { ! linked a c; }
wait_until 10 "a to notice c is gone" c_unlinked || true
# 1,000 keys: 600 written on a and 400 on b at the same time; once a and b agree, 50 of a's
# keys are deleted on b and 25 of b's on a (after the puts, so each delete is the newest write).
: > "$RUN_DIR/puts-a.req"
: > "$RUN_DIR/puts-b.req"
: > "$RUN_DIR/deletes-a.req"
: > "$RUN_DIR/deletes-b.req"
for i in $(seq 1 600); do echo "SET bulk[$i] {\"i\":$i,\"by\":\"a\"}" >> "$RUN_DIR/puts-a.req"; done
for i in $(seq 601 1000); do echo "SET bulk[$i] {\"i\":$i,\"by\":\"b\"}" >> "$RUN_DIR/puts-b.req"; done
for i in $(seq 1 50); do echo "DEL bulk[$i]" >> "$RUN_DIR/deletes-b.req"; done
for i in $(seq 601 625); do echo "DEL bulk[$i]" >> "$RUN_DIR/deletes-a.req"; done
resp_batch a "$RUN_DIR/puts-a.req" > "$RUN_DIR/puts-a.rep" &
batch_a=$!
resp_batch b "$RUN_DIR/puts-b.req" > "$RUN_DIR/puts-b.rep"
wait "$batch_a"
wait_until 30 "a and b to agree after the puts" dumps_equal a b || true
resp_batch a "$RUN_DIR/deletes-a.req" > "$RUN_DIR/deletes-a.rep" &
batch_a=$!
resp_batch b "$RUN_DIR/deletes-b.req" > "$RUN_DIR/deletes-b.rep"
wait "$batch_a"
if batch_ok "$RUN_DIR/puts-a.rep" 600 && batch_ok "$RUN_DIR/puts-b.rep" 400 && batch_ok "$RUN_DIR/deletes-a.rep" 25 \
    && batch_ok "$RUN_DIR/deletes-b.rep" 50; then
    pass "(b) 1,000 puts and 75 deletes committed on a and b while c is down"
else
    fail "(b) 1,000 puts and 75 deletes committed on a and b while c is down" "$(cat "$RUN_DIR"/puts-?.rep "$RUN_DIR"/deletes-?.rep | tr '\n' ' ')"
fi
if peer_start c "$c_listen" "$c_admin" "${COMMON[@]}" --peer "$(peer_listen a)"; then
    if wait_until 60 "a, b and c to hold identical dumps" dumps_equal a b c; then
        entries=$(wc -l < "$RUN_DIR/c.dump")
        deleted=$(grep -c '"deleted":true' "$RUN_DIR/c.dump")
        if [ "$entries" -eq 1001 ] && [ "$deleted" -eq 75 ]; then
            pass "(b) after kill -9 and restart, c's dump equals a's and b's (1001 entries, 75 tombstones)"
        else
            fail "(b) after kill -9 and restart, the dumps hold what was written" "$entries entries, $deleted tombstones"
        fi
    else
        fail "(b) after kill -9 and restart, every dump becomes identical" \
            "$(wc -l "$RUN_DIR"/a.dump "$RUN_DIR"/b.dump "$RUN_DIR"/c.dump | tr '\n' ' ')"
    fi
else
    fail "(b) c restarts on its old ports"
fi
fi  # (b)

# --- (c) -----------------------------------------------------------------------------------
if want abc; then
peer_start d 127.0.0.1:0 127.0.0.1:0 "${COMMON[@]}" --peer "$(peer_listen b)"
mesh_with_d() { connected_all d a b c && connected_all a d && connected_all b d && connected_all c d; }
if wait_until 20 "d to link to a, b and c, and each of them to d" mesh_with_d; then
    pass "(c) d, seeded with b only, learns a and c and every member links to it"
else
    fail "(c) d, seeded with b only, learns every member" "$(status_json d)"
fi
if wait_until 30 "d to catch up" dumps_equal a d; then
    pass "(c) d catches up: its dump equals a's"
else
    fail "(c) d catches up: its dump equals a's"
fi
fi  # (c)

# --- (d) -----------------------------------------------------------------------------------
if want abc; then
d_pid=$(peer_pid d)
kill -TERM "$d_pid"
wait_until 15 "d to exit after SIGTERM" pid_gone "$d_pid"
wait "$d_pid" 2>/dev/null
d_status=$?
rm -f "$RUN_DIR/d/pid"
if [ "$d_status" -eq 0 ] && grep -q 'leaving the cluster' "$RUN_DIR/d/log" && grep -q '\] stopped' "$RUN_DIR/d/log"; then
    pass "(d) SIGTERM: d leaves the cluster, stops and exits 0"
else
    fail "(d) SIGTERM: d leaves the cluster, stops and exits 0" "exit status $d_status; log tail: $(tail -3 "$RUN_DIR/d/log")"
fi
left_everywhere() {
    local name
    for name in a b c; do [ "$(link_of "$name" d)" = left ] || return 1; done
}
if wait_until 10 "a, b and c to report d left" left_everywhere; then
    pass "(d) a, b and c report d as left"
else
    fail "(d) a, b and c report d as left" "a sees d as '$(link_of a d)'"
fi
fi  # (d)

# --- (e) -----------------------------------------------------------------------------------
if want abc; then
peer_start e 127.0.0.1:0 127.0.0.1:0 --cluster integration --cluster-secret-file "$RUN_DIR/wrong-secret" \
    --peer "$(peer_listen a)"
if wait_until 15 "a to log a refusal of e's link" grep -q 'link refused.*wrong cluster secret' "$RUN_DIR/a/log" \
    && wait_until 15 "e to log why its dial failed" grep -qE 'connect failed.*(refused|secret)' "$RUN_DIR/e/log"; then
    pass "(e) a refuses e (wrong secret) and both log why"
else
    fail "(e) a refuses e (wrong secret) and both log why" "a: $(grep -m1 'refused' "$RUN_DIR/a/log"); e: $(grep -m1 'failed' "$RUN_DIR/e/log")"
fi
if [ -z "$(link_of a e)" ] && ! status_json e | grep -q '"link":"connected"'; then
    pass "(e) e is not a member on a, and e has no link"
else
    fail "(e) e is not a member on a, and e has no link" "a sees e as '$(link_of a e)'"
fi
e_admin=$(peer_admin e)
peer_stop e TERM
fi  # (e)

# --- (f) -----------------------------------------------------------------------------------
if want abc; then
# One connection (redis-cli reads one command per line from stdin): five bad commands, then a
# good one on the same connection.
printf '%s\n' 'FROBNICATE x' 'SET x' 'GET' 'SET q[ 1' 'APPEND q x' 'DECIDE.STATUS' > "$RUN_DIR/bad.req"
a_admin=$(peer_admin a)
redis-cli -h "${a_admin%:*}" -p "${a_admin##*:}" < "$RUN_DIR/bad.req" 2>&1 | grep -v '^$' > "$RUN_DIR/bad.rep"
if [ "$(head -5 "$RUN_DIR/bad.rep" | grep -c '^ERR ')" -eq 5 ] && sed -n 6p "$RUN_DIR/bad.rep" | grep -q '"node":"a"' \
    && grep -q 'APPEND is not supported: under last-writer-wins' "$RUN_DIR/bad.rep"; then
    pass "(f) five bad commands get error replies (APPEND says why LWW refuses it); the same connection then answers DECIDE.STATUS"
else
    fail "(f) bad commands get error replies on a usable connection" "$(cat "$RUN_DIR/bad.rep")"
fi
"$BIN" put --admin "$(peer_admin a)" 'quota[batch-jobs]' 7 >/dev/null
same_id=$("$BIN" get --admin "$(peer_admin a)" 'quota["batch-jobs"]')
"$BIN" put --admin "$(peer_admin a)" 'quota[7]' '"seven"' >/dev/null
number_id=$("$BIN" get --admin "$(peer_admin a)" 'quota[7]')
string_id_status=0
"$BIN" get --admin "$(peer_admin a)" 'quota["7"]' >/dev/null 2>&1 || string_id_status=$?
if [ "$same_id" = 7 ] && [ "$number_id" = '"seven"' ] && [ "$string_id_status" -eq 1 ]; then
    pass "(f) KEY syntax: quota[batch-jobs] is quota[\"batch-jobs\"]; quota[7] is not quota[\"7\"]"
else
    fail "(f) KEY syntax" "got '$same_id', '$number_id', exit $string_id_status"
fi
absent_out=$("$BIN" get --admin "$(peer_admin a)" never-written 2>&1); absent=$?
"$BIN" delete --admin "$(peer_admin a)" 'quota[7]' >/dev/null
deleted_out=$("$BIN" get --admin "$(peer_admin a)" 'quota[7]' 2>&1); deleted=$?
invalid_out=$("$BIN" put --admin "$(peer_admin a)" bad '{nope' 2>&1); invalid=$?
gone_out=$("$BIN" status --admin "$e_admin" 2>&1); gone=$?
if [ $absent -eq 1 ] && [[ "$absent_out" == *"has no value"* ]] && [ $deleted -eq 1 ] && [[ "$deleted_out" == *"was deleted"* ]] \
    && [ $invalid -ne 0 ] && [[ "$invalid_out" == *"not JSON"* ]] && [ $gone -eq 2 ] && [[ "$gone_out" == *"is it running?"* ]]; then
    pass "(f) exit codes: absent 1, deleted 1, invalid JSON refused, nobody answering 2 (one line each)"
else
    fail "(f) exit codes" "absent $absent ($absent_out); deleted $deleted ($deleted_out); invalid $invalid ($invalid_out); gone $gone ($gone_out)"
fi
fi  # (f)

# --- (g) -----------------------------------------------------------------------------------
if want g; then
if peer_start s 127.0.0.1:0 127.0.0.1:0 --cluster durable-s --durability strict; then
    : > "$RUN_DIR/strict.req"
    for i in $(seq 1 1000); do echo "SET strict[$i] $i" >> "$RUN_DIR/strict.req"; done
    resp_batch s "$RUN_DIR/strict.req" > "$RUN_DIR/strict.rep"
    acknowledged=0
    batch_ok "$RUN_DIR/strict.rep" 1000 && acknowledged=1000
    kill9 s   # at once: no graceful flush
    if peer_start s 127.0.0.1:0 127.0.0.1:0 --cluster durable-s --durability strict && count_is s 1000 \
        && [ "$acknowledged" -eq 1000 ]; then
        pass "(g) strict: 1,000 acknowledged puts, kill -9, restart: all 1,000 are back"
    else
        fail "(g) strict: 1,000 acknowledged puts survive kill -9" "$acknowledged acknowledged; $(entry_count s 2>/dev/null) entries after restart"
    fi
    peer_stop s TERM >/dev/null 2>&1
else
    fail "(g) a strict peer starts"
fi
fi  # (g)

# --- (h) -----------------------------------------------------------------------------------
if want h; then
durable=(--cluster durable-xyz --durability strict)
if peer_start x 127.0.0.1:0 127.0.0.1:0 "${durable[@]}" \
    && peer_start y 127.0.0.1:0 127.0.0.1:0 "${durable[@]}" --peer "$(peer_listen x)" \
    && peer_start z 127.0.0.1:0 127.0.0.1:0 "${durable[@]}" --peer "$(peer_listen x)"; then
    : > "$RUN_DIR/xyz-x.req"
    : > "$RUN_DIR/xyz-y.req"
    for i in $(seq 1 300); do echo "SET xyz[$i] x$i" >> "$RUN_DIR/xyz-x.req"; done
    for i in $(seq 301 600); do echo "SET xyz[$i] y$i" >> "$RUN_DIR/xyz-y.req"; done
    echo 'DEL xyz[1]' >> "$RUN_DIR/xyz-y.req"
    resp_batch x "$RUN_DIR/xyz-x.req" > /dev/null
    resp_batch y "$RUN_DIR/xyz-y.req" > /dev/null
    all_600() { count_is x 600 && dumps_equal x y z; }
    wait_until 60 "x, y and z to hold the same 600 entries" all_600 || true
    cp "$RUN_DIR/x.dump" "$RUN_DIR/xyz-before.dump"
    listens=("$(peer_listen x)" "$(peer_listen y)" "$(peer_listen z)")
    admins=("$(peer_admin x)" "$(peer_admin y)" "$(peer_admin z)")
    kill9 x; kill9 y; kill9 z
    if peer_start x "${listens[0]}" "${admins[0]}" "${durable[@]}" \
        && peer_start y "${listens[1]}" "${admins[1]}" "${durable[@]}" --peer "${listens[0]}" \
        && peer_start z "${listens[2]}" "${admins[2]}" "${durable[@]}" --peer "${listens[0]}"; then
        same_as_before() { dumps_equal x y z && cmp -s "$RUN_DIR/xyz-before.dump" "$RUN_DIR/x.dump"; }
        if [ "$(wc -l < "$RUN_DIR/xyz-before.dump")" -eq 600 ] && wait_until 30 "x, y and z to hold what they held" same_as_before; then
            pass "(h) every peer of a three-peer cluster killed with -9 and restarted: all 600 entries (1 deleted) kept"
        else
            fail "(h) a three-peer cluster keeps everything across kill -9 of every peer" \
                "before: $(wc -l < "$RUN_DIR/xyz-before.dump") entries; after: $(wc -l "$RUN_DIR"/x.dump "$RUN_DIR"/y.dump "$RUN_DIR"/z.dump | tr '\n' ' ')"
        fi
    else
        fail "(h) x, y and z restart on their ports"
    fi
else
    fail "(h) x, y and z start"
fi
fi  # (h)

# --- (i) -----------------------------------------------------------------------------------
if want i; then
# Short intervals so that coverage is proven and tombstones collected within seconds. Each peer
# collects on a period of its own (as peers started at different times do): collection must
# not depend on the peers' timers happening to run in step.
tomb=(--cluster tombstones --durability strict "${fast[@]}")
# only_live PEER: PEER's dump holds tomb[11]..tomb[20], live, and nothing else.
only_live() {
    dump_of "$1" || return 1
    [ "$(wc -l < "$RUN_DIR/$1.dump")" -eq 10 ] && [ "$(grep -c '"deleted":false' "$RUN_DIR/$1.dump")" -eq 10 ] \
        && ! grep -qE '"key":"tomb\[([1-9]|10)\]"' "$RUN_DIR/$1.dump"
}
every_only_live() { only_live t1 && only_live t2 && only_live t3; }
if peer_start t1 127.0.0.1:0 127.0.0.1:0 "${tomb[@]}" $(collect 500) \
    && peer_start t2 127.0.0.1:0 127.0.0.1:0 "${tomb[@]}" $(collect 700) --peer "$(peer_listen t1)" \
    && peer_start t3 127.0.0.1:0 127.0.0.1:0 "${tomb[@]}" $(collect 900) --peer "$(peer_listen t1)"; then
    mesh_t() { connected_all t1 t2 t3 && connected_all t2 t1 t3 && connected_all t3 t1 t2; }
    wait_until 20 "a full mesh of t1, t2 and t3" mesh_t || true
    : > "$RUN_DIR/tomb-puts.req"
    : > "$RUN_DIR/tomb-deletes.req"
    for i in $(seq 1 20); do echo "SET tomb[$i] {\"i\":$i}" >> "$RUN_DIR/tomb-puts.req"; done
    for i in $(seq 1 10); do echo "DEL tomb[$i]" >> "$RUN_DIR/tomb-deletes.req"; done
    resp_batch t1 "$RUN_DIR/tomb-puts.req" > "$RUN_DIR/tomb-puts.rep"
    wait_until 10 "t2 to hold the 20 puts" count_is t2 20 || true
    # On t2, after the puts arrived there: each delete is the newest write of its key.
    resp_batch t2 "$RUN_DIR/tomb-deletes.req" > "$RUN_DIR/tomb-deletes.rep"
    collect_start=$(date +%s%N)
    collected_t() { holds_collected 10 t1 t2 t3; }
    if batch_ok "$RUN_DIR/tomb-puts.rep" 20 && batch_ok "$RUN_DIR/tomb-deletes.rep" 10 \
        && wait_until 30 "t1, t2 and t3 to collect the 10 tombstones" collected_t; then
        collect_seconds=$(seconds_since "$collect_start")
        # Collected for good: no walk brings a tombstone back to a peer that dropped it, so each
        # peer collects each tombstone once.
        if stays_true 3 collected_t && [ "$(collected_total t1)" = 10 ] && [ "$(collected_total t2)" = 10 ] \
            && [ "$(collected_total t3)" = 10 ]; then
            pass "(i) 20 puts and 10 deletes: t1, t2 and t3 collect the 10 tombstones $collect_seconds s after the deletes, once and for good"
        else
            fail "(i) each peer collects the 10 tombstones once, for good" \
                "tombstones collected (logged): t1 $(collected_total t1), t2 $(collected_total t2), t3 $(collected_total t3); more than 10 means catch-up brought collected tombstones back"
        fi
    else
        fail "(i) t1, t2 and t3 collect the 10 tombstones" \
            "entries/tombstones: t1 $(status_number t1 entries)/$(status_number t1 tombstones), t2 $(status_number t2 entries)/$(status_number t2 tombstones), t3 $(status_number t3 entries)/$(status_number t3 tombstones); tombstones collected (logged): t1 $(collected_total t1), t2 $(collected_total t2), t3 $(collected_total t3)"
    fi
    t3_listen=$(peer_listen t3)
    t3_admin=$(peer_admin t3)
    kill9 t3
    t3_unlinked() { ! linked t1 t3; }
    wait_until 10 "t1 to notice t3 is gone" t3_unlinked || true
    if peer_start t3 "$t3_listen" "$t3_admin" "${tomb[@]}" $(collect 900) --peer "$(peer_listen t1)"; then
        rejoined_t3() { connected_all t1 t3 && connected_all t2 t3 && connected_all t3 t1 t2 && dumps_equal t1 t2 t3; }
        if wait_until 20 "t3 to rejoin t1 and t2" rejoined_t3 && every_only_live && stays_true 3 every_only_live; then
            pass "(i) t3 killed with -9 and restarted: no deleted key comes back; the 10 live ones are on every peer (checked for 3 s)"
        else
            fail "(i) after t3's kill -9 and restart, only the 10 live keys exist" \
                "$(wc -l "$RUN_DIR"/t1.dump "$RUN_DIR"/t2.dump "$RUN_DIR"/t3.dump | tr '\n' ' ')"
        fi
    else
        fail "(i) t3 restarts on its ports"
    fi
else
    fail "(i) t1, t2 and t3 start"
fi
fi  # (i)

# --- (j) -----------------------------------------------------------------------------------
if want j; then
forgetting=(--cluster forgetting --durability strict "${fast[@]}")
gone_here() {   # gone_here PEER: gone[k] is absent on PEER (no value, no tombstone)
    local out
    out=$("$BIN" get --admin "$(peer_admin "$1")" 'gone[k]' 2>&1)
    [ $? -eq 1 ] && [[ "$out" == *"has no value"* ]]
}
gone_on_f1_f2() { gone_here f1 && gone_here f2; }
if peer_start f1 127.0.0.1:0 127.0.0.1:0 "${forgetting[@]}" $(collect 500) \
    && peer_start f2 127.0.0.1:0 127.0.0.1:0 "${forgetting[@]}" $(collect 700) --peer "$(peer_listen f1)" \
    && peer_start f3 127.0.0.1:0 127.0.0.1:0 "${forgetting[@]}" $(collect 900) --peer "$(peer_listen f1)"; then
    mesh_f() { connected_all f1 f2 f3 && connected_all f2 f1 f3 && connected_all f3 f1 f2; }
    wait_until 20 "a full mesh of f1, f2 and f3" mesh_f || true
    "$BIN" put --admin "$(peer_admin f1)" 'gone[k]' '"stale"' >/dev/null
    for name in f1 f2 f3; do wait_until 10 "the put on $name" value_is "$name" 'gone[k]' '"stale"' || true; done
    f3_listen=$(peer_listen f3)
    f3_admin=$(peer_admin f3)
    kill9 f3
    f3_unlinked() { ! linked f1 f3 && ! linked f2 f3; }
    wait_until 10 "f1 and f2 to notice f3 is gone" f3_unlinked || true
    "$BIN" delete --admin "$(peer_admin f1)" 'gone[k]' >/dev/null
    forget_out=$("$BIN" forget --admin "$(peer_admin f1)" f3 2>&1); forget_status=$?
    removed_on_f2() { [ "$(link_of f2 f3)" = removed ]; }
    if [ $forget_status -eq 0 ] && [ "$forget_out" = "ok removed f3" ] && [ "$(link_of f1 f3)" = removed ] \
        && wait_until 10 "f2 to learn f3 was removed" removed_on_f2; then
        pass "(j) syncnode forget f3 prints 'ok removed f3'; f1 and f2 list f3 as removed"
    else
        fail "(j) syncnode forget removes f3 everywhere" "exit $forget_status: $forget_out; f1 sees '$(link_of f1 f3)', f2 sees '$(link_of f2 f3)'"
    fi
    again_out=$("$BIN" forget --admin "$(peer_admin f1)" f3 2>&1); again=$?
    unknown_out=$("$BIN" forget --admin "$(peer_admin f1)" nobody 2>&1); unknown=$?
    self_out=$("$BIN" forget --admin "$(peer_admin f1)" f1 2>&1); self=$?
    if [ $again -eq 1 ] && [[ "$again_out" == *"already removed"* ]] && [ $unknown -eq 1 ] && [[ "$unknown_out" == *"no member nobody"* ]] \
        && [ $self -eq 1 ] && [[ "$self_out" == *"is this node itself"* ]]; then
        pass "(j) forget refuses (exit 1, one line): a removed member, an unknown one, the node itself"
    else
        fail "(j) forget's errors" "again $again ($again_out); unknown $unknown ($unknown_out); self $self ($self_out)"
    fi
    collected_f() { holds_collected 0 f1 f2; }
    if wait_until 20 "f1 and f2 to collect the tombstone of gone[k]" collected_f && stays_true 3 collected_f \
        && [ "$(collected_total f1)" = 1 ] && [ "$(collected_total f2)" = 1 ]; then
        pass "(j) with f3 forgotten, f1 and f2 collect the tombstone of a delete f3 never saw, once and for good"
    else
        fail "(j) f1 and f2 collect the tombstone once, for good" \
            "entries/tombstones: f1 $(status_number f1 entries)/$(status_number f1 tombstones), f2 $(status_number f2 entries)/$(status_number f2 tombstones); tombstones collected (logged): f1 $(collected_total f1), f2 $(collected_total f2)"
    fi
    if tr -d ' \n' < "$RUN_DIR/f1/data/members.json" | grep -q '"id":"f3","incarnation":"[0-9]*","status":"removed"'; then
        pass "(j) f1's data dir keeps f3's removal (members.json)"
    else
        fail "(j) f1's members.json records f3 as removed" "$(tr -d '\n' < "$RUN_DIR/f1/data/members.json")"
    fi
    if peer_start f3 "$f3_listen" "$f3_admin" "${forgetting[@]}" $(collect 900) --peer "$(peer_listen f1)"; then
        refused_f3() {
            grep -q 'refused a removed member.*peer=f3' "$RUN_DIR/f1/log" || grep -q 'a peer refuses this node' "$RUN_DIR/f3/log"
        }
        if value_is f3 'gone[k]' '"stale"' && wait_until 15 "f3 to be refused" refused_f3; then
            pass "(j) f3, restarted with its stale data dir (still holding gone[k]), is refused"
            grep -q 'a peer refuses this node' "$RUN_DIR/f3/log" \
                || echo "     note: f1 logged the refusal, but f3's log has no 'a peer refuses this node' line"
        else
            fail "(j) the restarted f3 is refused" "f3 holds gone[k]: $("$BIN" get --admin "$f3_admin" 'gone[k]' 2>&1); f1: $(grep -m1 'removed member' "$RUN_DIR/f1/log")"
        fi
        if gone_on_f1_f2 && stays_true 5 gone_on_f1_f2; then
            pass "(j) f1 and f2 never show the deleted key again (checked for 5 s after f3 returned)"
        else
            fail "(j) f1 and f2 never show the deleted key again" \
                "f1: $("$BIN" get --admin "$(peer_admin f1)" 'gone[k]' 2>&1); f2: $("$BIN" get --admin "$(peer_admin f2)" 'gone[k]' 2>&1)"
        fi
    else
        fail "(j) f3 restarts on its ports"
    fi
else
    fail "(j) f1, f2 and f3 start"
fi
fi  # (j)

# --- (w) -----------------------------------------------------------------------------------
if want w; then
# A counter's lifetime and a member that never returns: w3's share stays past the instant while
# it is only down, and goes once it is forgotten (docs/operations.md, "Lifetimes of counters").
lifetimes=(--cluster lifetimes "${fast[@]}")
rate_on() { [ "$(rcli "$1" GET rate)" = "$2" ]; }
if peer_start w1 127.0.0.1:0 127.0.0.1:0 "${lifetimes[@]}" \
    && peer_start w2 127.0.0.1:0 127.0.0.1:0 "${lifetimes[@]}" --peer "$(peer_listen w1)" \
    && peer_start w3 127.0.0.1:0 127.0.0.1:0 "${lifetimes[@]}" --peer "$(peer_listen w1)"; then
    mesh_w() { connected_all w1 w2 w3 && connected_all w2 w1 w3 && connected_all w3 w1 w2; }
    wait_until 20 "a full mesh of w1, w2 and w3" mesh_w || true
    rcli w3 INCRBY rate 5 >/dev/null
    rcli w1 INCRBY rate 2 >/dev/null
    for name in w1 w2 w3; do wait_until 10 "rate 7 on $name" rate_on "$name" 7 || true; done
    kill9 w3
    w3_unlinked() { ! linked w1 w3 && ! linked w2 w3; }
    wait_until 10 "w1 and w2 to notice w3 is gone" w3_unlinked || true
    expire_reply=$(rcli w1 PEXPIRE rate 1500)
    sleep 2
    if [ "$expire_reply" = 1 ] && wait_until 5 "w3's share alone on w1 and w2" rate_on w1 5 && rate_on w2 5; then
        pass "(w) PEXPIRE of a counter while w3 is down: after the instant w1 and w2 read w3's share (5) alone"
    else
        fail "(w) after the instant, w1 and w2 read w3's share alone" "PEXPIRE: $expire_reply; w1 $(rcli w1 GET rate), w2 $(rcli w2 GET rate)"
    fi
    "$BIN" forget --admin "$(peer_admin w1)" w3 >/dev/null
    rate_gone() { rate_on w1 "" && rate_on w2 ""; }
    if wait_until 15 "w1 and w2 to drop w3's share" rate_gone && stays_true 2 rate_gone; then
        pass "(w) w3 forgotten: its share goes with the lifetime on w1 and w2 (GET answers nil)"
    else
        fail "(w) w3's share goes once it is forgotten" "w1 $(rcli w1 GET rate), w2 $(rcli w2 GET rate); w2 sees w3 '$(link_of w2 w3)'"
    fi
else
    fail "(w) w1, w2 and w3 start"
fi
fi  # (w)

# --- (feed) --------------------------------------------------------------------------------
if want feed; then
# A redis-py reader tails fd1's change feed while fd1 is killed with -9 and restarted on its
# ports; writes go through fd2 meanwhile. The reader resumes from its position on the same feed
# and ends with every acknowledged write exactly once, no position twice or skipped, and
# exactly fd1's state (docs/operations.md, "The change feed").
if peer_start fd1 127.0.0.1:0 127.0.0.1:0 --cluster feed "${fast[@]}" \
    && peer_start fd2 127.0.0.1:0 127.0.0.1:0 --cluster feed "${fast[@]}" --peer "$(peer_listen fd1)"; then
    mesh_fd() { connected_all fd1 fd2 && connected_all fd2 fd1; }
    wait_until 20 "fd1 and fd2 linked" mesh_fd || true
    stop_file="$RUN_DIR/feed-stop"
    rm -f "$stop_file"
    "$PYTHON" Cluster/feed_tail.py "$(peer_admin fd1)" "$(peer_admin fd2)" "$stop_file" > "$RUN_DIR/feed.out" 2>&1 &
    tail_pid=$!
    sleep 1.5
    fd1_listen=$(peer_listen fd1) fd1_admin=$(peer_admin fd1)
    kill9 fd1
    sleep 0.5
    restarted=yes
    peer_start fd1 "$fd1_listen" "$fd1_admin" --cluster feed "${fast[@]}" --peer "$(peer_listen fd2)" || restarted=no
    sleep 1.5
    touch "$stop_file"
    if wait "$tail_pid" && [ "$restarted" = yes ]; then
        pass "(feed) redis-py tails fd1 across kill -9 and a restart: $(grep '^summary' "$RUN_DIR/feed.out" | cut -d' ' -f2-)"
    else
        fail "(feed) a reader of fd1's feed across kill -9 gets every change once" "restarted: $restarted; $(grep -A1 '^FAIL\|Error' "$RUN_DIR/feed.out" | head -12)"
    fi
    # The CLI: every line carries its position; --from replays; a feed that is not fd1's is
    # refused (exit 1), or with --resync answered by a snapshot and then the feed.
    timeout 3 "$BIN" watch --admin "$(peer_admin fd1)" --from 0 'feed:7' > "$RUN_DIR/watch-from.out" 2> "$RUN_DIR/watch-from.err"
    "$BIN" watch --admin "$(peer_admin fd1)" --from 3 --feed 0123456789abcdef > /dev/null 2> "$RUN_DIR/watch-other.err"; other_status=$?
    timeout 3 "$BIN" watch --admin "$(peer_admin fd1)" --from 3 --feed 0123456789abcdef --resync 'feed:7' > "$RUN_DIR/watch-resync.out" 2>/dev/null
    if [ "$(grep -c '"key":"feed:7"' "$RUN_DIR/watch-from.out")" = 1 ] && grep -q '"position":[0-9]' "$RUN_DIR/watch-from.out" \
        && grep -q 'feed [0-9a-f]\{16\}' "$RUN_DIR/watch-from.err" && [ "$other_status" = 1 ] && grep -q OTHERFEED "$RUN_DIR/watch-other.err" \
        && grep -q '"key":"feed:7".*"origin":"snapshot"' "$RUN_DIR/watch-resync.out"; then
        pass "(feed) syncnode watch --from 0 replays with positions; another feed exits 1, or with --resync prints a snapshot"
    else
        fail "(feed) syncnode watch --from and --resync" "from: $(head -c 300 "$RUN_DIR/watch-from.out") $(cat "$RUN_DIR/watch-from.err"); other: $other_status $(cat "$RUN_DIR/watch-other.err"); resync: $(head -c 300 "$RUN_DIR/watch-resync.out")"
    fi
else
    fail "(feed) fd1 and fd2 start"
fi
fi  # (feed)

# --- (l) -----------------------------------------------------------------------------------
if want abc; then
# The first twelve replies below are exactly what redis-cli printed for the same session against
# redis-server 7.0.15 (--databases 1) on 2026-11-24; the last two are Decide's refusals.
cat > "$RUN_DIR/session.req" <<'SESSION'
SET session:greeting hello
GET session:greeting
MSET session:a 1 session:b 2
MGET session:a session:b session:missing
EXISTS session:a session:missing session:a
DEL session:a session:missing
TYPE session:b
TYPE session:a
SET session:b 3 NX
SET session:b 3 XX GET
GET session:b
SELECT 1
SET session:temp 1 EX 0
LPUSH session:l a
SESSION
rcli a < "$RUN_DIR/session.req" > "$RUN_DIR/session.rep" 2>&1
cat > "$RUN_DIR/session.expected" <<'EXPECTED'
OK
hello
OK
1
2

2
1
string
none

2
3
ERR DB index is out of range

ERR invalid expire time in 'set' command

ERR LPUSH is not supported: Decide values are whole JSON documents replaced last-writer-wins, so two nodes changing one list at once would lose one change; store one key per item instead (NAME[ID]), or use a set (SADD), hash (HSET) or sorted set (ZADD), which keep concurrent changes

EXPECTED
if cmp -s "$RUN_DIR/session.expected" "$RUN_DIR/session.rep"; then
    pass "(l) a scripted redis-cli session gets Redis's replies (SET NX/XX/GET, MGET, EXISTS, DEL, TYPE, SELECT, refusals)"
else
    fail "(l) a scripted redis-cli session gets Redis's replies" "$(diff "$RUN_DIR/session.expected" "$RUN_DIR/session.rep" | head -20)"
fi
"$BIN" put --admin "$(peer_admin a)" 'session:config' '{"replicas":3,"zones":["a","b"]}' >/dev/null
cli_sees() { [ "$("$BIN" get --admin "$(peer_admin "$1")" session:greeting 2>/dev/null)" = '"hello"' ]; }
redis_sees() { [ "$(rcli "$1" GET session:config)" = '{"replicas":3,"zones":["a","b"]}' ]; }
if wait_until 10 "c to hold both writes" cli_sees c && wait_until 10 "b to hold the CLI's put" redis_sees b; then
    pass "(l) across peers, the CLI reads redis-cli's text as a JSON string and redis-cli reads the CLI's JSON as written"
else
    fail "(l) the CLI and redis-cli read each other's writes" "c: $("$BIN" get --admin "$(peer_admin c)" session:greeting 2>&1); b: $(rcli b GET session:config)"
fi
session_keys() { [ "$(rcli "$1" --scan --pattern 'session:*' | sort | tr '\n' ' ')" = "session:b session:config session:greeting " ]; }
if wait_until 10 "b's SCAN to list the session keys" session_keys b \
    && rcli a INFO replication | grep -q 'id=b,.*link=connected' && rcli a INFO keyspace | grep -q '^db0:keys='; then
    pass "(l) SCAN on b lists the live session keys (not the deleted one); INFO replication on a shows b connected"
else
    fail "(l) SCAN and INFO" "scan: $(rcli b --scan --pattern 'session:*' | tr '\n' ' '); info: $(rcli a INFO replication | tr '\r\n' '  ')"
fi
fi  # (l)

# --- (m) -----------------------------------------------------------------------------------
if want abc; then
if "$PYTHON" Cluster/resp_clients.py "$(peer_admin a)" "$(peer_admin b)" > "$RUN_DIR/python.out" 2>&1; then
    pass "(m) redis-py: a Python service writing on a and reading and subscribing on b, counters, sets, hashes and sorted sets on both at once ($(grep -c '^PASS' "$RUN_DIR/python.out") checks)"
else
    fail "(m) redis-py: a Python service writing on a and reading and subscribing on b" "$(grep -A1 '^FAIL\|Error' "$RUN_DIR/python.out" | head -20)"
fi
fi  # (m)

# --- (n) -----------------------------------------------------------------------------------
if want n; then
head -c 24 /dev/urandom | base64 > "$RUN_DIR/admin-password"
chmod 600 "$RUN_DIR/admin-password"
refused_out=$("$BIN" run --id nopass --listen 127.0.0.1:0 --admin 0.0.0.0:0 2>&1); refused=$?
if [ $refused -ne 0 ] && [[ "$refused_out" == *"without a password"* ]]; then
    pass "(n) a non-loopback client address without a password is refused at start, saying why"
else
    fail "(n) a non-loopback client address without a password is refused" "exit $refused: $refused_out"
fi
socket_path="$RUN_DIR/p.sock"
if peer_start p 127.0.0.1:0 127.0.0.1:0 --cluster access --admin-password-file "$RUN_DIR/admin-password" \
    --admin-socket "$socket_path"; then
    password=$(cat "$RUN_DIR/admin-password")
    noauth=$(rcli p GET k 2>&1)
    wrong=$(rcli p --no-auth-warning -a wrong-password-of-24-bytes GET k 2>&1)
    authed=$(rcli p --no-auth-warning -a "$password" SET k v 2>&1)
    cli_out=$("$BIN" get --admin "$(peer_admin p)" --password-file "$RUN_DIR/admin-password" k 2>&1)
    cli_noauth=$("$BIN" get --admin "$(peer_admin p)" k 2>&1); cli_noauth_status=$?
    if [[ "$noauth" == "NOAUTH Authentication required." ]] && [[ "$wrong" == *WRONGPASS* ]] && [ "$authed" = OK ] \
        && [ "$cli_out" = '"v"' ] && [ $cli_noauth_status -eq 2 ] && [[ "$cli_noauth" == *"wants a password"* ]]; then
        pass "(n) password: NOAUTH before AUTH, WRONGPASS for a wrong one, OK after; the CLI with --password-file, exit 2 without"
    else
        fail "(n) password" "noauth: $noauth; wrong: $wrong; authed: $authed; cli: $cli_out; cli without: $cli_noauth_status $cli_noauth"
    fi
    mode=$(stat -c %a "$socket_path" 2>/dev/null)
    over_socket=$(redis-cli -s "$socket_path" --no-auth-warning -a "$password" GET k 2>&1)
    if [ "$mode" = 600 ] && [ "$over_socket" = v ]; then
        pass "(n) the Unix socket has mode 600 and answers (with the password)"
    else
        fail "(n) the Unix socket" "mode $mode; GET over it: $over_socket"
    fi
    peer_stop p TERM
    if [ ! -e "$socket_path" ]; then pass "(n) the Unix socket is removed when the peer stops"; else fail "(n) the Unix socket is removed when the peer stops"; fi
else
    fail "(n) a peer with a password and a Unix socket starts"
fi
fi  # (n)

# --- (o) -----------------------------------------------------------------------------------
if want abc; then
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
present_everywhere() { for p in a b c; do [ "$(rcli "$p" GET "$1")" = "$2" ] || return 1; done; }
gone_everywhere() { for p in a b c; do [ -z "$(rcli "$p" GET "$1")" ] && [ "$(rcli "$p" TTL "$1")" = -2 ] || return 1; done; }
expiry_case() {  # label key value writer-command...
    local label=$1 key=$2 value=$3; shift 3
    local start; start=$(now_ms)
    "$@" >/dev/null 2>&1 || { fail "(o) $label: the write" "$*"; return; }
    if ! wait_until 1 "$key on a, b and c" present_everywhere "$key" "$value"; then
        fail "(o) $label: on every peer before it expires" "a: $(rcli a GET "$key"); b: $(rcli b GET "$key"); c: $(rcli c GET "$key")"
        return
    fi
    local ttl_b; ttl_b=$(rcli b PTTL "$key")
    if wait_until 10 "$key to expire on a, b and c" gone_everywhere "$key"; then
        local after=$(( $(now_ms) - start ))
        if [ "$after" -ge 2000 ]; then
            pass "(o) $label: on all three peers at once (PTTL on b $ttl_b ms), gone from all three $after ms after the write"
        else
            fail "(o) $label: gone before its lifetime" "gone everywhere after $after ms"
        fi
    else
        fail "(o) $label: gone from every peer" "a: $(rcli a GET "$key"); b: $(rcli b GET "$key"); c: $(rcli c GET "$key")"
    fi
}
expiry_case "redis-cli SET PX 2000 on a" presence:worker-1 up rcli a SET presence:worker-1 up PX 2000
expiry_case "syncnode put --expire-after 2 on b" 'presence[worker-2]' up \
    "$BIN" put --admin "$(peer_admin b)" --expire-after 2 'presence[worker-2]' '"up"'
fi  # (o)

# --- (p) -----------------------------------------------------------------------------------
if want abc; then
owned_everywhere() { for p in a b c; do [ "$(rcli "$p" GET 'presence[api@c]')" = up ] || return 1; done; }
shared_on() { [ "$(rcli "$1" GET 'config[c]')" = settings ]; }
presence_gone_on_ab() {
    for p in a b; do [ -z "$(rcli "$p" GET 'presence[api@c]')" ] && shared_on "$p" || return 1; done
}
if [ "$(rcli c SET 'presence[api@c]' up OWNED)" = OK ] && [ "$(rcli c SET 'config[c]' settings)" = OK ] \
    && wait_until 10 "c's presence on a, b and c" owned_everywhere; then
    c_listen=$(peer_listen c)
    c_admin=$(peer_admin c)
    c_pid=$(peer_pid c)
    kill_start=$(now_ms)
    { kill -9 "$c_pid"; wait "$c_pid"; } 2>/dev/null
    rm -f "$RUN_DIR/c/pid"
    if wait_until 10 "c's presence to go from a and b" presence_gone_on_ab; then
        shown=$(( $(now_ms) - kill_start ))
        if [ "$shown" -le 3500 ]; then
            pass "(p) kill -9 of c: its owned key reads as absent on a and b $shown ms later (its shared key stays)"
        else
            fail "(p) kill -9 of c shows within the failure timeout (3 s)" "it took $shown ms"
        fi
    else
        fail "(p) kill -9 of c hides its owned key on a and b" "a: $(rcli a GET 'presence[api@c]'); b: $(rcli b GET 'presence[api@c]'); shared on a: $(rcli a GET 'config[c]')"
    fi
    if peer_start c "$c_listen" "$c_admin" "${COMMON[@]}" --peer "$(peer_listen a)" \
        && wait_until 30 "c's presence back on a, b and c" owned_everywhere; then
        pass "(p) c restarted: its owned key reads again on a, b and c"
    else
        fail "(p) c restarted: its owned key reads again" "a: $(rcli a GET 'presence[api@c]'); c: $(rcli c GET 'presence[api@c]' 2>&1)"
    fi
else
    fail "(p) c's owned key reaches a, b and c" "a: $(rcli a GET 'presence[api@c]'); b: $(rcli b GET 'presence[api@c]')"
fi
fi  # (p)

# --- (r) -----------------------------------------------------------------------------------
if want abc; then
# Rotating the cluster secret on the running a, b, c: accept the new one, prove it, retire the
# old. Fingerprints are the first 8 bytes of SHA-256 of the secret, as INFO shows them.
fingerprint() { printf '%s' "$(cat "$1")" | sha256sum | cut -c1-16; }
reload_all() {   # reload_all: a and b through the CLI, c by SIGHUP; prints the CLI's answers
    "$BIN" reload-secrets --admin "$(peer_admin a)" && "$BIN" reload-secrets --admin "$(peer_admin b)" || return 1
    local before
    before=$(grep -c 'cluster secrets reloaded.*SIGHUP' "$RUN_DIR/c/log")
    kill -HUP "$(peer_pid c)" || return 1
    c_reloaded() { [ "$(grep -c 'cluster secrets reloaded.*SIGHUP' "$RUN_DIR/c/log")" -gt "$before" ]; }
    wait_until 10 "c to reload its secrets on SIGHUP" c_reloaded
}
sealed_everywhere_under() {   # sealed_everywhere_under FP: every link of a, b and c sealed FP/FP
    local name
    for name in a b c; do
        [ "$(rcli "$name" INFO replication | grep -c "sealed=$1/$1")" -eq 2 ] || return 1
    done
}
cp "$RUN_DIR/secret" "$RUN_DIR/old-secret"
head -c 32 /dev/urandom | base64 > "$RUN_DIR/new-secret"
chmod 600 "$RUN_DIR/old-secret" "$RUN_DIR/new-secret"
old_fp=$(fingerprint "$RUN_DIR/old-secret")
new_fp=$(fingerprint "$RUN_DIR/new-secret")
if sealed_everywhere_under "$old_fp"; then
    cp "$RUN_DIR/new-secret" "$RUN_DIR/accepted"
    step1=$(reload_all)
    cp "$RUN_DIR/new-secret" "$RUN_DIR/secret"
    cp "$RUN_DIR/old-secret" "$RUN_DIR/accepted"
    step2=$(reload_all)
    : > "$RUN_DIR/accepted"
    retire_start=$(now_ms)
    step3=$(reload_all)
    new_sealed() { sealed_everywhere_under "$new_fp"; }
    if [[ "$step1" == *"sealing with $old_fp, accepting $old_fp,$new_fp"* ]] \
        && [[ "$step2" == *"sealing with $new_fp, accepting $new_fp,$old_fp"* ]] \
        && [[ "$step3" == *"sealing with $new_fp, accepting $new_fp" ]] \
        && wait_until 15 "every link sealed under the new secret" new_sealed \
        && [ "$(rcli a SET 'rotated[after]' yes)" = OK ] && wait_until 10 "c to read a's write" value_is c 'rotated[after]' '"yes"'; then
        pass "(r) secret rotated on running a, b, c (reload-secrets on a and b, SIGHUP on c): every link sealed under the new one $(( $(now_ms) - retire_start )) ms after the old retired; a's write reads on c"
    else
        fail "(r) secret rotation on a running cluster" "step 1: $step1; step 2: $step2; step 3: $step3; a: $(rcli a INFO replication | grep -o 'sealed=[^ ]*' | tr '\n' ' ')"
    fi
    bad_out=$(printf 'short\n' > "$RUN_DIR/accepted"; "$BIN" reload-secrets --admin "$(peer_admin a)" 2>&1); bad_status=$?
    : > "$RUN_DIR/accepted"
    if [ $bad_status -eq 1 ] && [[ "$bad_out" == *"the old ones stay"* ]] && sealed_everywhere_under "$new_fp"; then
        pass "(r) a secrets file that cannot be used: reload-secrets exits 1 saying why, nothing changes"
    else
        fail "(r) a bad secrets file changes nothing" "exit $bad_status: $bad_out"
    fi
else
    fail "(r) links of a, b, c sealed under the cluster secret before the rotation" "$(rcli a INFO replication)"
fi
fi  # (r)

# --- (s) -----------------------------------------------------------------------------------
if want abc; then
# Prometheus metrics scraped with curl while a, b, c run: the counters move with the work. The 50
# SETs arrive pipelined, so runs of them commit as one decision each (docs/operations.md,
# "Pipelined SETs"): every decision on a is one delta to b and one to c, and b receives each.
scrape() { curl -sf --max-time 5 "http://$(peer_metrics "$1")/metrics"; }
# probe_status PEER PATH: the HTTP status PEER's metrics listener answers for PATH.
probe_status() { curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://$(peer_metrics "$1")$2"; }
# (r) just rotated the secret, and a link may still be redialling (operations.md §3): a decision
# goes out as a delta only on the links up at that moment. Wait until a is linked to b and c and
# neither link is catching up, so the counts below are about the 50 SETs alone.
a_links_settled() {
    local info
    info=$(rcli a INFO replication | tr -d '\r')
    [ "$(grep -cE '^peer[0-9]+:id=(b|c),.*link=connected,.*catch_up=idle' <<<"$info")" = 2 ]
}
wait_until 15 "a linked to b and c, neither catching up" a_links_settled || true
metric() { scrape "$1" | awk -v name="$2" '$1 == name {print $2; exit}'; }
# A node publishes its counts once a second (metricsIntervalMilliseconds), a and b each on their
# own phase: a baseline read before a's publication covers (r)'s write, but after b's does,
# counts that write as a decision of the batch's window that b "never received". Read the
# baseline only once each node's published counter equals its live one (INFO decide).
info_number() { rcli "$1" INFO decide | tr -d '\r' | awk -F: -v name="$2" '$1 == name {print $2; exit}'; }
published_current() {
    local published live
    published=$(metric "$1" "$2{node=\"$1\"}"); live=$(info_number "$1" "$3")
    [ -n "$published" ] && [ -n "$live" ] && awk -v p="$published" -v l="$live" 'BEGIN { exit !(p == l) }'
}
baseline_settled() {
    published_current a decide_decisions_total committed_decisions \
        && published_current b decide_remote_deltas_applied_total applied_remote_deltas
}
wait_until 15 "a's and b's published counts to cover their writes so far" baseline_settled || true
sent_before=$(metric a "decide_deltas_sent_total{node=\"a\"}")
received_before=$(metric b "decide_deltas_received_total{node=\"b\"}")
decided_before=$(metric a "decide_decisions_total{node=\"a\"}")
log_lines_before_a=$(wc -l < "$RUN_DIR/a/log"); log_lines_before_b=$(wc -l < "$RUN_DIR/b/log")
# For a failure's line: b's counters that say how writes reached it other than as deltas.
b_counters() { scrape b | grep -E '^decide_(deltas_received|incoming_deltas_dropped|catchup_(walks|entries)|link_changes|remote_deltas_applied)|lag_seconds_count' | tr '\n' ' '; }
b_counters_before=$(b_counters)
for index in $(seq 1 50); do echo "SET metered[$index] $index"; done > "$RUN_DIR/metered.req"
resp_batch a "$RUN_DIR/metered.req" 20 > "$RUN_DIR/metered.rep"
moved() {
    local decided sent received lag
    decided=$(metric a "decide_decisions_total{node=\"a\"}")
    sent=$(metric a "decide_deltas_sent_total{node=\"a\"}")
    received=$(metric b "decide_deltas_received_total{node=\"b\"}")
    lag=$(metric b "decide_propagation_lag_seconds_count{node=\"b\"}")
    [ -n "$decided" ] && [ -n "$sent" ] && [ -n "$received" ] && [ -n "$lag" ] \
        && awk -v d="$decided" -v d0="${decided_before:-0}" -v s="$sent" -v s0="${sent_before:-0}" -v r="$received" -v r0="${received_before:-0}" -v l="$lag" \
            'BEGIN { exit !(d - d0 >= 1 && s - s0 >= 2 * (d - d0) && r - r0 >= d - d0 && l >= r - r0) }' \
        && [ "$(rcli b KEYS 'metered*' | wc -l)" -eq 50 ]
}
if [ -n "$sent_before" ] && batch_ok "$RUN_DIR/metered.rep" 50 && wait_until 15 "the metrics of a and b to move" moved \
    && awk -v peers="$(metric a "decide_peers_connected{node=\"a\"}")" 'BEGIN { exit !(peers == 2) }' \
    && [ "$(probe_status a /nothing)" = 404 ]; then
    pass "(s) curl scrapes a and b: 50 pipelined SETs on a move decide_decisions_total, decide_deltas_sent_total (one per decision to b and to c), b's decide_deltas_received_total and its propagation-lag histogram"
else
    # The counts before the SETs and a's links now, so a failure says which inequality broke
    # and on which link.
    fail "(s) Prometheus metrics move with the work" "before: decided $decided_before, sent $sent_before, b received $received_before; now a: $(scrape a | grep -E '^decide_(decisions|deltas_sent|peers_connected)' | tr '\n' ' '); b before: $b_counters_before; b now: $(b_counters); c: $(rcli c INFO decide | tr -d '\r' | grep -E '^(committed_decisions|applied_remote_deltas):' | tr '\n' ' '); a's links: $(rcli a INFO replication | tr -d '\r' | grep -E '^peer[0-9]+:' | tr '\n' ' '); b's links: $(rcli b INFO replication | tr -d '\r' | grep -E '^peer[0-9]+:' | tr '\n' ' '); metered keys on b: $(rcli b KEYS 'metered*' | wc -l); a's log since: $(tail -n +"$((log_lines_before_a + 1))" "$RUN_DIR/a/log" | tail -n 20); b's log since: $(tail -n +"$((log_lines_before_b + 1))" "$RUN_DIR/b/log" | tail -n 20)"
fi
# The orchestrator's probes on the same listener: a, linked to b and c, is live and ready.
ready_text=$(curl -s --max-time 5 "http://$(peer_metrics a)/ready")
if [ "$(probe_status a /health)" = 200 ] && [ "$(probe_status a /ready)" = 200 ] && [[ "$ready_text" == "ready: store open, linked to "*" members" ]]; then
    pass "(s) curl: a's /health answers 200, its /ready 200 '$ready_text'"
else
    fail "(s) a's /health and /ready answer 200" "/health $(probe_status a /health), /ready $(probe_status a /ready): $ready_text"
fi
fi  # (s)

# --- (t) -----------------------------------------------------------------------------------
if want t; then
# A wrong wall clock in one process (PEER_WALLCLOCK_SHIFT_MS, Cluster/lib.sh). Each peer's
# clock offset is measured from pings; a node more than maxClockSkewMilliseconds (60 s) off a
# majority of the nodes it sees takes no decision and says why, while it still receives the
# others' writes (docs/consistency.md, "Clocks"). w joins m1 and m2 300 s ahead of them; restarts
# with the right clock on the same data, whose hybrid clock is still 300 s ahead; then, its data
# dropped, 300 s behind; then with the right clock. A cluster of its own.
clocks=(--cluster clocks)
# w_start starts w; w_says TEXT: w's log since that start has TEXT.
w_lines=0
w_start() {
    w_lines=0
    if [ -f "$RUN_DIR/w/log" ]; then w_lines=$(wc -l < "$RUN_DIR/w/log"); fi
    peer_start w 127.0.0.1:0 127.0.0.1:0 "${clocks[@]}" --peer "$(peer_listen m1)"
}
w_says() { tail -n +"$((w_lines + 1))" "$RUN_DIR/w/log" | grep -q "$1"; }
# clock_refusal "ahead of"|behind: the line a node logs when its peers outvote its clock.
clock_refusal() { echo "refusing decisions: this node's clock is more than 60000 ms $1 2 of its 2 peers"; }
if peer_start m1 127.0.0.1:0 127.0.0.1:0 "${clocks[@]}" \
    && peer_start m2 127.0.0.1:0 127.0.0.1:0 "${clocks[@]}" --peer "$(peer_listen m1)" \
    && PEER_WALLCLOCK_SHIFT_MS=300000 w_start; then
    wait_until 10 "w to refuse decisions, 300 s ahead" w_says "$(clock_refusal "ahead of")" || true
    ahead_out=$("$BIN" put --admin "$(peer_admin w)" 'clock[w]' '"ahead"' 2>&1); ahead_status=$?
    "$BIN" put --admin "$(peer_admin m1)" 'clock[m1]' '"while w is ahead"' >/dev/null
    received=0; wait_until 10 "m1's write on w" value_is w 'clock[m1]' '"while w is ahead"' && received=1
    if [ $ahead_status -eq 1 ] && [[ "$ahead_out" == *"ahead of 2 of its 2 peers"* ]] && [ $received = 1 ] \
        && ! grep -q "refusing decisions" "$RUN_DIR/m1/log" "$RUN_DIR/m2/log"; then
        pass "(t) w 300 s ahead: its put exits 1 saying so, it still receives m1's writes, m1 and m2 keep deciding"
    else
        fail "(t) a peer 300 s ahead takes no decision" "put on w: exit $ahead_status $ahead_out; m1's write on w: $received; $(grep -h 'refusing decisions' "$RUN_DIR"/{m1,m2,w}/log | tail -3)"
    fi
    peer_stop w
    if w_start; then
        kept_out=$("$BIN" put --admin "$(peer_admin w)" 'clock[w]' '"kept ahead"' 2>&1); kept_status=$?
        if [ $kept_status -eq 1 ] && [[ "$kept_out" == *"ahead of its physical clock"* ]]; then
            pass "(t) w restarted with the right clock on its data (its hybrid clock 300 s ahead): its put exits 1 until real time catches up"
        else
            fail "(t) a restarted peer whose stored clock ran ahead takes no decision" "put on w: exit $kept_status $kept_out"
        fi
        peer_stop w
    else
        fail "(t) w restarts with the right clock on its data" "see $RUN_DIR/w/log"
    fi
    rm -rf "$RUN_DIR/w/data"
    if PEER_WALLCLOCK_SHIFT_MS=-300000 w_start; then
        wait_until 10 "w to refuse decisions, 300 s behind" w_says "$(clock_refusal behind)" || true
        behind_out=$("$BIN" put --admin "$(peer_admin w)" 'clock[w]' '"behind"' 2>&1); behind_status=$?
        # Behind, it also refuses the others' entries (their timestamps are past its bound), so
        # its readers see stale state until its clock is fixed.
        refused=0
        wait_until 10 "w to refuse m1's entries" w_says "refused catch-up entries: their timestamps are too far ahead" && refused=1
        if [ $behind_status -eq 1 ] && [[ "$behind_out" == *"behind 2 of its 2 peers"* ]] && [ $refused = 1 ] \
            && ! value_is w 'clock[m1]' '"while w is ahead"'; then
            pass "(t) w 300 s behind: its put exits 1 saying so, and it refuses m1's entries rather than take them"
        else
            fail "(t) a peer 300 s behind takes no decision and no entry from ahead of its bound" "put on w: exit $behind_status $behind_out; refused m1's entries: $refused; m1's write on w: $("$BIN" get --admin "$(peer_admin w)" 'clock[m1]' 2>&1)"
        fi
        peer_stop w
    else
        fail "(t) w starts 300 s behind" "see $RUN_DIR/w/log"
    fi
    rm -rf "$RUN_DIR/w/data"
    if w_start; then
        fixed_out=$("$BIN" put --admin "$(peer_admin w)" 'clock[w]' '"fixed"' 2>&1); fixed_status=$?
        ok=1
        for name in m1 m2 w; do
            wait_until 10 "w's write on $name" value_is "$name" 'clock[w]' '"fixed"' || ok=0
            wait_until 10 "m1's write on $name" value_is "$name" 'clock[m1]' '"while w is ahead"' || ok=0
        done
        if [ $fixed_status -eq 0 ] && [ $ok = 1 ] && wait_until 10 "the same entries on m1, m2 and w" dumps_equal m1 m2 w; then
            pass "(t) w with the right clock and fresh data takes decisions again; m1, m2 and w hold the same entries"
        else
            fail "(t) w with its clock fixed decides and converges" "put on w: exit $fixed_status $fixed_out; values everywhere: $ok"
        fi
    else
        fail "(t) w restarts with the right clock" "see $RUN_DIR/w/log"
    fi
else
    fail "(t) m1, m2 and w (its wall clock 300 s ahead) start" "see $RUN_DIR/{m1,m2,w}/log"
fi
for name in m1 m2 w; do peer_stop "$name" >/dev/null 2>&1 || true; done
fi  # (t)

# --- (q) -----------------------------------------------------------------------------------
if want abc; then
short_out=$("$BIN" put --admin "$(peer_admin a)" --wait 5 --wait-timeout-ms 300 'acked[short]' 1 2>&1); short_status=$?
if [ $short_status -eq 3 ] && [[ "$short_out" == *"only 2 of 5 peers acknowledged"* ]]; then
    pass "(q) put --wait 5 with two peers: exit 3 after the timeout, saying 2 of 5 acknowledged"
else
    fail "(q) put --wait for more peers than exist exits 3" "exit $short_status: $short_out"
fi
lease_out=$("$BIN" lease --admin "$(peer_admin a)" nightly --for 60 --wait 2 2>&1); lease_status=$?
lease_token=$(echo "$lease_out" | awk '/^held nightly token/ {print $4}')
other_out=$("$BIN" lease --admin "$(peer_admin b)" nightly --for 60 2>&1); other_status=$?
wrong_release=$("$BIN" release --admin "$(peer_admin b)" nightly "$lease_token" 2>&1); wrong_status=$?
release_out=$("$BIN" release --admin "$(peer_admin a)" nightly "$lease_token" 2>&1); release_status=$?
if [ $lease_status -eq 0 ] && [ -n "$lease_token" ] && [ $other_status -eq 1 ] && [[ "$other_out" == *"held by a"* ]] \
    && [ $wrong_status -eq 1 ] && [ $release_status -eq 0 ] && [ "$release_out" = "released nightly" ]; then
    pass "(q) syncnode lease on a (both peers acknowledged, token $lease_token); b is told a holds it; only a releases it"
else
    fail "(q) syncnode lease and release" "a: $lease_status $lease_out; b: $other_status $other_out; release on b: $wrong_status $wrong_release; on a: $release_status $release_out"
fi
a_pid=$(peer_pid a)
wait_out=$("$BIN" put --admin "$(peer_admin a)" --wait 2 'acked[precious]' '"kept"' 2>&1); wait_status=$?
{ kill -9 "$a_pid"; wait "$a_pid"; } 2>/dev/null
rm -f "$RUN_DIR/a/pid"
on_b=$(rcli b GET 'acked[precious]')
on_c=$(rcli c GET 'acked[precious]')
if [ $wait_status -eq 0 ] && [[ "$wait_out" == *"acknowledged by 2 of 2 peers"* ]] && [ "$on_b" = kept ] && [ "$on_c" = kept ]; then
    pass "(q) put --wait 2 on a, then kill -9 of a at once: b and c both answer the value"
else
    fail "(q) an acknowledged write survives its writer's kill -9" "put: exit $wait_status $wait_out; b: $on_b; c: $on_c"
fi
fi  # (q)

# --- (u) -----------------------------------------------------------------------------------
if want u; then
# Issue 58's first two scenarios on real processes: WAIT counts only a peer that holds every
# write made before it, at its durability level (docs/consistency.md, "Writes acknowledged by
# replicas"). A cluster of its own.
acks=(--cluster acks)
if peer_start u1 127.0.0.1:0 127.0.0.1:0 "${acks[@]}" && [ "$(rcli u1 SET 'alone' before-anyone)" = OK ]; then
    if PEER_WALLCLOCK_SHIFT_MS=-300000 peer_start u3 127.0.0.1:0 127.0.0.1:0 "${acks[@]}" --peer "$(peer_listen u1)" \
        && wait_until 10 "u1 linked to u3" linked u1 u3; then
        behind_wait=$(rcli u1 WAIT 1 1000)
        behind_get=$(rcli u3 GET alone)
        if [ "$behind_wait" = 0 ] && [ -z "$behind_get" ]; then
            pass "(u) u3 linked 300 s behind refuses u1's earlier write: WAIT 1 on u1 answers 0, and u3 indeed holds nothing"
        else
            fail "(u) WAIT counts a peer that holds nothing" "WAIT 1 1000 on u1: $behind_wait; GET alone on u3: '$behind_get'"
        fi
    else
        fail "(u) u3 starts 300 s behind and links to u1" "see $RUN_DIR/u3/log"
    fi
    peer_stop u3 >/dev/null 2>&1
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIPPED (u) a strict peer on a full disk: mounting a tmpfs needs root"
    elif mkdir -p "$SMALL_DISK" && mount -t tmpfs -o size=3m tmpfs "$SMALL_DISK" \
        && peer_start u2 127.0.0.1:0 127.0.0.1:0 "${acks[@]}" --durability strict --peer "$(peer_listen u1)" \
        && wait_until 10 "u1 linked to u2" linked u1 u2 && wait_until 20 "u2 to hold u1's earlier write" value_is u2 alone '"before-anyone"'; then
        before_fill=$(rcli u1 WAIT 1 5000)
        # 80 values of 60 KB through u1: 4.8 MB for a 3 MiB disk.
        filler=$(head -c 60000 /dev/zero | tr '\0' x)
        for index in $(seq 1 80); do rcli u1 SET "fill$index" "$filler" >/dev/null; done
        failed_store=0
        wait_until 20 "u2's store to fail" grep -q "later decisions are refused" "$RUN_DIR/u2/log" && failed_store=1
        [ "$(rcli u1 SET 'after-the-disk' lost-on-u2)" = OK ]
        full_wait=$(rcli u1 WAIT 1 1000)
        in_memory=0; wait_until 10 "u2 to apply the write in memory" value_is u2 'after-the-disk' '"lost-on-u2"' && in_memory=1
        if [ "$before_fill" = 1 ] && [ $failed_store = 1 ] && [ "$full_wait" = 0 ] && [ $in_memory = 1 ]; then
            pass "(u) u2 strict on a full 3 MiB disk: it applies u1's write in memory, and WAIT 1 on u1 answers 0 (it answered 1 before the disk filled)"
        else
            fail "(u) a strict peer whose store failed acknowledges nothing" "WAIT before the fill: $before_fill; store failed: $failed_store; WAIT after: $full_wait; applied in memory: $in_memory; $(grep -m2 -E 'store|refused' "$RUN_DIR/u2/log" | tr '\n' ' ')"
        fi
    else
        fail "(u) u2 starts strict on a 3 MiB tmpfs and links to u1" "see $RUN_DIR/u2/log"
    fi
    peer_stop u2 KILL >/dev/null 2>&1
    if mountpoint -q "$SMALL_DISK"; then umount "$SMALL_DISK"; fi
else
    fail "(u) u1 starts and takes a write" "see $RUN_DIR/u1/log"
fi
peer_stop u1 >/dev/null 2>&1
fi  # (u)

# --- (flood) -------------------------------------------------------------------------------
if want flood; then
source Cluster/handshake_flood.sh
check_handshake_flood
fi  # (flood)

# --- (k) -----------------------------------------------------------------------------------
if want k; then
# The other peers stop first: both cores go to the two measured here.
for name in a b c s x y z t1 t2 t3 f1 f2 f3; do peer_stop "$name" TERM >/dev/null 2>&1 || true; done
LARGE_KEYS=100000
# One request per key; each value is a JSON string of 1,022 characters: 1 KiB stored.
awk -v n=$LARGE_KEYS 'BEGIN {
    pad = sprintf("%1015s", ""); gsub(/ /, "x", pad)
    for (i = 1; i <= n; i++) printf "SET large[%d] \"%07d%s\"\n", i, i, pad
}' > "$RUN_DIR/large.req"
if peer_start load 127.0.0.1:0 127.0.0.1:0 --cluster large; then
    load_start=$(date +%s%N)
    resp_batch load "$RUN_DIR/large.req" 150 > "$RUN_DIR/large.rep"
    load_seconds=$(seconds_since "$load_start")
    if batch_ok "$RUN_DIR/large.rep" $LARGE_KEYS && [ "$(status_number load entries)" -eq $LARGE_KEYS ]; then
        pass "(k) load: 100,000 SETs of 1 KiB (100 MB) on one pipelined connection (redis-cli --pipe) in $load_seconds s"
        target=$(digest_of load)
        join_start=$(date +%s%N)
        same_digest() { [ "$(digest_of join)" = "$target" ]; }
        if peer_start join 127.0.0.1:0 127.0.0.1:0 --cluster large --peer "$(peer_listen load)" \
            && wait_until 180 "join to reach load's digest" same_digest; then
            join_seconds=$(seconds_since "$join_start")
            join_pid=$(peer_pid join)
            peak_mib=$(( $(awk '/^VmHWM:/ {print $2}' "/proc/$join_pid/status") / 1024 ))
            store_mib=$(du -sm "$RUN_DIR/join/data" | cut -f1)
            entries=$(status_number join entries)
            received=$(grep -E 'catch-up (finished|abandoned)' "$RUN_DIR/join/log" | sed -n 's/.*receivedEntries=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
            abandoned=$(grep -c 'catch-up abandoned' "$RUN_DIR/join/log")
            pass "(k) join, seeded with load, reaches load's digest in $join_seconds s: $entries entries ($(( entries * 1024 / 1048576 )) MiB of values) copied, peak RSS $peak_mib MiB, store $store_mib MiB"
            echo "     catch-up: $received entries received in all, $abandoned walks abandoned on the way"
        else
            fail "(k) join reaches load's digest within 180 s" \
                "join holds $(status_number join entries) entries; last catch-up lines: $(grep 'catch-up' "$RUN_DIR/join/log" | tail -2 | tr '\n' ' ')"
        fi
    else
        fail "(k) 100,000 SETs through one pipelined connection" "$(cat "$RUN_DIR/large.rep"); load holds $(status_number load entries) entries"
    fi
else
    fail "(k) load starts"
fi
peer_stop join TERM >/dev/null 2>&1
peer_stop load TERM >/dev/null 2>&1
# The two stores and the request file are ~1 GB; the logs stay.
rm -rf "$RUN_DIR/large.req" "$RUN_DIR/large.rep" "$RUN_DIR/load/data" "$RUN_DIR/join/data"
fi  # (k)

# --- (v) hostile clients ----------------------------------------------------------------------
if want v; then
# Issue 58's promises that hold against any client, on a real process with a password: 16
# strangers declaring 64 MiB AUTH arguments are refused from the header (the node's RSS stays
# within 64 MiB), and 2,000 costly patterns do not hold another client's PING 1 s.
hostile_clients_section() {
    PEERS+=(hostile)
    head -c 24 /dev/urandom | base64 > "$RUN_DIR/hostile-password"
    chmod 600 "$RUN_DIR/hostile-password"
    if ! peer_start hostile 127.0.0.1:0 127.0.0.1:0 --cluster hostile --admin-password-file "$RUN_DIR/hostile-password"; then
        fail "(v) a peer with a password starts"
        return
    fi
    local out
    if out=$("$PYTHON" Cluster/hostile_clients.py huge-auth "$(peer_admin hostile)" "$(peer_pid hostile)" 2>&1); then
        pass "(v) 16 strangers declaring 64 MiB AUTH arguments are refused from the header: $out"
    else
        fail "(v) 16 strangers declaring 64 MiB AUTH arguments leave the node's RSS within 64 MiB" "$out"
    fi
    if out=$("$PYTHON" Cluster/hostile_clients.py patterns "$(peer_admin hostile)" "$(cat "$RUN_DIR/hostile-password")" 2>&1); then
        pass "(v) 2,000 costly patterns: another client's PING under 1 s while 5 SETs are matched: $out"
    else
        fail "(v) 2,000 costly patterns do not hold another client's PING 1 s" "$out"
    fi
    peer_stop hostile TERM >/dev/null 2>&1
}
hostile_clients_section
fi  # (v)

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
