#!/bin/sh
# tools.sh perf_analyzer|promtool: prints the path of a command that runs
# that tool, unchanged, fetching it once into $RNND_SRC/.interop-tools (ignored
# by git, never committed).  When it cannot be had, prints "SKIP: <reason>"
# and exits 77, which meson reads as SKIP.  Nothing is installed on the host.
#
# perf_analyzer: Triton's, from PyPI's perf-analyzer wheel (the only build on
#   PyPI; `pip install perf-analyzer` on a glibc older than 2.38 gives an empty
#   placeholder).  Its binary needs glibc 2.38 and GLIBCXX_3.4.32; where the
#   host's are older (Debian 12), Debian 13's libc6, libstdc++6, libgcc-s1,
#   libssl3t64 and zlib1g are unpacked (apt-get download with a private apt
#   state, dpkg -x) and the binary runs through their ld-linux-x86-64.so.2
#   --library-path.
# promtool: Prometheus's checker, from Debian 13's promtool package
#   (unpacked the same way; it is a static Go binary).
set -u
tool=${1:-}
src=${RNND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
cache=$src/.interop-tools
PA_VERSION=2.60.0
SUITE=trixie

skip() {
  echo "SKIP: $tool: $*"
  exit 77
}

case "$tool" in
perf_analyzer | promtool) ;;
*)
  echo "usage: tools.sh perf_analyzer|promtool" >&2
  exit 2
  ;;
esac
[ "$(uname -m)" = x86_64 ] || skip "only x86_64 builds are published"
if [ -x "$cache/bin/$tool" ]; then
  echo "$cache/bin/$tool"
  exit 0
fi
mkdir -p "$cache/bin" || skip "cannot create $cache"
# One fetch at a time (meson runs the interop tests in parallel).
exec 9>"$cache/.lock"
command -v flock >/dev/null 2>&1 && flock 9
if [ -x "$cache/bin/$tool" ]; then
  echo "$cache/bin/$tool"
  exit 0
fi
log=$cache/fetch.log
: >"$log"

# debs PKG...: Debian 13's packages, downloaded with a private apt state and
# unpacked into $cache/root.
debs() {
  pkgs=$*
  apt=$cache/apt
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  { command -v apt-get && command -v dpkg; } >/dev/null 2>&1 ||
    skip "apt-get and dpkg are needed to fetch Debian $SUITE's $pkgs"
  [ -r "$keyring" ] || skip "$keyring (debian-archive-keyring) is needed to fetch $pkgs"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$cache/root"
  echo "deb [signed-by=$keyring] http://deb.debian.org/debian $SUITE main" >"$apt/sources.list"
  : >"$apt/status"
  set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$apt/lists" -o Dir::State::Status="$apt/status" \
    -o Dir::Cache="$apt/cache" -o APT::Architecture=amd64 -o APT::Sandbox::User=root
  # The index once (apt-get update answers 0 even when nothing came), and
  # again when a download fails, in case the mirror moved on.
  for try in 1 2; do
    if [ "$try" = 2 ] || ! ls "$apt/lists/"*_Packages* >/dev/null 2>&1; then
      apt-get "$@" update >>"$log" 2>&1
      ls "$apt/lists/"*_Packages* >/dev/null 2>&1 ||
        skip "apt-get update of Debian $SUITE got no index (no network?); see $log"
    fi
    # shellcheck disable=SC2086 # package names, one word each
    (cd "$apt/debs" && apt-get "$@" download $pkgs) >>"$log" 2>&1 && break
    [ "$try" = 2 ] && skip "apt-get download of $pkgs from Debian $SUITE failed; see $log"
  done
  # Only this fetch's packages: unpacking every .deb there again rewrote the ld.so a
  # perf_analyzer run was executing ("Text file busy") when promtool came second.
  for p in $pkgs; do
    for d in "$apt/debs/${p}_"*.deb; do
      dpkg -x "$d" "$cache/root" || skip "dpkg -x $d failed"
    done
  done
}

if [ "$tool" = perf_analyzer ]; then
  py=$src/.venv-test/bin/python
  [ -x "$py" ] || py=python3
  pa=$cache/perf_analyzer-$PA_VERSION
  bin=$pa/perf_analyzer/bin/perf_analyzer
  if [ ! -x "$bin" ]; then
    mkdir -p "$cache/whl"
    "$py" -m pip download -q --disable-pip-version-check --retries 2 --timeout 20 --no-deps \
      --only-binary=:all: --platform manylinux_2_38_x86_64 --python-version 3.11 \
      -d "$cache/whl" "perf-analyzer==$PA_VERSION" >>"$log" 2>&1 ||
      skip "pip download perf-analyzer==$PA_VERSION failed (no network?); see $log"
    rm -rf "$pa"
    "$py" -m zipfile -e "$cache/whl/perf_analyzer-$PA_VERSION-py3-none-manylinux_2_38_x86_64.whl" "$pa" ||
      skip "cannot unpack the perf-analyzer wheel"
    chmod +x "$bin"
  fi
  if "$bin" --version >/dev/null 2>&1; then
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$bin" >"$cache/bin/perf_analyzer"
  else
    debs libc6 libstdc++6 libgcc-s1 libssl3t64 zlib1g
    lib=$cache/root/usr/lib/x86_64-linux-gnu
    "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$bin" --version >>"$log" 2>&1 ||
      skip "perf_analyzer does not run even with Debian $SUITE's libraries; see $log"
    printf '#!/bin/sh\nexec "%s" --library-path "%s" "%s" "$@"\n' \
      "$lib/ld-linux-x86-64.so.2" "$lib" "$bin" >"$cache/bin/perf_analyzer"
  fi
else
  debs promtool
  "$cache/root/usr/bin/promtool" --version >>"$log" 2>&1 || skip "promtool does not run; see $log"
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$cache/root/usr/bin/promtool" >"$cache/bin/promtool"
fi
chmod +x "$cache/bin/$tool"
echo "$cache/bin/$tool"
