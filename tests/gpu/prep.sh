#!/bin/sh
# prep.sh: `make gpu-prep`, the development machine's half of a GPU check
# (docs/GPU.md).  From the repository root it makes the three folders a bare
# GPU machine needs beside the work tree, all git-ignored:
#
#   build-gpu/    release build with the cuDNN backend (sm_80 and sm_90 code,
#                 sm_90 PTX: meson's gpu_arch default), its meson-logs removed;
#   .gpu-debs/    every Debian package whose libraries those binaries load,
#                 but glibc and NVIDIA's (run-on-gpu.sh unpacks one only when
#                 the machine lacks a library it holds);
#   .gpu-wheels/  the meson wheel of the very version that configured
#                 build-gpu (another meson refuses the build directory).
#
# Then it prints what must be carried, its size against the 64 MiB the
# device tool carries, and the command to run there.  Needs the CUDA toolkit
# and cuDNN (/usr/local/cuda or -Dcudatoolkit_root), apt (Debian's mirror)
# and pip (PyPI).  RNND_GPU_BUILD names another build folder.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${RNND_GPU_BUILD:-build-gpu}
debs=.gpu-debs
wheels=.gpu-wheels
limit_mib=64

say() { echo "gpu-prep: $*"; }
die() { echo "gpu-prep: $*" >&2; exit 1; }

# 1. The build.  An existing folder is reconfigured, so the options stay these.
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" -Dcuda=enabled -Dbuildtype=release -Dtests=true >/dev/null
else
  meson setup "$build" -Dcuda=enabled -Dbuildtype=release -Dtests=true >/dev/null
fi
ninja -C "$build" >/dev/null || die "ninja -C $build failed"
rm -rf "$build/meson-logs"
meson_version=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["meson_version"]["full"])' "$build/meson-info/meson-info.json")

# 2. The binaries a GPU check runs: the GPU and cudasim suites' programs, the
#    daemon and the load client the Python suites start, the engine benchmark.
bins=$(python3 tests/gpu/run_on_gpu.py --binaries "$build")
for b in $bins; do [ -x "$b" ] || die "$b was not built"; done
# Only those travel: the build's other programs (the unit suites, the other
# benchmarks: 11 MiB of the 64 the device tool carries) are removed from it.
# The GPU machine runs `meson test --no-rebuild` on its suites alone, and the
# next build here makes them again.
python3 - "$build" $bins <<'PY' || die "could not prune $build"
import os, sys
build, keep = sys.argv[1], {os.path.realpath(b) for b in sys.argv[2:]}
for d, _, files in os.walk(build):
    for f in files:
        p = os.path.join(d, f)
        if os.path.islink(p) or not os.access(p, os.X_OK) or os.path.realpath(p) in keep:
            continue
        with open(p, "rb") as fh:
            elf = fh.read(4) == b"\x7fELF"
        if elf and ".so" not in f:
            os.unlink(p)
PY

# 3. The Debian packages that hold their libraries (ldd here, dpkg -S), less
#    glibc, which the GPU machine has newer, and the CUDA libraries, which
#    come from its pip packages.
owner() {
  for p in "$1" "$(readlink -f "$1")"; do
    for q in "$p" "/usr$p" "${p#/usr}"; do
      o=$(dpkg -S "$q" 2>/dev/null | head -n 1)
      [ -n "$o" ] && { echo "${o%%:*}"; return; }
    done
  done
}
pkgs=""
for lib in $(for b in $bins; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
  case $(basename "$lib") in libcud* | libcublas* | libnvrtc*) continue ;; esac
  o=$(owner "$lib")
  [ -n "$o" ] || die "no Debian package holds $lib (ldd of the GPU binaries)"
  [ "$o" = libc6 ] || pkgs="$pkgs $o"
done
pkgs=$(echo $pkgs | tr ' ' '\n' | sort -u | tr '\n' ' ')
rm -rf "$debs" && mkdir -p "$debs"
# shellcheck disable=SC2086
(cd "$debs" && apt-get download -q $pkgs >/dev/null 2>&1) ||
  { apt-get update -qq >/dev/null 2>&1 && (cd "$debs" && apt-get download -q $pkgs >/dev/null); } ||
  die "apt-get download failed for:$pkgs"

# 4. The meson wheel of build-gpu's version (pure Python, any interpreter).
pip=""
for py in python3 "$root/.venv-test/bin/python"; do
  "$py" -m pip --version >/dev/null 2>&1 && { pip="$py -m pip"; break; }
done
[ -n "$pip" ] || die "no pip to download meson $meson_version's wheel with"
rm -rf "$wheels" && mkdir -p "$wheels"
$pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$wheels" "meson==$meson_version" >/dev/null || die "pip download meson==$meson_version failed"

# 5. What travels: the work tree as git sees it (tracked and untracked files
#    that are not ignored) plus the three folders.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
carry=$(du -cb "$build" "$debs" "$wheels" | tail -n 1 | cut -f1)
total=$((tree + carry))
mib() { echo "$1" | awk '{ printf "%.1f", $1 / 1048576 }'; }
say "meson $meson_version; $(ls "$debs" | wc -l) packages in $debs:$(echo " $pkgs" | sed 's/ / /g')"
say "carry: $build $(mib "$(du -sb "$build" | cut -f1)") MiB, $debs $(mib "$(du -sb "$debs" | cut -f1)") MiB," \
    "$wheels $(mib "$(du -sb "$wheels" | cut -f1)") MiB; with the work tree $(mib $total) MiB of $limit_mib"
[ "$total" -lt $((limit_mib * 1048576 * 3 / 4)) ] ||
  die "$(mib $total) MiB is too close to the device tool's $limit_mib MiB"
cat <<EOF
gpu-prep: ready.  On the GPU machine, from the repository root, one command:

    sh tests/gpu/run-on-gpu.sh $build

  (the device tool: run with command "sh tests/gpu/run-on-gpu.sh $build",
   carry ["$build", "$debs", "$wheels"], timeout_s 540; then give_back).
  Results come back under \$OUT: summary.txt first (docs/GPU.md says how to read them).
EOF
