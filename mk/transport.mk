# Transport targets (DecideUV). Included by the main Makefile, which defines `deps`.
#   make test-transport-asan   DecideUV tests under AddressSanitizer (+ LeakSanitizer)
#   make bench-transport       release build, then `DecideBench transport`

.PHONY: test-transport-asan bench-transport

# DECIDE_SANITIZED=1: syncnode (linked into the test product) leaves jemalloc out, since
# AddressSanitizer's runtime must own malloc (Package.swift).
test-transport-asan: deps
	DECIDE_SANITIZED=1 swift test --sanitize=address --build-path .build-asan --disable-xctest --filter DecideUVTests

bench-transport: deps
	swift build -c release --build-path .build-bench --product DecideBench
	.build-bench/release/DecideBench transport
