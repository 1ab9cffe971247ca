# harp — top-level entry points.  The real build is CMake; this file keeps
# the three commands of the README short:  make / make test / make demo.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all deps test test-fast test-asan test-tsan fuzz demo clean format install

all: deps $(BUILD)/Makefile
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh --if-missing

$(BUILD)/Makefile: CMakeLists.txt | deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

$(ASAN_BUILD)/Makefile: CMakeLists.txt | deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DHARP_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null

# The whole suite, then again under AddressSanitizer + UBSan.
test: test-fast test-asan

test-fast: all
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps $(ASAN_BUILD)/Makefile
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=use_tls=0:print_suppressions=0:suppressions=$(CURDIR)/tests/lsan.supp \
	  ctest --output-on-failure -j $(JOBS)

# The threaded tests (ctest label "threads") under ThreadSanitizer.
$(TSAN_BUILD)/Makefile: CMakeLists.txt | deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DHARP_TSAN=ON $(CMAKE_FLAGS) >/dev/null

test-tsan: deps $(TSAN_BUILD)/Makefile
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target harp test_threads test_tier0_read
	@cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 HARP_THREAD_RUNS=200 \
	  ctest --output-on-failure -L threads

# The libFuzzer targets (clang, ASan + UBSan, CMAKE_FLAGS too), each for
# FUZZ_SECONDS (docs/reliability.md, "Fuzzing").
fuzz: deps
	@CMAKE_FLAGS="$(CMAKE_FLAGS)" scripts/fuzz_inputs.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# libharp.so, harp.h and harp/, harp.pc, the CMake package, the harp CLI
# into $(DESTDIR)$(PREFIX) (docs/c-api.md, "Installing").
install: all
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

demo: all
	@scripts/demo.sh $(BUILD)/harp

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
