# rnnd: a thin wrapper over meson (DESIGN.md §1).  Every target first makes
# sure the Debian packages it needs are installed, then builds.
#
#   make run     build and serve config/models on 127.0.0.1:8000
#   make test    build, run every suite (plus address and thread sanitizer
#                builds, and the GPU suites on the CPU stand-in of
#                tests/cudasim), print a summary
#   make bench   build and run the benchmarks (tests/bench)
#   make bench-load  only rnnd under rnnd-load (tests/bench/scenarios.json)
#   make bench-json  only a KServe request's JSON parse and render (rnnd-json-bench)
#   make bench-server  rnnd against MLServer on the same model (tests/bench/server_bench.py)
#   make bench-grpc  gRPC against HTTP under perf_analyzer and h2load (tests/bench/grpc_bench.py)
#   make bench-step  the CPU step kernel of BASE (HEAD) and the working tree,
#                alternated in one process (tests/bench/step_ab.py)
#   make fuzz    each libFuzzer harness of tests/fuzz for FUZZ_SECONDS (120)
#   make fuzz-cover  line and branch coverage of make fuzz's corpus
#   make gpu-prep  build-gpu, .gpu-debs and .gpu-wheels for a GPU check on a
#                bare GPU machine, and the one command to run there (docs/GPU.md)
#   make soak    the daemon under load, reloads, file swaps and SIGKILLs for
#                SOAK_SECONDS (600); not part of make test (tests/soak)

BUILD      ?= build
ASAN_BUILD ?= build-asan
SIM_BUILD  ?= build-sim
TSAN_BUILD ?= build-tsan
MESON_ARGS ?=

DEB_PKGS = gcc g++ libc6-dev make meson ninja-build pkg-config check libsubunit-dev \
           libjansson-dev libopenblas-dev python3 python3-venv \
           libuv1-dev libmicrohttpd-dev libsystemd-dev libcurl4-openssl-dev \
           libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev \
           nginx-light debootstrap

# make bench and make bench-grpc also drive rnnd with h2load (nghttp2's HTTP/1.1 and
# HTTP/2 load client) beside perf_analyzer.
BENCH_PKGS = nghttp2-client

# make fuzz also needs clang and its libFuzzer runtime (make test's fuzz
# smoke runs when they are there and skips when not).
FUZZ_PKGS = clang libclang-rt-14-dev
FUZZ_SECONDS ?= 120
SOAK_SECONDS ?= 600

.PHONY: all deps deps-fuzz install-debs build run test bench bench-load bench-json bench-server bench-grpc bench-step fuzz fuzz-cover soak gpu-prep clean format

all: build

deps:
	@$(MAKE) -s install-debs PKGS="$(DEB_PKGS)"

deps-fuzz:
	@$(MAKE) -s install-debs PKGS="$(FUZZ_PKGS)"

install-debs:
	@missing=""; \
	for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "rnnd needs these Debian packages; run:"; \
	    echo "  sudo apt-get install$$missing"; \
	    exit 1; \
	  fi; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_ARGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# make run builds what it runs (and rnnd-load, for the README's examples), not the
# test binaries that `make build` and `make test` build too.
run: deps $(BUILD)/build.ninja
	ninja -C $(BUILD) daemon/rnnd clients/rnnd-load
	@echo "Serving config/models on 127.0.0.1:8000 (Ctrl-C stops).  Try, from another shell:"
	@echo "  curl -s localhost:8000/v2/models/digits_lstm/infer -d @config/models/digits_lstm/example.json"
	@echo "  (the first held-out image, a 7: the 8th of the 10 scores is the largest)"
	@echo "  curl -s localhost:8000/v2/models/digits_lstm/stats; curl -s localhost:8000/metrics"
	$(BUILD)/daemon/rnnd --config config/rnnd.conf

test: deps
	@sh tests/run.sh $(BUILD) $(ASAN_BUILD) $(SIM_BUILD) $(TSAN_BUILD)

bench: build
	@$(MAKE) -s install-debs PKGS="$(BENCH_PKGS)"
	@sh tests/bench/run.sh $(BUILD)

bench-load: build
	@RNND_BENCH=load sh tests/bench/run.sh $(BUILD)

bench-json: build
	@RNND_BENCH=json sh tests/bench/run.sh $(BUILD)

bench-server: build
	@RNND_BENCH=server sh tests/bench/run.sh $(BUILD)

bench-grpc: build
	@$(MAKE) -s install-debs PKGS="$(BENCH_PKGS)"
	@RNND_BENCH=grpc sh tests/bench/run.sh $(BUILD)

BASE ?= HEAD
bench-step: deps
	@python3 tests/bench/step_ab.py --base $(BASE)

fuzz: deps deps-fuzz
	@sh tests/fuzz/run.sh fuzz $(BUILD)/fuzz $(FUZZ_SECONDS)

fuzz-cover: deps deps-fuzz
	@sh tests/fuzz/run.sh cover $(BUILD)/fuzz

gpu-prep: deps
	@sh tests/gpu/prep.sh

soak: build
	@python3 tests/soak/soak.py --build $(BUILD) --seconds $(SOAK_SECONDS)

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
