#!/usr/bin/env bash
# Fails when the README's library example and the copy compiled by
# Tests/DecideTests/ReadmeExampleTests.swift differ (ignoring indentation and `// test-only` lines).
set -euo pipefail
cd "$(dirname "$0")/.."
readme_block=$(awk '/<!-- example:library -->/{found=1; next} found && /^```swift/{inside=1; next} inside && /^```/{exit} inside' README.md)
test_block=$(awk '/README-EXAMPLE-BEGIN/{inside=1; next} /README-EXAMPLE-END/{exit} inside' Tests/DecideTests/ReadmeExampleTests.swift | grep -v '// test-only$')
normalize() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//'; }
if [ -z "$readme_block" ]; then
    echo "check-readme-example: no \`\`\`swift block after <!-- example:library --> in README.md" >&2
    exit 1
fi
if ! diff <(printf '%s\n' "$readme_block" | normalize) <(printf '%s\n' "$test_block" | normalize); then
    echo "check-readme-example: README.md's example differs from Tests/DecideTests/ReadmeExampleTests.swift (diff above: < README, > test)" >&2
    exit 1
fi
echo "check-readme-example: README example matches the compiled test copy"
