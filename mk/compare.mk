# Decide beside Redis. Included by the main Makefile, which defines `deps`, SWIFT and BENCH_BUILD.
#   make deps-bench      redis-server and redis-tools (apt-get; idempotent, quick when present)
#   make bench-compare   Redis master+replica vs Decide (library and syncnode) on 127.0.0.1, one run;
#                        prints the table and writes it into docs/performance.md
#   make bench-catch-up  a peer joining one under sustained SADD -P 16: catch-up walk restarts at
#                        the default change log and at CATCH_UP_ENTRIES (docs/operations.md)
# COMPARE_KEYS (default 100000) is the key count and the number of writes per workload;
# COMPARE_ROUNDS (default 5) how many alternating rounds of the Redis stream and the library run
# (the table takes the median round and the median of the rounds' paired ratios).

COMPARE_PACKAGES := redis-server redis-tools
COMPARE_KEYS ?= 100000
COMPARE_ROUNDS ?= 5

.PHONY: deps-bench bench-compare bench-catch-up compare-build

deps-bench:
	@missing=""; for package in $(COMPARE_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps-bench: installing$$missing"; \
		if [ "$$(id -u)" -ne 0 ]; then echo "deps-bench: need root to apt-get install$$missing" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps-bench: all present ($(COMPARE_PACKAGES))"; fi

compare-build: deps
	$(SWIFT) build -c release --build-path $(BENCH_BUILD) --product DecideBench
	$(SWIFT) build -c release --build-path $(BENCH_BUILD) --product syncnode

bench-compare: deps deps-bench compare-build
	DECIDE_BENCH="$(BENCH_BUILD)/release/DecideBench" SYNCNODE="$(BENCH_BUILD)/release/syncnode" \
		COMPARE_KEYS=$(COMPARE_KEYS) COMPARE_ROUNDS=$(COMPARE_ROUNDS) bash Cluster/bench-compare.sh

bench-catch-up: deps deps-bench compare-build
	SYNCNODE="$(BENCH_BUILD)/release/syncnode" bash Cluster/catch-up-under-load.sh
