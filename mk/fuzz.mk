# Fuzz targets (libFuzzer + AddressSanitizer). Included by the main Makefile, which defines `deps`.
#   make fuzz                  the frame decoder + handshake parser (transport), the replication
#                              decoders, the replication engine, the RESP codec (DecideRESP) and
#                              syncnode's RESP service, FUZZ_SECONDS long each, as many at once as
#                              there are processors
#   make fuzz-smoke            the same for FUZZ_SMOKE_SECONDS each (part of `make test`)
#   make fuzz-run-NAME         one of them (transport, replication, engine, resp, resp-service),
#                              FUZZ_RUN_SECONDS long

FUZZ_SECONDS ?= 300
# Optimised, but with `assert` kept: every fuzz input also checks the core's invariants
# (docs/architecture.md, "Invariants asserted where they must hold").
FUZZ_ASSERTS := -assert-config Debug
# The language features Package.swift enables for every target, so the fuzzers compile the same code.
FUZZ_FEATURES := -enable-upcoming-feature ImmutableWeakCaptures
FUZZ_SMOKE_SECONDS ?= 30
# swiftc compiles a fuzzer's files in one job unless told otherwise: one per processor.
FUZZ_JOBS ?= $(shell nproc)
FUZZ_BUILD := .build-fuzz
FUZZ_BIN := $(FUZZ_BUILD)/fuzz-transport
FUZZ_SOURCES := Fuzz/FuzzTransport.swift \
	Sources/DecideUV/Transport/WireProtocol.swift \
	Sources/DecideUV/Transport/FrameDecoder.swift \
	Sources/DecideUV/Handshake/HandshakeMessage.swift

.PHONY: fuzz fuzz-smoke fuzz-build

# Every Swift file of a module, in its folders (`swift_sources Sources/Decide`); not the code of
# its DocC catalog (the tutorial's steps), which SwiftPM leaves out too.
swift_sources = $(shell find $(1) -name '*.docc' -prune -o -name '*.swift' -print | LC_ALL=C sort)

# The replication layer's decoders (DecideCore: ReplicationCodec, WireCodec) get their own target.
FUZZ_REPLICATION_BIN := $(FUZZ_BUILD)/fuzz-replication
FUZZ_REPLICATION_SOURCES := Fuzz/FuzzReplication.swift $(call swift_sources,Sources/DecideCore)
# DecideCore's growing arrays map memory through CDecideMemory: its header by its module map,
# its C source compiled and linked in (the rule is with the engine's C objects, below).
FUZZ_CORE_HEADERS := Sources/CDecideMemory/include/CDecideMemory.h Sources/CDecideMemory/include/module.modulemap
FUZZ_CORE_C_OBJECT := $(FUZZ_BUILD)/engine-memory.o

$(FUZZ_REPLICATION_BIN): $(FUZZ_REPLICATION_SOURCES) $(FUZZ_CORE_HEADERS) $(FUZZ_CORE_C_OBJECT)
	mkdir -p $(FUZZ_BUILD)
	swiftc -j $(FUZZ_JOBS) -O $(FUZZ_ASSERTS) $(FUZZ_FEATURES) -g -sanitize=fuzzer,address -use-ld=lld -parse-as-library -package-name decide \
		-I Sources/CDecideMemory/include $(FUZZ_REPLICATION_SOURCES) $(FUZZ_CORE_C_OBJECT) -o $(FUZZ_REPLICATION_BIN)

# The Redis protocol codec (DecideRESP: request and reply parsers, writer, globs) is pure Swift.
FUZZ_RESP_BIN := $(FUZZ_BUILD)/fuzz-resp
FUZZ_RESP_SOURCES := Fuzz/FuzzRESP.swift $(call swift_sources,Sources/DecideRESP)

$(FUZZ_RESP_BIN): $(FUZZ_RESP_SOURCES)
	mkdir -p $(FUZZ_BUILD)
	swiftc -j $(FUZZ_JOBS) -O $(FUZZ_ASSERTS) $(FUZZ_FEATURES) -g -sanitize=fuzzer,address -use-ld=lld -parse-as-library -package-name decide \
		$(FUZZ_RESP_SOURCES) -o $(FUZZ_RESP_BIN)

