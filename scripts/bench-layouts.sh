#!/usr/bin/env bash
# The ratio goals of `make bench` that move with where the code lies (docs/performance.md,
# "Code layouts"), measured over LAYOUTS placements of the same build.
#
# The benchmark program is built once with lld, then relinked with its functions in a different
# order for each seed (`--shuffle-sections`): the same instructions, placed differently, as any
# program that links the library places them. Each layout runs the core rows and the one-key
# durability rows; the table gives each layout's ratios, then each row's median and range.
#
#   LAYOUTS=8 scripts/bench-layouts.sh        (make bench-layouts)
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
LAYOUTS=${LAYOUTS:-8}
BUILD=${LAYOUTS_BUILD:-.build-layouts}
BIN="$BUILD/release/DecideBench"

case "$LAYOUTS" in ''|*[!0-9]*|0) echo "bench-layouts: LAYOUTS must be a positive number, not '$LAYOUTS'" >&2; exit 2 ;; esac

# The first ratio in a table row (the first field that is a number followed by ×).
ratio() { awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+×$/) { sub("×", "", $i); print $i; exit } }'; }

one=() ten=() batched=()
mkdir -p "$BUILD"
: >"$BUILD/bench-layouts.log"
printf '%-8s %-10s %-10s %-16s\n' layout one-write ten-write "batched, one key"
for seed in $(seq 1 "$LAYOUTS"); do
    # Only the link differs from seed to seed: after the first build, each is a relink.
    if ! log=$("$SWIFT" build -c release --build-path "$BUILD" --product DecideBench \
        -Xswiftc -use-ld=lld -Xlinker "--shuffle-sections=.text*=$seed" 2>&1); then
        echo "$log" >&2
        echo "bench-layouts: the build with layout $seed failed" >&2
        exit 1
    fi
    # The nodes' logs (stderr) go to a file, so the table stays readable.
    core=$("$BIN" core 2>>"$BUILD/bench-layouts.log")
    durability=$(BENCH_DURABILITY_WORKLOAD=one "$BIN" durability 2>>"$BUILD/bench-layouts.log")
    o=$(grep '^one-write' <<<"$core" | ratio)
    t=$(grep '^ten-write' <<<"$core" | ratio)
    b=$(grep 'batched' <<<"$durability" | ratio)
    if [ -z "$o" ] || [ -z "$t" ] || [ -z "$b" ]; then
        printf '%s\n%s\n' "$core" "$durability" >&2
        echo "bench-layouts: layout $seed printed no ratio for a row (logs: $BUILD/bench-layouts.log)" >&2
        exit 1
    fi
    one+=("$o") ten+=("$t") batched+=("$b")
    printf '%-8s %-10s %-10s %-16s\n' "$seed" "$o×" "$t×" "$b×"
done

# Median, range and how many layouts meet `goal` (a ratio at most `goal`).
summary() {
    local name=$1 goal=$2; shift 2
    printf '%s\n' "$@" | sort -g | awk -v name="$name" -v goal="$goal" '
        { v[NR] = $1; if ($1 <= goal) met++ }
        END {
            median = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%-18s median %.2f×  range %.2f–%.2f×  goal ≤ %.2f×: %s at the median, met in %d of %d layouts\n",
                name, median, v[1], v[NR], goal, (median <= goal ? "met" : "not met"), met, NR
        }'
}
echo
summary "one-write" 4 "${one[@]}"
summary "ten-write" 4 "${ten[@]}"
summary "batched, one key" 1.43 "${batched[@]}"
