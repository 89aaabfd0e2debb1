#!/usr/bin/env bash
# Fails when a README code block marked `<!-- example:NAME -->` and its copy compiled by
# Tests/DecideTests/ReadmeExampleTests.swift (between README-NAME-BEGIN and README-NAME-END)
# differ, ignoring indentation and `// test-only` lines, or when the DocC getting-started
# article's example is not the README's library example.
set -euo pipefail
cd "$(dirname "$0")/.."
normalize() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//'; }
check() {
    local name=$1 region=$2
    local readme_block test_block
    readme_block=$(awk -v marker="<!-- example:$name -->" '$0 == marker {found=1; next} found && /^```swift/{inside=1; next} inside && /^```/{exit} inside' README.md)
    test_block=$(awk -v begin="// README-$region-BEGIN" -v end="// README-$region-END" '$0 == begin {inside=1; next} $0 == end {exit} inside' Tests/DecideTests/ReadmeExampleTests.swift | grep -v '// test-only$')
    if [ -z "$readme_block" ]; then
        echo "check-readme-example: no \`\`\`swift block after <!-- example:$name --> in README.md" >&2
        exit 1
    fi
    if ! diff <(printf '%s\n' "$readme_block" | normalize) <(printf '%s\n' "$test_block" | normalize); then
        echo "check-readme-example: README.md's $name example differs from Tests/DecideTests/ReadmeExampleTests.swift (diff above: < README, > test)" >&2
        exit 1
    fi
    echo "check-readme-example: README $name example matches the compiled test copy"
}
check library EXAMPLE
check testing TESTING
check model MODEL
check counter COUNTER

# The DocC getting-started article shows the library example too: it must be the README's.
article=Sources/Decide/Decide.docc/GettingStarted.md
readme_library=$(awk '$0 == "<!-- example:library -->" {found=1; next} found && /^```swift/{inside=1; next} inside && /^```/{exit} inside' README.md)
article_block=$(awk '/^```swift/{inside=1; next} inside && /^```/{exit} inside' "$article")
if ! diff <(printf '%s\n' "$readme_library") <(printf '%s\n' "$article_block"); then
    echo "check-readme-example: $article's example differs from README.md's library example (diff above: < README, > article)" >&2
    exit 1
fi
echo "check-readme-example: $article shows the README library example"

# The DocC tutorial (Decide.docc/Tutorials/SharingAFeatureFlag.tutorial) builds the same example
# step by step: each step's file only adds lines to the one before, the last library step is the
# README's library example and the replication step is the README's replication block.
resources=Sources/Decide/Decide.docc/Resources
steps=("$resources"/sharing-0[1-6]-*.swift)
for (( i = 1; i < ${#steps[@]}; i++ )); do
    if ! python3 - "${steps[i-1]}" "${steps[i]}" <<'PY'
import sys
before, after = (open(path).read().splitlines() for path in sys.argv[1:3])
position = 0
for line in before:
    while position < len(after) and after[position] != line:
        position += 1
    if position == len(after):
        sys.exit(f"{sys.argv[1]}: the line {line!r} is not in the next step, {sys.argv[2]}")
    position += 1
PY
    then
        echo "check-readme-example: each tutorial step must only add lines to the step before" >&2
        exit 1
    fi
done
if ! diff <(printf '%s\n' "$readme_library") "${steps[${#steps[@]}-1]}"; then
    echo "check-readme-example: ${steps[${#steps[@]}-1]} differs from README.md's library example (diff above: < README, > step)" >&2
    exit 1
fi
readme_replication=$(awk '/^### Replicating between processes/{found=1; next} found && /^```swift/{inside=1; next} inside && /^```/{exit} inside' README.md)
if ! diff <(printf '%s\n' "$readme_replication") "$resources/sharing-07-replicate.swift"; then
    echo "check-readme-example: $resources/sharing-07-replicate.swift differs from README.md's replication example (diff above: < README, > step)" >&2
    exit 1
fi
echo "check-readme-example: the tutorial's ${#steps[@]} library steps grow into the README example; its replication step is the README's"
