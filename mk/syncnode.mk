# syncnode targets. Included by the main Makefile, which defines `deps` and SWIFT.
#   make syncnode            debug build of the syncnode binary (in .build, beside the unit tests')
#   make demo                three local peers: write on one, read and watch on the others, stop
#   make cluster N=5         N local peers from Cluster/local.conf that stay up (ports 7401+, 7501+)
#   make cluster-status      `syncnode status` of each of them
#   make cluster-down        stop them (only processes Cluster/ started; see Cluster/lib.sh)
#   make integration         multi-process tests with real peers (Cluster/integration.sh);
#                            CASES="j w" runs only those cases ("abc": the shared a, b, c cluster's)
#   make chaos               five peers in network namespaces, a seeded nemesis (partitions, loss,
#                            kill -9), then a check that they converged and lost no acknowledged
#                            write (Cluster/chaos.sh; root; CHAOS_SECONDS, CHAOS_SEED)
#   make chaos-smoke         the same for 20 s, part of `make test`; says SKIPPED without root or namespaces

# The unit tests' build folder: after `make unit-test` the binary is already built (same debug
# flags), so `make test` does not compile every module a second time for it.
SYNCNODE_BUILD := .build
# The binary's path, asked of SwiftPM when a recipe runs (not when make reads this file).
SYNCNODE_BIN = $$($(SWIFT) build --build-path $(SYNCNODE_BUILD) --show-bin-path)/syncnode

.PHONY: syncnode demo cluster cluster-status cluster-down integration chaos chaos-smoke

syncnode: deps
	$(SWIFT) build --build-path $(SYNCNODE_BUILD) --product syncnode

demo: syncnode
	SYNCNODE="$(SYNCNODE_BIN)" bash Cluster/demo.sh

cluster: syncnode
	SYNCNODE="$(SYNCNODE_BIN)" bash Cluster/cluster.sh up $(if $(N),-n $(N))

cluster-status:
	SYNCNODE="$(SYNCNODE_BIN)" bash Cluster/cluster.sh status

cluster-down:
	SYNCNODE="$(SYNCNODE_BIN)" bash Cluster/cluster.sh down

integration: syncnode deps-python
	SYNCNODE="$(SYNCNODE_BIN)" PYTHON="$(CURDIR)/$(VENV)/bin/python" bash Cluster/integration.sh

CHAOS_SECONDS ?= 60
chaos: syncnode
	python3 Cluster/chaos_check.py --self-test
	SYNCNODE="$(SYNCNODE_BIN)" CHAOS_SECONDS=$(CHAOS_SECONDS) CHAOS_REQUIRED=1 bash Cluster/chaos.sh

chaos-smoke: syncnode
	python3 Cluster/chaos_check.py --self-test
	SYNCNODE="$(SYNCNODE_BIN)" CHAOS_SECONDS=20 bash Cluster/chaos.sh
