#!/bin/sh
# run.sh BUILD [ARGS...]: what `make bench` runs (DESIGN.md §9).  Makes sure a
# Python with torch, numpy and safetensors is at hand, builds BUILD, and runs
# tests/bench/engine_vs_torch.py on BUILD's rnnd-engine-bench; ARGS (--quick,
# --seconds S, --rounds R, --out FILE, --cells C,..., --batches B,...,
# --threads N,...) go to the script.  Then tests/bench/engine_vs_ort.py: the
# engine against ONNX Runtime and PyTorch over its matrix of shapes (--quick
# alone is passed on).  Then it runs
# tests/bench/load_bench.py: rnnd under rnnd-load for every scenario of
# tests/bench/scenarios.json (--quick makes it short too).  Stdout is the
# markdown report, everything else goes to stderr.  RNND_BENCH=load runs the
# load part only (`make bench-load`); RNND_BENCH=engine the engine part only;
# RNND_BENCH=json only rnnd-json-bench (`make bench-json`: a KServe request's
# JSON parse and render on the demo model), which `make bench` runs first.
# RNND_BENCH=server runs tests/bench/server_bench.py alone (`make bench-server`:
# rnnd against MLServer on the same model, in a venv of its own).  Last,
# tests/bench/grpc_bench.py: gRPC against HTTP under Triton's perf_analyzer and
# h2load (system python3; tests/interop/tools.sh fetches perf_analyzer, the
# Makefile installs h2load's Debian package, nghttp2-client);
# RNND_BENCH=grpc runs it alone (`make bench-grpc`).
# tests/bench/http_bench.sh (wrk and nginx) runs on its own.
#
# Both parts also write their results as JSON to BUILD/bench-results/, and
# tests/bench/plots.py draws from them the PNGs of docs/BENCHMARKS.md into
# docs/bench/ (RNND_BENCH_PLOTS=DIR elsewhere, =none not at all); it needs
# matplotlib, which the venv gets beside torch.
#
# The Python is $RNND_BENCH_PYTHON when set, else .venv-bench/bin/python at
# the repository root, created with `python3 -m venv` and `pip install torch
# numpy safetensors matplotlib onnx onnxruntime` when it cannot import torch (a
# download of a few GB).
set -eu
build=${1:-build}
if [ $# -gt 0 ]; then shift; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
part=${RNND_BENCH:-all}
results=$build/bench-results
plots=${RNND_BENCH_PLOTS:-$root/docs/bench}
mkdir -p "$results"

# plot PY: the PNGs from what this run measured, when PY has matplotlib.
plot() {
  [ "$plots" = none ] && return 0
  if [ -n "$1" ] && "$1" -c 'import matplotlib' 2>/dev/null; then
    "$1" "$root/tests/bench/plots.py" "$results" "$plots" >&2
  else
    echo "run.sh: no python with matplotlib: no plots (RNND_BENCH_PYTHON, or .venv-bench)" >&2
  fi
}

# stdlib_bench SCRIPT NAME [ARGS...]: tests/bench/SCRIPT on BUILD with system
# python3 (standard library only), --quick passed on, JSON to $results/NAME.json.
stdlib_bench() {
  script=$1 name=$2
  shift 2
  quick=""
  for a in "$@"; do [ "$a" = --quick ] && quick=--quick; done
  [ -f "$build/build.ninja" ] || meson setup "$build" >&2
  ninja -C "$build" >&2
  python3 "$root/tests/bench/$script" --build "$build" $quick --json "$results/$name.json"
}
# The load part (load_bench.py).
load_bench() {
  stdlib_bench load_bench.py load "$@"
}
if [ "$part" = load ]; then
  rm -f "$results/engine.json" "$results/ort.json"
  load_bench "$@" || exit
  plot "${RNND_BENCH_PYTHON:-$root/.venv-bench/bin/python}"
  exit
fi
json_bench() {
  [ -f "$build/build.ninja" ] || meson setup "$build" >&2
  ninja -C "$build" >&2
  (cd "$root" && "$build/tests/bench/rnnd-json-bench" config/models digits_lstm)
}
if [ "$part" = json ]; then
  json_bench
  exit
fi
# gRPC against HTTP (grpc_bench.py).
grpc_bench() {
  stdlib_bench grpc_bench.py grpc "$@"
}
if [ "$part" = grpc ]; then
  grpc_bench "$@"
  exit
fi
# rnnd against MLServer (`make bench-server`, not in `make bench`): its own venv,
# .venv-mlserver (mlserver, onnxruntime, onnx, matplotlib; uvloop < 0.22, which
# MLServer 1.7's workers need), made the first time.
if [ "$part" = server ]; then
  mv=$root/.venv-mlserver
  if ! "$mv/bin/python" -c 'import mlserver, onnxruntime, onnx, matplotlib' 2>/dev/null; then
    echo "run.sh: installing mlserver, onnxruntime, onnx and matplotlib into $mv" >&2
    [ -x "$mv/bin/python" ] || python3 -m venv "$mv"
    "$mv/bin/python" -m pip install mlserver onnxruntime onnx matplotlib 'uvloop<0.22' >&2
  fi
  [ -f "$build/build.ninja" ] || meson setup "$build" >&2
  ninja -C "$build" >&2
  "$mv/bin/python" "$root/tests/bench/server_bench.py" --build "$build" \
    --mlserver "$mv/bin/mlserver" --json "$results/server.json" "$@"
  plot "$mv/bin/python"
  exit
fi
if [ "$part" = all ]; then
  json_bench
  echo
fi

if [ -n "${RNND_BENCH_PYTHON:-}" ]; then
  py=$RNND_BENCH_PYTHON
  if ! "$py" -c 'import torch, numpy, safetensors, onnx, onnxruntime' 2>/dev/null; then
    echo "run.sh: RNND_BENCH_PYTHON=$py cannot import torch, numpy, safetensors, onnx and onnxruntime" >&2
    exit 1
  fi
else
  venv=$root/.venv-bench
  py=$venv/bin/python
  if ! "$py" -c 'import torch' 2>/dev/null; then
    if [ ! -x "$py" ]; then
      echo "run.sh: creating $venv (python3 -m venv)" >&2
      python3 -m venv "$venv"
    fi
    echo "run.sh: installing torch, numpy, safetensors, matplotlib, onnx and onnxruntime into $venv (a large download)" >&2
    "$py" -m pip install torch numpy safetensors matplotlib onnx onnxruntime >&2
  fi
  if ! "$py" -c 'import numpy, safetensors, matplotlib, onnx, onnxruntime' 2>/dev/null; then
    echo "run.sh: installing numpy, safetensors, matplotlib, onnx and onnxruntime into $venv" >&2
    "$py" -m pip install numpy safetensors matplotlib onnx onnxruntime >&2
  fi
fi

[ -f "$build/build.ninja" ] || meson setup "$build" >&2
ninja -C "$build" >&2

RNND_BENCH_COMMAND="sh tests/bench/run.sh $build${*:+ $*}"
export RNND_BENCH_COMMAND
rm -f "$results/engine.json" "$results/ort.json" "$results/load.json"
"$py" "$root/tests/bench/engine_vs_torch.py" \
  --bench "$build/tests/bench/rnnd-engine-bench" --json "$results/engine.json" "$@"
echo
quick=""
for a in "$@"; do [ "$a" = --quick ] && quick=--quick; done
"$py" "$root/tests/bench/engine_vs_ort.py" \
  --bench "$build/tests/bench/rnnd-engine-bench" --json "$results/ort.json" $quick
if [ "$part" = engine ]; then
  plot "$py"
  exit 0
fi
echo
load_bench "$@"
plot "$py"
echo
grpc_bench "$@"
