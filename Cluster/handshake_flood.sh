# check_handshake_flood: a stranger holding ~1,100 idle sockets to a node's --listen port
# (issue 58, item 6). Sourced by Cluster/integration.sh, which defines RUN_DIR, BIN, PYTHON,
# PEERS, pass and fail, and sources Cluster/lib.sh.
#
# flood1 and flood2 link; Cluster/handshake_flood.py then keeps trying to hold 1,100 idle
# connections to flood1 from 127.0.0.1, the address flood2 dials from too, reopening each one
# flood1 closes. Checked while it runs: the link stays up; flood2, killed with -9 and restarted,
# links again (flood1's own dial uses the slots kept for dials, since flood2's dials from the
# flooded address are refused); flood1 refused more than a thousand connections, and its log
# says so in at most FLOOD_MAX_REFUSAL_LINES lines (a line a second per reason, with counts).
# Both peers and the helper are stopped by pid at the end.

FLOOD_SOCKETS=${FLOOD_SOCKETS:-1100}
FLOOD_MAX_REFUSAL_LINES=${FLOOD_MAX_REFUSAL_LINES:-30}

# flood_refusal_lines LOG SKIP: flood1's refusal lines after its first SKIP lines.
flood_refusal_lines() { tail -n +"$(($2 + 1))" "$1" | grep -E 'link refused|connections refused|accept failed'; }

# flood_refusals_logged LOG SKIP: the refusals those lines account for (one each, plus the
# counts they carry).
flood_refusals_logged() {
    flood_refusal_lines "$1" "$2" | awk '{
        n = 1
        if (match($0, /also-refused=[0-9]+/)) n += substr($0, RSTART + 13, RLENGTH - 13)
        if (match($0, / count=[0-9]+/)) n = substr($0, RSTART + 7, RLENGTH - 7)
        s += n
    } END { print s + 0 }'
}

# flood_status FIELD: a number from the helper's last status line.
flood_status() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" "$RUN_DIR/flood.status" 2>/dev/null; }
flood_ramped() { [ "$(flood_status opened)" -ge "$FLOOD_SOCKETS" ] && [ "$(flood_status closed)" -ge 1000 ]; }

check_handshake_flood() {
    echo "== (flood) a stranger holding $FLOOD_SOCKETS idle sockets to flood1's --listen"
    PEERS+=(flood1 flood2)
    head -c 32 /dev/urandom | base64 > "$RUN_DIR/flood-secret"
    chmod 600 "$RUN_DIR/flood-secret"
    local flags=(--cluster flood --cluster-secret-file "$RUN_DIR/flood-secret")
    if ! peer_start flood2 127.0.0.1:0 127.0.0.1:0 "${flags[@]}" \
        || ! peer_start flood1 127.0.0.1:0 127.0.0.1:0 "${flags[@]}" --peer "$(peer_listen flood2)"; then
        fail "(flood) flood1 and flood2 start" "see $RUN_DIR/flood1/log, $RUN_DIR/flood2/log"
        return
    fi
    if ! wait_until 20 "flood1 and flood2 to link" linked flood1 flood2; then
        fail "(flood) flood1 and flood2 link" "$(status_json flood1)"
        return
    fi
    local log="$RUN_DIR/flood1/log" skip started flood_pid
    skip=$(wc -l < "$log")
    rm -f "$RUN_DIR/flood.status"
    started=$(date +%s%N)
    "${PYTHON:-python3}" Cluster/handshake_flood.py "$(peer_listen flood1)" --sockets "$FLOOD_SOCKETS" \
        --status "$RUN_DIR/flood.status" --seconds 120 > "$RUN_DIR/flood.out" 2>&1 &
    flood_pid=$!
    local ok=1 why=""
    if ! wait_until 20 "the helper to open $FLOOD_SOCKETS connections and see 1,000 closed" flood_ramped; then
        ok=0; why="the helper: $(cat "$RUN_DIR/flood.status" 2>/dev/null) $(tail -2 "$RUN_DIR/flood.out")"
    fi
    if [ $ok = 1 ] && ! stays_true 5 linked flood1 flood2; then
        ok=0; why="the link went down under the flood: flood1 sees flood2 as '$(link_of flood1 flood2)'"
    fi
    if [ $ok = 1 ]; then
        pass "(flood) the flood1–flood2 link stays up for 5 s while a stranger tries to hold $FLOOD_SOCKETS sockets to flood1 (helper: $(cat "$RUN_DIR/flood.status"))"
    else
        fail "(flood) the link stays up under the flood" "$why"
    fi
    # flood2 goes away and comes back on its ports: flood1 must dial it through the flood.
    local flood2_listen flood2_admin flood2_pid
    flood2_listen=$(peer_listen flood2)
    flood2_admin=$(peer_admin flood2)
    flood2_pid=$(peer_pid flood2)
    { kill -9 "$flood2_pid"; wait "$flood2_pid"; } 2>/dev/null
    rm -f "$RUN_DIR/flood2/pid"
    flood2_gone() { ! linked flood1 flood2; }
    wait_until 10 "flood1 to notice flood2 is gone" flood2_gone || true
    if peer_start flood2 "$flood2_listen" "$flood2_admin" "${flags[@]}" --peer "$(peer_listen flood1)" \
        && wait_until 20 "flood1 and flood2 to link again under the flood" linked flood1 flood2; then
        pass "(flood) flood2, killed with -9 and restarted, links with flood1 again while the flood goes on"
    else
        fail "(flood) flood2 links with flood1 again under the flood" "flood1 sees flood2 as '$(link_of flood1 flood2)'"
    fi
    # Its dials while flood2 was away failed for want of flood2, never for want of a slot.
    local starved
    starved=$(tail -n +"$((skip + 1))" "$log" | grep -c 'connect failed.*too many connections')
    if [ "$starved" -eq 0 ]; then
        pass "(flood) none of flood1's own dials was refused for want of a connection slot"
    else
        fail "(flood) flood1's own dials keep their slots under the flood" "$starved dials failed with 'too many connections'"
    fi
    kill -TERM "$flood_pid" 2>/dev/null
    wait "$flood_pid" 2>/dev/null
    local seconds lines refused closed
    seconds=$(seconds_since "$started")
    # The counts of refusals only counted come at most an interval (1 s) after them.
    flood_counts_in() { [ "$(flood_refusals_logged "$log" "$skip")" -ge "$(flood_status closed)" ]; }
    wait_until 5 "flood1's refusal counts to cover what the helper saw closed" flood_counts_in || true
    lines=$(flood_refusal_lines "$log" "$skip" | wc -l)
    refused=$(flood_refusals_logged "$log" "$skip")
    closed=$(flood_status closed)
    echo "     flood: $seconds s, helper $(cat "$RUN_DIR/flood.status"); flood1 logged $lines refusal lines accounting for $refused refusals"
    flood_refusal_lines "$log" "$skip" | cut -c1-220 | sed 's/^/       /' | head -40
    if [ "$refused" -ge 1000 ] && [ "$lines" -le "$FLOOD_MAX_REFUSAL_LINES" ]; then
        pass "(flood) flood1 refused $refused connections in $seconds s and logged $lines lines about them (at most $FLOOD_MAX_REFUSAL_LINES)"
    else
        fail "(flood) flood1's refusals are many and its refusal lines few" "$refused refusals in $lines lines (bound $FLOOD_MAX_REFUSAL_LINES); the helper saw $closed closed"
    fi
    peer_stop flood1 >/dev/null 2>&1 || true
    peer_stop flood2 >/dev/null 2>&1 || true
}
