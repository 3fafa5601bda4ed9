#!/bin/sh
# run.sh BUILD ASAN_BUILD SIM_BUILD [TSAN_BUILD]: what `make test` does.  Builds
# and runs every suite in BUILD, then every suite again (but the lint) in an
# address+undefined sanitizer build, then the daemon's own unit suites and the
# integration suites in a ThreadSanitizer build (where the compiler can make
# one), then the GPU and cudasim suites in SIM_BUILD, where the cuDNN backend
# runs on the CPU stand-in for CUDA (-Dcuda=sim, tests/cudasim/README.md; it
# needs the CUDA and cuDNN headers), and ends with one line
# "N passed, N failed, N skipped" over all four.
set -u
build=${1:-build}
asan=${2:-build-asan}
sim=${3:-build-sim}
tsan=${4:-build-tsan}
rc=0

# The interop suite (tests/interop) needs tritonclient[http,grpc], numpy,
# prometheus_client, grpcio-tools and grpcio-health-checking (the gRPC suite),
# the hostile suite's gRPC part h2 (HTTP/2 frames of its own), and the convert
# suite (tests/convert) safetensors, h5py, onnx and clients/rnnd-convert
# (installed editable, so the test runs the
# repository's code): a venv at .venv-test, made or completed here when they do
# not import.  Without PyPI those suites SKIP (77) rather than fail.
# (perf_analyzer and promtool are fetched by tests/interop/tools.sh.)  The
# kubernetes suite needs kubernetes-validate and the kserve wheel, installed
# without its dependencies (only its models' source is read), both pinned.
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv-test
imports='import tritonclient.http, tritonclient.grpc, grpc_tools, grpc_health, h2, numpy, prometheus_client'
imports="$imports, safetensors, h5py, onnx, rnnd_convert"
imports="$imports, kubernetes_validate; import importlib.util as u; assert u.find_spec('kserve')"
pip_install() {
  "$venv/bin/pip" install -q --disable-pip-version-check --retries 2 --timeout 20 "$@" >/dev/null 2>&1
}
if ! "$venv/bin/python" -c "$imports" >/dev/null 2>&1; then
  echo "making .venv-test with tritonclient[http,grpc], grpcio-tools, grpcio-health-checking, h2," \
       "numpy, prometheus_client, safetensors, h5py, onnx, clients/rnnd-convert," \
       "kubernetes-validate and kserve (pip) for the interop, hostile, convert and kubernetes suites"
  if ! { [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >/dev/null; } ||
     ! pip_install 'tritonclient[http,grpc]' grpcio-tools grpcio-health-checking h2 numpy \
       prometheus_client safetensors h5py onnx \
       kubernetes-validate==1.37.0 -e "$root/clients/rnnd-convert" ||
     ! pip_install --no-deps kserve==0.21.0 ||
     ! "$venv/bin/python" -c "$imports" >/dev/null 2>&1; then
    echo "WARNING: could not install them into .venv-test (no network?);" \
         "the interop, convert and kubernetes suites will SKIP"
  fi
fi

[ -f "$build/build.ninja" ] || meson setup "$build" || exit 1
ninja -C "$build" || exit 1
meson test -C "$build" --print-errorlogs --num-processes 2 || rc=1

[ -f "$asan/build.ninja" ] ||
  meson setup "$asan" -Db_sanitize=address,undefined -Dbuildtype=debug -Db_lundef=false || exit 1
ninja -C "$asan" || exit 1
# (The fuzz suite builds its own sanitized clang binaries, the container
# suite its own release build and the GPU dry run build-gpu: once is enough.)
# Sanitized code runs a few times slower: Check's own per-test timeouts are
# scaled as meson's are.
CK_TIMEOUT_MULTIPLIER=4 meson test -C "$asan" --print-errorlogs --num-processes 2 --no-suite lint --no-suite fuzz --no-suite container \
  --no-suite gpu_dryrun \
  --timeout-multiplier 4 || rc=1

logs="$build/meson-logs/testlog.json $asan/meson-logs/testlog.json"

# ThreadSanitizer, where the compiler can build and run a program with it: the
# daemon's unit suites (and the pool's), the integration suites and the gRPC
# suites (whose answers the pool's workers pack and post to the loop), each
# stopping at the first report (TSAN_OPTIONS in tests/meson.build).  The other
# unit suites have no threads of their own and would only run slower.
probe=$(mktemp -d)
if printf 'int main(void){return 0;}\n' | cc -fsanitize=thread -x c - -o "$probe/t" 2>/dev/null &&
   "$probe/t"; then
  [ -f "$tsan/build.ninja" ] ||
    meson setup "$tsan" -Db_sanitize=thread -Dbuildtype=debug -Db_lundef=false || exit 1
  ninja -C "$tsan" || exit 1
  meson test -C "$tsan" --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
    --logbase testlog-unit options metrics route pool shm || rc=1
  meson test -C "$tsan" --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
    --logbase testlog-integration --suite integration || rc=1
  meson test -C "$tsan" --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
    --logbase testlog-grpc grpc hostile_grpc || rc=1
  logs="$logs $tsan/meson-logs/testlog-unit.json $tsan/meson-logs/testlog-integration.json"
  logs="$logs $tsan/meson-logs/testlog-grpc.json"
else
  echo "WARNING: the compiler cannot build with -fsanitize=thread: no ThreadSanitizer run"
fi
rm -rf "$probe"

# The GPU suites on the stand-in, where NVIDIA's headers are installed.
cuda_inc=/usr/local/cuda/include
if [ -f "$cuda_inc/cudnn.h" ] && [ -f "$cuda_inc/cuda_runtime_api.h" ]; then
  [ -f "$sim/build.ninja" ] || meson setup "$sim" -Dcuda=sim || exit 1
  ninja -C "$sim" || exit 1
  meson test -C "$sim" --print-errorlogs --suite gpu --suite cudasim || rc=1
  logs="$logs $sim/meson-logs/testlog.json"
else
  echo "WARNING: no CUDA/cuDNN headers in $cuda_inc: the GPU suites on the stand-in do not run"
fi

# Count the results of every run from meson's JSON logs.
# shellcheck disable=SC2086
count() { cat $logs | grep -Ec "\"result\": \"($1)\""; }
passed=$(count 'OK|EXPECTEDFAIL')
failed=$(count 'FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS')
skipped=$(count 'SKIP')
# Name what failed, with the last lines of its output, just above the count,
# so that a log's last lines say it (python3 is meson's own interpreter).
failed_tail='
import json, os, sys
for log in sys.argv[1:]:
    if not os.path.exists(log):
        continue
    build = os.path.dirname(os.path.dirname(log))
    for line in open(log, errors="replace"):
        t = json.loads(line)
        if t.get("result") in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"):
            print("%s: %s %s" % (build, t["name"], t["result"]))
            out = ((t.get("stdout") or "") + (t.get("stderr") or "")).strip().splitlines()
            for l in out[-8:]:
                print("    " + l[:200])
'
# shellcheck disable=SC2086
python3 -c "$failed_tail" $logs
[ "$failed" -eq 0 ] || rc=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $rc
