#!/bin/sh
# run.sh BUILD ASAN_BUILD: what `make test` does.  Builds and runs every suite
# in BUILD, then every suite again (but the lint) in an address+undefined
# sanitizer build, and ends with one line "N passed, N failed, N skipped".
set -u
build=${1:-build}
asan=${2:-build-asan}
rc=0

# The interop suite (tests/interop) needs tritonclient[http], numpy and
# prometheus_client: a venv at .venv-test, made or completed here when they do
# not import.  Without PyPI those tests SKIP (77) rather than fail.
# (perf_analyzer and promtool are fetched by tests/interop/tools.sh.)
venv=$(cd "$(dirname "$0")/.." && pwd)/.venv-test
if ! "$venv/bin/python" -c 'import tritonclient.http, numpy, prometheus_client' >/dev/null 2>&1; then
  echo "making .venv-test with tritonclient[http], numpy and prometheus_client (pip) for the interop suite"
  if ! { [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >/dev/null; } ||
     ! "$venv/bin/pip" install -q --disable-pip-version-check --retries 2 --timeout 20 \
       'tritonclient[http]' numpy prometheus_client >/dev/null 2>&1 ||
     ! "$venv/bin/python" -c 'import tritonclient.http, numpy, prometheus_client' >/dev/null 2>&1; then
    echo "WARNING: could not install tritonclient[http], numpy and prometheus_client into .venv-test (no network?);" \
         "the interop suite will SKIP"
  fi
fi

[ -f "$build/build.ninja" ] || meson setup "$build" || exit 1
ninja -C "$build" || exit 1
meson test -C "$build" --print-errorlogs --num-processes 2 || rc=1

[ -f "$asan/build.ninja" ] ||
  meson setup "$asan" -Db_sanitize=address,undefined -Dbuildtype=debug -Db_lundef=false || exit 1
ninja -C "$asan" || exit 1
# (The fuzz suite builds its own sanitized clang binaries: once is enough.)
meson test -C "$asan" --print-errorlogs --num-processes 2 --no-suite lint --no-suite fuzz \
  --timeout-multiplier 4 || rc=1

# Count the results of both runs from meson's JSON log.
count() { cat "$build/meson-logs/testlog.json" "$asan/meson-logs/testlog.json" |
          grep -Ec "\"result\": \"($1)\""; }
passed=$(count 'OK|EXPECTEDFAIL')
failed=$(count 'FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS')
skipped=$(count 'SKIP')
[ "$failed" -eq 0 ] || rc=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $rc
