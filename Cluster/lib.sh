# Shared functions for the Cluster/ scripts. Source it; it defines functions only.
#
# A peer NAME lives in $RUN_DIR/NAME/: pid, log (stderr of syncnode, appended across restarts),
# data/ (its --data-dir), listen and admin (the addresses it bound, read from its ready line).
# A process is signalled only when its pid file names a live process whose command line is
# `syncnode run --id NAME ... --data-dir $RUN_DIR/NAME/data`: a stale pid reused by another
# program is never killed.

# The syncnode binary: $SYNCNODE if set, else the debug build in .build (`make syncnode`).
syncnode_binary() {
    if [ -n "${SYNCNODE:-}" ]; then echo "$SYNCNODE"; return; fi
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    echo "$(cd "$root" && swift build --show-bin-path)/syncnode"
}

# preload_library NAME: Cluster/preload/NAME.c, a library preloaded into one test process,
# compiled into .build-run/libNAME.so when missing or older than its source; prints its path.
preload_library() {
    local root source library
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    source="$root/Cluster/preload/$1.c"
    library="$root/.build-run/lib$1.so"
    if [ ! -f "$library" ] || [ "$source" -nt "$library" ]; then
        mkdir -p "$root/.build-run"
        ${CC:-cc} -shared -fPIC -O2 -Wall -Wextra -Werror -o "$library" "$source" >&2 || return 1
    fi
    echo "$library"
}

# wait_until SECONDS DESCRIPTION COMMAND...: runs COMMAND every 0.1 s until it succeeds;
# fails with a message naming DESCRIPTION when SECONDS pass first.
wait_until() {
    local seconds=$1 description=$2
    shift 2
    local deadline=$(( $(date +%s%N) + seconds * 1000000000 ))
    while true; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        if [ "$(date +%s%N)" -ge "$deadline" ]; then
            echo "timed out after ${seconds}s waiting for: $description" >&2
            return 1
        fi
        sleep 0.1
    done
}

# pid_gone PID: true once PID has exited (a zombie not yet reaped counts as exited).
pid_gone() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}

# peer_pid NAME: the pid in NAME's pid file if that process is ours and alive; fails otherwise.
peer_pid() {
    local name=$1 pidfile="$RUN_DIR/$1/pid" pid cmdline
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    cmdline=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
    case "$cmdline" in
        *syncnode\ run\ --id\ "$name"\ *--data-dir\ "$RUN_DIR/$name/data"*) echo "$pid"; return 0 ;;
    esac
    return 1
}

# peer_start NAME LISTEN ADMIN [syncnode run flags...]: starts NAME in the background (its own
# session, so a Ctrl-C in the terminal does not reach it) and waits until it is ready.
peer_start() {
    local name=$1 listen=$2 admin=$3
    shift 3
    local dir="$RUN_DIR/$name" binary
    binary=$(syncnode_binary)
    mkdir -p "$dir/data"
    if peer_pid "$name" >/dev/null; then
        echo "$name is already running (pid $(peer_pid "$name"))" >&2
        return 1
    fi
    touch "$dir/log"
    local skip
    skip=$(wc -l < "$dir/log")
    rm -f "$dir/listen" "$dir/admin"
    # PEER_WALLCLOCK_SHIFT_MS moves this one process's wall clock that many milliseconds
    # (negative: behind), as a machine with wrong NTP has it: the monotonic clock and timers stay.
    local moved=()
    if [ -n "${PEER_WALLCLOCK_SHIFT_MS:-}" ]; then
        moved=(env LD_PRELOAD="$(preload_library wallclock_shift)" WALLCLOCK_SHIFT_MS="$PEER_WALLCLOCK_SHIFT_MS")
    fi
    setsid "${moved[@]}" "$binary" run --id "$name" --listen "$listen" --admin "$admin" --data-dir "$dir/data" "$@" \
        >>"$dir/log" 2>&1 </dev/null &
    echo $! > "$dir/pid"
    local pid=$!
    local deadline=$(( $(date +%s%N) + 20 * 1000000000 )) ready=""
    while [ -z "$ready" ]; do
        ready=$(tail -n +"$((skip + 1))" "$dir/log" | grep -m1 'syncnode ready' || true)
        if [ -z "$ready" ]; then
            if pid_gone "$pid"; then
                echo "$name exited during start; its log says:" >&2
                tail -n +"$((skip + 1))" "$dir/log" | tail -5 >&2
                return 1
            fi
            if [ "$(date +%s%N)" -ge "$deadline" ]; then
                echo "$name did not report ready within 20 s (log: $dir/log)" >&2
                return 1
            fi
            sleep 0.05
        fi
    done
    echo "$ready" | sed -n 's/.* listen=\([^ ]*\).*/\1/p' > "$dir/listen"
    # The first client address (TCP); a Unix socket, when also given, follows after a comma.
    echo "$ready" | sed -n 's/.* admin=\([^ ,]*\).*/\1/p' > "$dir/admin"
    # The Prometheus endpoint, when --metrics was given ("off" otherwise).
    echo "$ready" | sed -n 's/.* metrics=\([^ ]*\).*/\1/p' > "$dir/metrics"
}

# peer_admin NAME / peer_listen NAME: the addresses NAME bound.
peer_admin() { cat "$RUN_DIR/$1/admin"; }
peer_listen() { cat "$RUN_DIR/$1/listen"; }
peer_metrics() { cat "$RUN_DIR/$1/metrics"; }

# peer_stop NAME [SIGNAL]: sends SIGNAL (default TERM) to NAME if it is ours, waits up to 15 s
# for it to exit, and removes its pid file. A pid file naming another process is removed
# without signalling anything.
peer_stop() {
    local name=$1 signal=${2:-TERM} pid
    if ! pid=$(peer_pid "$name"); then
        if [ -f "$RUN_DIR/$name/pid" ]; then
            echo "$name: pid $(cat "$RUN_DIR/$name/pid") is not our syncnode any more; removing the stale pid file" >&2
            rm -f "$RUN_DIR/$name/pid"
        fi
        return 0
    fi
    kill "-$signal" "$pid" 2>/dev/null || true
    if ! wait_until 15 "$name (pid $pid) to exit after SIG$signal" pid_gone "$pid"; then
        return 1
    fi
    rm -f "$RUN_DIR/$name/pid"
}

# peer_names: every peer with a directory in $RUN_DIR, sorted.
peer_names() {
    [ -d "$RUN_DIR" ] || return 0
    local dir
    for dir in "$RUN_DIR"/*/; do
        [ -d "$dir" ] && basename "$dir"
    done | sort
}
