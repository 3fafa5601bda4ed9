#!/bin/sh
# run.sh MODE OUT [SECONDS]: builds the libFuzzer harnesses of tests/fuzz with
# clang (address + undefined sanitizers) into OUT and runs each for SECONDS
# (docs/TESTING.md).
#
#   smoke  (make test; meson's fuzz suite): each harness over its seeds plus
#          new inputs for SECONDS (default 3), in a scratch corpus under OUT
#   fuzz   (make fuzz): each for SECONDS (default 120, $FUZZ_SECONDS), the
#          corpus kept in OUT/corpus/NAME between runs
#   cover  (make fuzz-cover): each over the seeds and OUT/corpus/NAME once,
#          built with clang's source coverage; prints llvm-cov's line and
#          branch coverage of the files the harnesses reach
#
# Exits 77 (skip) with the reason when clang or its libFuzzer runtime is
# missing, 1 when a harness finds a crash, leak or sanitizer report (the
# input is left in OUT/findings), 0 otherwise.  Prints one line per harness:
# executions, execs/s, edges covered (cov), features (ft) and corpus size.
set -u
mode=${1:?usage: run.sh smoke|fuzz OUT [SECONDS]}
out=${2:?usage: run.sh smoke|fuzz OUT [SECONDS]}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
case $mode in
smoke) secs=${3:-3} ;;
fuzz) secs=${3:-${FUZZ_SECONDS:-120}} ;;
cover) secs=0 ;;
*) echo "run.sh: unknown mode $mode" >&2; exit 2 ;;
esac
harnesses="kserve kserve_binary tfs modelcfg repo safetensors"

CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
  for c in clang clang-16 clang-15 clang-14; do
    command -v $c >/dev/null 2>&1 && { CLANG=$c; break; }
  done
fi
if [ -z "$CLANG" ]; then
  echo "SKIP: no clang (Debian: apt-get install clang libclang-rt-14-dev; make deps-fuzz)"
  exit 77
fi
mkdir -p "$out/obj" "$out/findings" || exit 1
# UBSan recovers so that ubsan.supp can silence a known report;
# halt_on_error below still stops on every other.
san="-fsanitize=address,undefined"
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
     $CLANG -x c - -fsanitize=fuzzer $san -o "$out/probe" >"$out/probe.log" 2>&1; then
  echo "SKIP: $CLANG cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-14-dev):"
  tail -2 "$out/probe.log"
  exit 77
fi
if ! pkg-config --exists jansson; then
  echo "SKIP: no jansson (pkg-config)"; exit 77
fi

# Build: proto/ and engine's safetensors reader and weight import, then each
# harness; a file is rebuilt when its source or a header is newer.
cflags="-std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer $san -Wall -Wextra -Werror
        -I$src/proto -I$src/engine -I$here $(pkg-config --cflags jansson)"
libs="$(pkg-config --libs jansson) -lm"
newest_h=$(ls -t "$src"/proto/*.h "$src"/engine/*.h "$here"/*.h | head -1)
objs=""
for f in "$src"/proto/*.c "$src"/engine/stfile.c "$src"/engine/model.c; do
  o="$out/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
    # shellcheck disable=SC2086
    $CLANG $cflags -fsanitize=fuzzer-no-link -c "$f" -o "$o" || exit 1
  fi
  objs="$objs $o"
done
for h in $harnesses; do
  b="$out/fuzz_$h"
  newest=$(ls -t "$here/fuzz_$h.c" $objs | head -1)
  if [ ! -x "$b" ] || [ "$newest" -nt "$b" ] || [ "$newest_h" -nt "$b" ]; then
    # shellcheck disable=SC2086
    $CLANG $cflags -fsanitize=fuzzer "$here/fuzz_$h.c" $objs $libs -o "$b" || exit 1
  fi
done

if [ "$mode" = cover ]; then
  for t in llvm-profdata llvm-cov; do
    command -v $t >/dev/null 2>&1 || { echo "SKIP: no $t (Debian: apt-get install llvm)"; exit 77; }
  done
  mkdir -p "$out/cov" && rm -f "$out/cov"/*.profraw
  covflags="-std=gnu11 -D_GNU_SOURCE -O1 -fprofile-instr-generate -fcoverage-mapping
            -I$src/proto -I$src/engine -I$here $(pkg-config --cflags jansson)"
  files=""
  for f in "$src"/proto/*.c "$src"/engine/stfile.c "$src"/engine/model.c; do files="$files $f"; done
  for h in $harnesses; do
    # shellcheck disable=SC2086
    $CLANG $covflags -fsanitize=fuzzer "$here/fuzz_$h.c" $files $libs -o "$out/cov/fuzz_$h" || exit 1
    mkdir -p "$out/corpus/$h"
    LLVM_PROFILE_FILE="$out/cov/$h.profraw" "$out/cov/fuzz_$h" -runs=0 \
      "$out/corpus/$h" "$here/corpus/$h" >"$out/cov/$h.log" 2>&1
  done
  llvm-profdata merge -sparse "$out/cov"/*.profraw -o "$out/cov/all.profdata" || exit 1
  objs_args=""
  for h in $harnesses; do
    objs_args="$objs_args${objs_args:+ -object} $out/cov/fuzz_$h"
  done
  # shellcheck disable=SC2086
  llvm-cov report $objs_args -instr-profile="$out/cov/all.profdata" \
    "$src/proto/infer.c" "$src/proto/modelcfg.c" "$src/proto/safetensors.c" "$src/proto/reporeq.c" \
    "$src/proto/json.c" "$src/proto/tensor.c" "$src/engine/stfile.c" "$src/engine/model.c" |
    sed "s|$src/||"
  exit 0
fi

# Run.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$here/ubsan.supp"
rc=0
printf '%-14s %10s %8s %6s %6s %7s\n' harness execs exec/s cov ft corpus
for h in $harnesses; do
  if [ "$mode" = smoke ]; then
    corpus="$out/scratch/$h"; rm -rf "$corpus"
  else
    corpus="$out/corpus/$h"
  fi
  mkdir -p "$corpus"
  log="$out/fuzz_$h.log"
  "$out/fuzz_$h" "$corpus" "$here/corpus/$h" -dict="$here/json.dict" \
    -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$out/findings/${h}-" \
    >"$log" 2>&1
  r=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
  cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  n=$(find "$corpus" -type f | wc -l)
  printf '%-14s %10s %8s %6s %6s %7s\n' "$h" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$n"
  if [ $r -ne 0 ]; then
    echo "FINDING in fuzz_$h (exit $r); log $log, input in $out/findings:"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|^Base64:' "$log" | head -6 | cut -c1-400
    rc=1
  fi
done
exit $rc
