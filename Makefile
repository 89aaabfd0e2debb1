# Decide — the front door. `make test` takes a fresh Debian machine from clone to green.
#   make deps    system packages the build and tests need (apt-get; idempotent, quick when present)
#   make deps-python  the venv with the Python clients the integration tests use (.build-venv)
#   make build   debug build of every module
#   make check   the debug build and the unit tests only (no apt, no root; FILTER=Suite narrows them)
#   make test    unit tests, README example, doc citation and public API checks, transport tests under ASan, a
#                short fuzz run, the multi-process integration run and a 20 s chaos run (mk/syncnode.mk)
#   make api     rewrite docs/api/public-api.txt from the build (after a deliberate API change)
#   make docs    the DocC reference of the library products in .build/docs (fails on docc warnings)
#   make bench   release build, then every benchmark beside its baseline
#   make bench-layouts  the ratio goals that move with code placement, over LAYOUTS (8) link orders
#   make sim     the seeded multi-node simulation over SEEDS seeds (default 10,000; make test runs 500),
#                with ten times the weeks-long tombstone scenarios of make test
#   make sim-fleet  SWIM membership at FLEET_MEMBERS (default 1,000) simulated members, release build
#   make demo    three syncnode peers on loopback replicate a value, then stop (mk/syncnode.mk)

SWIFT ?= swift
APT_PACKAGES := libuv1-dev pkg-config libsqlite3-dev libjemalloc-dev redis-tools curl iproute2 iptables
# The Python clients of the integration tests (redis-py), in a virtual environment of our own.
VENV := .build-venv
PYTHON_REQUIREMENTS := Cluster/python-requirements.txt
BENCH_BUILD := .build-bench
BENCH_BIN := $(BENCH_BUILD)/release/DecideBench

.PHONY: deps deps-python build check test unit-test check-readme check-citations check-api api docs bench bench-core bench-layouts sim sim-fleet clean test-lock-tsan
SEEDS ?= 10000

deps:
	@missing=""; for package in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		if [ "$$(id -u)" -ne 0 ]; then echo "deps: need root to apt-get install$$missing" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: all present ($(APT_PACKAGES))"; fi

# A venv with the pinned Python clients; rebuilt when the requirements change. Debian's system
# python3 needs python3-venv for it, installed here when `python3 -m venv` is missing.
deps-python: $(VENV)/.installed

