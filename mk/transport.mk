# Transport targets (DecideUV). Included by the main Makefile, which defines `deps`.
#   make test-transport-asan   DecideUV tests under AddressSanitizer (+ LeakSanitizer)
#   make fuzz                  libFuzzer on the frame decoder + handshake parser, FUZZ_SECONDS long
#   make fuzz-smoke            the same for ~30 s (part of `make test`)
#   make bench-transport       release build, then `DecideBench transport`

FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 30
FUZZ_BUILD := .build-fuzz
FUZZ_BIN := $(FUZZ_BUILD)/fuzz-transport
FUZZ_SOURCES := Fuzz/FuzzTransport.swift \
	Sources/DecideUV/WireProtocol.swift \
	Sources/DecideUV/FrameDecoder.swift \
	Sources/DecideUV/HandshakeMessage.swift

.PHONY: fuzz fuzz-smoke fuzz-build test-transport-asan bench-transport

# The replication layer's decoders (DecideCore: ReplicationCodec, WireCodec) get their own target.
FUZZ_REPLICATION_BIN := $(FUZZ_BUILD)/fuzz-replication
FUZZ_REPLICATION_SOURCES := Fuzz/FuzzReplication.swift $(wildcard Sources/DecideCore/*.swift)

$(FUZZ_REPLICATION_BIN): $(FUZZ_REPLICATION_SOURCES)
	mkdir -p $(FUZZ_BUILD)
	swiftc -O -g -sanitize=fuzzer,address -use-ld=lld -parse-as-library -package-name decide \
		$(FUZZ_REPLICATION_SOURCES) -o $(FUZZ_REPLICATION_BIN)

$(FUZZ_BIN): $(FUZZ_SOURCES)
	mkdir -p $(FUZZ_BUILD)
	swiftc -O -g -sanitize=fuzzer,address -use-ld=lld -parse-as-library -package-name decide \
		$(FUZZ_SOURCES) -o $(FUZZ_BIN)

fuzz-build: $(FUZZ_BIN) $(FUZZ_REPLICATION_BIN)

# The corpus lives in $(FUZZ_BUILD)/corpus (git-ignored); Fuzz/seeds holds the committed seeds.
fuzz: deps $(FUZZ_BIN) $(FUZZ_REPLICATION_BIN)
	mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/corpus-replication
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-artifact_prefix=$(FUZZ_BUILD)/ $(FUZZ_BUILD)/corpus Fuzz/seeds
	$(FUZZ_REPLICATION_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-artifact_prefix=$(FUZZ_BUILD)/replication- $(FUZZ_BUILD)/corpus-replication Fuzz/replication-seeds

fuzz-smoke: $(FUZZ_BIN) $(FUZZ_REPLICATION_BIN)
	mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/corpus-replication
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SMOKE_SECONDS) -max_len=4096 -timeout=10 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_BUILD)/ $(FUZZ_BUILD)/corpus Fuzz/seeds
	$(FUZZ_REPLICATION_BIN) -max_total_time=$(FUZZ_SMOKE_SECONDS) -max_len=4096 -timeout=10 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_BUILD)/replication- $(FUZZ_BUILD)/corpus-replication Fuzz/replication-seeds

test-transport-asan: deps
	swift test --sanitize=address --build-path .build-asan --disable-xctest --filter DecideUVTests

bench-transport: deps
	swift build -c release --build-path .build-bench --product DecideBench
	.build-bench/release/DecideBench transport
