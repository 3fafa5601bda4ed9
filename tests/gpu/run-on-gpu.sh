#!/bin/sh
# run-on-gpu.sh [BUILD]: docs/GPU.md's last step, on the machine with the GPU, from the
# repository root, with BUILD (build-gpu) built on the development machine
# (`meson setup build-gpu -Dcuda=enabled -Dbuildtype=release && ninja -C
# build-gpu`) and .gpu-debs/ downloaded there (docs/GPU.md), both carried
# over.  It:
#   1. unpacks .gpu-debs/*.deb into /tmp/deps (never into /);
#   2. puts /tmp/deps' libraries and the pip packages' cuDNN, cuBLAS, CUDA
#      runtime and NVRTC libraries on LD_LIBRARY_PATH;
#   3. makes BUILD's recorded source path reach this checkout (a symlink when
#      the checkout moved), since meson's test setup names absolute paths;
#   4. prints nvidia-smi and `rnnd --backends`;
#   5. runs `meson test -C BUILD --suite gpu --suite cudasim --no-rebuild` (the
#      cudasim suite checks the real cuDNN against the goldens, as it checks the
#      CPU stand-in in `make test`: tests/cudasim/README.md);
#   6. runs the GPU benchmark (tests/bench/gpu_vs_torch.py).
# Every log goes under $OUT (./gpu-out when OUT is unset).  Exits non-zero
# when a step failed; the later steps still run.
set -u
build=${1:-build-gpu}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/gpu-out}
py=${RNND_BENCH_PYTHON:-python3}
rc=0
mkdir -p "$out"
cd "$root" || exit 1

# 1. Runtime libraries the GPU machine lacks.
mkdir -p /tmp/deps
for f in .gpu-debs/*.deb; do
  [ -e "$f" ] && dpkg -x "$f" /tmp/deps
done

# 2. Library path: the debs, then every folder of the pip NVIDIA packages
#    holding cuDNN, cuBLAS, the CUDA runtime or NVRTC (PERSIST_DYNAMIC).
nvlibs=$("$py" - <<'PY' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
dirs = set()
for base in nvidia.__path__:
    for d, _, files in os.walk(base):
        if any(f.startswith(("libcudnn", "libcublas", "libcudart", "libnvrtc")) and ".so" in f
               for f in files):
            dirs.add(d)
print(":".join(sorted(dirs)))
PY
)
LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/lib/x86_64-linux-gnu${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" > "$out/env.txt"

# 3. The source path BUILD was configured with.
src=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
      "$build/meson-info/meson-info.json" 2>/dev/null)
if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src/meson.build" ]; then
  mkdir -p "$(dirname "$src")" && ln -sfn "$root" "$src" ||
    echo "run-on-gpu.sh: cannot link $src to $root; meson test may not find the sources" >&2
fi

# 4. The machine and what rnnd sees.
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || rc=1
cat "$out/nvidia-smi.txt"
ldd "$build/daemon/rnnd" > "$out/ldd.txt" 2>&1
"$build/daemon/rnnd" --backends > "$out/backends.txt" 2>&1 || rc=1
cat "$out/backends.txt"

# 5. The GPU suites.
meson test -C "$build" --suite gpu --suite cudasim --no-rebuild --print-errorlogs > "$out/meson-test.txt" 2>&1 || rc=1
tail -n 30 "$out/meson-test.txt"
cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null

# 6. The benchmark, in the same run as PyTorch.
RNND_BENCH_COMMAND="sh tests/gpu/run-on-gpu.sh $build" "$py" tests/bench/gpu_vs_torch.py \
  --bench "$build/tests/bench/rnnd-engine-bench" --out "$out/bench.md" ${RNND_GPU_BENCH_ARGS:-} \
  2> "$out/bench.log"
b=$?
[ $b -eq 0 ] || [ $b -eq 77 ] || rc=1
cat "$out/bench.md" 2>/dev/null || tail -n 20 "$out/bench.log"
echo "run-on-gpu.sh: exit $rc; logs in $out"
exit $rc