# The replication engine (Decide's Replicator and Node, DecideCore under them) as one module,
# driven over a fake Transport by Fuzz/FuzzEngine.swift. Decide imports swift-log, which only
# SwiftPM builds: the rule takes Logging.swiftmodule and its objects from the debug build
# (`make test` builds it in unit-test first). `import DecideCore` in Decide's sources finds an
# empty module map, since DecideCore is compiled into this same module.
FUZZ_ENGINE_BIN := $(FUZZ_BUILD)/fuzz-engine
FUZZ_ENGINE_MODULES := $(FUZZ_BUILD)/engine-modules
FUZZ_ENGINE_SOURCES := Fuzz/FuzzEngine.swift $(call swift_sources,Sources/DecideCore) $(call swift_sources,Sources/Decide)
# Decide's prefetch hints: a header-only C module, found by its module map. The node's lock
# (CDecideLock), the millisecond clock (CDecideClock) and DecideCore's memory mappings
# (CDecideMemory): their headers by their module maps, their C sources compiled here and linked in.
FUZZ_ENGINE_C_MODULES := CDecideHints CDecideLock CDecideClock CDecideMemory
FUZZ_ENGINE_HEADERS := $(foreach module,$(FUZZ_ENGINE_C_MODULES),Sources/$(module)/include/$(module).h Sources/$(module)/include/module.modulemap)
FUZZ_ENGINE_C_OBJECTS := $(FUZZ_BUILD)/engine-lock.o $(FUZZ_BUILD)/engine-clock.o $(FUZZ_CORE_C_OBJECT)
DEBUG_LOGGING_MODULE := .build/debug/Modules/Logging.swiftmodule
# Decide also imports swift-metrics' CoreMetrics (ReplicationMetrics, the store's sync timer).
DEBUG_METRICS_MODULE := .build/debug/Modules/CoreMetrics.swiftmodule

$(DEBUG_LOGGING_MODULE) $(DEBUG_METRICS_MODULE): | deps
	$(SWIFT) build

# engine-NAME.o from Sources/MODULE/NAME.c, with every engine C module's headers in reach (the
# lock includes the clock's).
define fuzz_engine_c_object
$(FUZZ_BUILD)/engine-$(1).o: Sources/$(2)/$(1).c $(FUZZ_ENGINE_HEADERS) | deps
	mkdir -p $(FUZZ_BUILD)
	clang -O2 -g -fsanitize=address $(foreach module,$(FUZZ_ENGINE_C_MODULES),-I Sources/$(module)/include) -c Sources/$(2)/$(1).c -o $$@
endef
$(eval $(call fuzz_engine_c_object,lock,CDecideLock))
$(eval $(call fuzz_engine_c_object,clock,CDecideClock))
$(eval $(call fuzz_engine_c_object,memory,CDecideMemory))

$(FUZZ_ENGINE_BIN): $(FUZZ_ENGINE_SOURCES) $(FUZZ_ENGINE_HEADERS) $(FUZZ_ENGINE_C_OBJECTS) $(DEBUG_LOGGING_MODULE) $(DEBUG_METRICS_MODULE) | deps
	mkdir -p $(FUZZ_ENGINE_MODULES)
	cp $(DEBUG_LOGGING_MODULE) $(DEBUG_METRICS_MODULE) $(FUZZ_ENGINE_MODULES)/
	printf 'module DecideCore {\n    export *\n}\n' > $(FUZZ_ENGINE_MODULES)/module.modulemap
	swiftc -j $(FUZZ_JOBS) -O $(FUZZ_ASSERTS) $(FUZZ_FEATURES) -g -sanitize=fuzzer,address -use-ld=lld -parse-as-library -package-name decide \
		-swift-version 6 -module-name DecideFuzzEngine -I $(FUZZ_ENGINE_MODULES) -I Sources/CSQLite $(foreach module,$(FUZZ_ENGINE_C_MODULES),-I Sources/$(module)/include) $(FUZZ_ENGINE_FLAGS) \
		$(FUZZ_ENGINE_SOURCES) $(FUZZ_ENGINE_C_OBJECTS) .build/debug/Logging.build/*.swift.o .build/debug/CoreMetrics.build/*.swift.o -lsqlite3 -o $(FUZZ_ENGINE_BIN)

$(FUZZ_BIN): $(FUZZ_SOURCES)
	mkdir -p $(FUZZ_BUILD)
	swiftc -j $(FUZZ_JOBS) -O $(FUZZ_ASSERTS) $(FUZZ_FEATURES) -g -sanitize=fuzzer,address -use-ld=lld -parse-as-library -package-name decide \
		$(FUZZ_SOURCES) -o $(FUZZ_BIN)

# syncnode's Redis-protocol service (SyncNodeServer's RESPService on a real UVStreamServer,
# over the node, the replicator and libuv; Fuzz/RESPService): too many modules and C libraries
# (swift-crypto's) for one swiftc line, so SwiftPM builds it with libFuzzer and AddressSanitizer
# in a build folder of its own. DECIDE_SANITIZED=1 leaves jemalloc out (Package.swift), and
# DECIDE_FUZZING leaves out the replayer's `main` for libFuzzer's. Always rebuilt (SwiftPM knows
# what changed).
FUZZ_SERVICE_BUILD := .build-fuzz-service
FUZZ_SERVICE_BIN := $(FUZZ_SERVICE_BUILD)/debug/FuzzRESPService
.PHONY: fuzz-service-build
fuzz-service-build: | deps
	DECIDE_SANITIZED=1 $(SWIFT) build --build-path $(FUZZ_SERVICE_BUILD) --product FuzzRESPService \
		--sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address -Xswiftc -DDECIDE_FUZZING

fuzz-build: $(FUZZ_BIN) $(FUZZ_REPLICATION_BIN) $(FUZZ_ENGINE_BIN) $(FUZZ_RESP_BIN) fuzz-service-build

# The corpora live in $(FUZZ_BUILD)/corpus* (git-ignored); Fuzz/*seeds hold the committed seeds.
# Each fuzzer: its binary, then its other libFuzzer arguments (input size, where a crashing input
# is written, its corpus and seeds). The engine's own backtracer stays off: libFuzzer reports.
FUZZ_NAMES := transport replication engine resp resp-service
FUZZ_RUN_transport := $(FUZZ_BIN) -max_len=4096 -artifact_prefix=$(FUZZ_BUILD)/ $(FUZZ_BUILD)/corpus Fuzz/seeds
FUZZ_RUN_replication := $(FUZZ_REPLICATION_BIN) -max_len=4096 -artifact_prefix=$(FUZZ_BUILD)/replication- \
	$(FUZZ_BUILD)/corpus-replication Fuzz/replication-seeds
FUZZ_RUN_engine := SWIFT_BACKTRACE=enable=no $(FUZZ_ENGINE_BIN) -max_len=16384 -artifact_prefix=$(FUZZ_BUILD)/engine- \
	$(FUZZ_BUILD)/corpus-engine Fuzz/engine-seeds
FUZZ_RUN_resp := $(FUZZ_RESP_BIN) -max_len=4096 -artifact_prefix=$(FUZZ_BUILD)/resp- $(FUZZ_BUILD)/corpus-resp Fuzz/resp-seeds
# The service's inputs are played over sockets by up to two clients: a few hundred a second, so
# its dictionary of command names (Fuzz/resp-service.dict) matters more than for the others.
FUZZ_RUN_resp-service := SWIFT_BACKTRACE=enable=no $(FUZZ_SERVICE_BIN) -max_len=4096 -dict=Fuzz/resp-service.dict \
	-artifact_prefix=$(FUZZ_BUILD)/resp-service- $(FUZZ_BUILD)/corpus-resp-service Fuzz/resp-service-seeds
FUZZ_RUN_SECONDS ?= $(FUZZ_SECONDS)
.PHONY: $(addprefix fuzz-run-,$(FUZZ_NAMES))

# One fuzzer for FUZZ_RUN_SECONDS (`make fuzz-run-engine FUZZ_RUN_SECONDS=600`). `make fuzz` builds
# once and passes FUZZ_BUILT=1 to the runs it starts, so the service fuzzer (always handed to
# SwiftPM, which relinks it) is not built a second time.
FUZZ_RUN_NEEDS := $(if $(FUZZ_BUILT),,fuzz-build)
$(addprefix fuzz-run-,$(FUZZ_NAMES)): fuzz-run-%: $(FUZZ_RUN_NEEDS)
	mkdir -p $(foreach name,$(FUZZ_NAMES),$(FUZZ_BUILD)/corpus-$(name)) $(FUZZ_BUILD)/corpus
	$(FUZZ_RUN_$*) -max_total_time=$(FUZZ_RUN_SECONDS) -timeout=10 -print_final_stats=1

# Every fuzzer, as many at once as there are processors (libFuzzer runs on one thread), each
# one's output printed whole when it ends; any failure fails the target.
fuzz: deps fuzz-build
	$(MAKE) -j $(FUZZ_JOBS) --output-sync=target FUZZ_BUILT=1 FUZZ_RUN_SECONDS=$(FUZZ_SECONDS) $(addprefix fuzz-run-,$(FUZZ_NAMES))

# `make fuzz` for FUZZ_SMOKE_SECONDS each.
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS)

