# Convenience front end over CMake. `make` builds build/bin/tern; `make test` runs the suite;
# `make test-asan` runs the same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
JOBS ?= $(shell nproc)

.PHONY: all build test test-asan demo demo-gate clean
all: build

build:
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j $(JOBS)

test: build
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

demo: build
	@sh scripts/demo.sh

demo-gate: build
	@sh scripts/demo-gate.sh

clean:
	rm -rf build build-asan