$(VENV)/.installed: $(PYTHON_REQUIREMENTS)
	@python3 -m venv --help >/dev/null 2>&1 || { \
		if [ "$$(id -u)" -ne 0 ]; then echo "deps-python: need root to apt-get install python3-venv" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	rm -rf $(VENV)
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r $(PYTHON_REQUIREMENTS)
	touch $@

build: deps
	$(SWIFT) build

# The whole log goes to .build/unit-test.log; on failure the failing tests and their recorded
# issues are printed again last, so a CI log that keeps only its tail still names them.
unit-test: deps
	$(SWIFT) build --build-tests
	@bash -o pipefail -c '$(SWIFT) test --skip-build 2>&1 | tee .build/unit-test.log' || { \
		echo "== unit tests failed; every failure recorded (whole log: .build/unit-test.log):"; \
		grep -a -E '✘|recorded an issue' .build/unit-test.log | tail -n 80; exit 1; }

# The fast inner loop: the debug build and the unit tests only (no apt, no root, no multi-process
# runs); FILTER narrows them (`make check FILTER=SyncNodeTests.HashCounterCommandTests`).
FILTER ?=
check:
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build $(if $(FILTER),--filter '$(FILTER)')

check-readme:
	bash scripts/check-readme-example.sh

# Every citation of the docs in Sources and Package.swift names a doc and a section that exist,
# and nothing cites a file outside the repository (the checker's own test first).
check-citations:
	python3 scripts/check-doc-citations.py --self-test
	python3 scripts/check-doc-citations.py

# The public API of the library products, one declaration a line, against docs/api/public-api.txt
# (read from the debug build's symbol graphs: unit-test builds them first).
check-api: unit-test
	python3 scripts/public-api.py check

api: build
	python3 scripts/public-api.py update

# The DocC reference of the library products (Sources/MODULE/MODULE.docc and every public
# symbol), one archive per module in .build/docs. Fails on any docc warning (a broken symbol link,
# say). Reads the debug build's symbol graphs: unit-test builds them first.
DOC_MODULES := DecideCore Decide DecideUV DecideSimulation DecideTesting
docs: unit-test
	rm -rf .build/docs && mkdir -p .build/docs
	python3 scripts/public-api.py graphs .build/docs/symbol-graphs
	for module in $(DOC_MODULES); do \
		docc convert Sources/$$module/$$module.docc --fallback-display-name $$module \
			--fallback-bundle-identifier dev.decide.$$module \
			--additional-symbol-graph-dir .build/docs/symbol-graphs/$$module \
			--output-path .build/docs/$$module.doccarchive --warnings-as-errors || exit 1; \
	done
	@echo "docs: .build/docs/{$$(echo $(DOC_MODULES) | tr ' ' ',')}.doccarchive"

test: unit-test check-readme check-citations check-api docs test-transport-asan test-lock-tsan fuzz-smoke integration chaos-smoke

# The node's lock (Sources/CDecideLock) under ThreadSanitizer, driven from C: the Swift runtime
# and swift-testing do not run under TSan with this toolchain. Threads (urgent, polite and plain)
# add to plain counters under the lock: 8 of them at three bounds, then 48 (most asleep, one
# spinning, heirs claiming), with turns timed by CLOCK_MONOTONIC and then by the processor's
# counter (Sources/CDecideClock); TSan fails the run on any data race.
LOCK_STRESS_BIN := .build-lock/lock-stress
SWIFT_RUNTIME_LIBS = $(abspath $(dir $(shell command -v swift))../lib/swift/linux)
test-lock-tsan:
	mkdir -p $(dir $(LOCK_STRESS_BIN))
	clang -O1 -g -fsanitize=thread -I Sources/CDecideLock/include -I Sources/CDecideClock/include \
		Sources/CDecideLock/lock.c Sources/CDecideClock/clock.c Tests/LockStress/lock_stress.c \
		-o $(LOCK_STRESS_BIN) -lpthread -L$(SWIFT_RUNTIME_LIBS) -ldispatch -lBlocksRuntime -Wl,-rpath,$(SWIFT_RUNTIME_LIBS)
	TSAN_OPTIONS=halt_on_error=1 $(LOCK_STRESS_BIN)

$(BENCH_BIN): deps FORCE
	$(SWIFT) build -c release --build-path $(BENCH_BUILD) --product DecideBench

bench: $(BENCH_BIN)
	$(BENCH_BIN) machine core memory transport replication anti-entropy durability join collection

bench-core: $(BENCH_BIN)
	$(BENCH_BIN) core

# One build, relinked LAYOUTS times with its functions shuffled (lld): each row's median and range.
LAYOUTS ?= 8
bench-layouts: deps
	SWIFT="$(SWIFT)" LAYOUTS=$(LAYOUTS) scripts/bench-layouts.sh

# A failing seed prints `SIM_SEED=N`; `SIM_SEED=N make sim` replays exactly that one.
sim: deps
	$(SWIFT) build --build-tests
	SIM_SEEDS=$(SEEDS) $(SWIFT) test --skip-build --filter 'ReplicationTests.(SimulationTests|TombstoneTests|HostilePeerTests|ExpiryTests|OwnedKeyTests|AcknowledgementTests|AcknowledgementAdversaryTests|LeaseTests|IndexTests|CounterTests|CounterLifetimeTests|HashCounterTests|SetTests|SortedSetTests)'

# SWIM failure detection and membership gossip at fleet size (docs/design/0019-swim-membership.md):
# detection of crashes, false suspicions and messages a member a second, printed as swim-fleet lines.
# 1,000: at 2,000 the join does not finish in the harness's 600 s of virtual time, and 5,000
# outgrew 17 GB (docs/simulation.md, "Membership at fleet size").
FLEET_MEMBERS ?= 1000
# A release build of the tests (in .build-release, with testing enabled for @testable imports):
# the debug build did not finish joining 2,000 members in 20 minutes.
sim-fleet: deps
	$(SWIFT) build -c release --build-tests --build-path .build-release -Xswiftc -enable-testing
	@bash -o pipefail -c "SWIM_FLEET_MEMBERS=$(FLEET_MEMBERS) $(SWIFT) test -c release --build-path .build-release -Xswiftc -enable-testing --skip-build --filter 'DecideSimulationTests.SWIM' 2>&1 \
		| tee .build-release/sim-fleet.log | grep -a -E 'swim-fleet|✘|passed after|failed after'"

clean:
	rm -rf .build .build-*

.PHONY: FORCE
FORCE:

include mk/transport.mk
include mk/fuzz.mk
include mk/syncnode.mk
include mk/compare.mk
