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

# The DocC getting-started article shows the library example too: it must be the README's.
article=Sources/Decide/Decide.docc/GettingStarted.md
readme_library=$(awk '$0 == "<!-- example:library -->" {found=1; next} found && /^```swift/{inside=1; next} inside && /^```/{exit} inside' README.md)
article_block=$(awk '/^```swift/{inside=1; next} inside && /^```/{exit} inside' "$article")
if ! diff <(printf '%s\n' "$readme_library") <(printf '%s\n' "$article_block"); then
    echo "check-readme-example: $article's example differs from README.md's library example (diff above: < README, > article)" >&2
    exit 1
fi
echo "check-readme-example: $article shows the README library example"
