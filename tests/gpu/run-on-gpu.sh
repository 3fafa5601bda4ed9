#!/bin/sh
# run-on-gpu.sh [BUILD]: the one command of a GPU check (docs/GPU.md), run on
# the GPU machine from the repository root with BUILD (build-gpu), .gpu-debs
# and .gpu-wheels carried from the development machine, where `make
# gpu-prep` made them.  Everything but finding Python is tests/gpu/run_on_gpu.py
# (what it does, its limits and its results are in its docstring); results
# go under $OUT (./gpu-out when OUT is unset), summary.txt first.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
for py in "${RNND_GPU_PYTHON:-}" python3 python; do
  [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && exec "$py" "$root/tests/gpu/run_on_gpu.py" "$@"
done
out=${OUT:-$root/gpu-out}
mkdir -p "$out" && echo "run-on-gpu: FAILED: no python3 on this machine" | tee "$out/summary.txt" >&2
exit 1
