# Thin wrapper over CMake. `make run` and `make test` are the two commands in the README.
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX  ?= /usr/local
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DSAGA_WERROR=ON
endif
MAKEFLAGS += --no-print-directory
SAGA    := $(BUILD)/bin/saga
DATA    := datasets/generated

.PHONY: all deps configure build run test test-gpu test-cudasim bench install asan fuzz format clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The main job on the embedded default: a citation data set saga generates deterministically under
# datasets/, a GCN trained on it, PageRank on its graph.
run: build
	@scripts/run-default $(SAGA) $(DATA)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-gpu: build
	@cd $(BUILD) && ctest --output-on-failure -L gpu

# The CUDA backend on the CUDA simulator (part of `make test` too): docs/cudasim.md.
test-cudasim: build
	@cd $(BUILD) && ctest --output-on-failure -L cudasim

bench: build
	@bench/run-all $(BUILD)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer (without the CUDA module and
# without the CUDA simulator, whose fibers switch stacks behind the sanitizer's back).
asan: deps
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DSAGA_SANITIZE=ON -DSAGA_CUDA=OFF \
	    -DSAGA_CUDASIM=OFF \
	    $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD)-asan -j$(JOBS)
	@cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j$(JOBS)

fuzz: deps
	@CC=clang cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSAGA_FUZZ=ON \
	    -DSAGA_CUDA=OFF -DSAGA_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD)-fuzz -j$(JOBS)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cpp')

clean:
	@rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz
