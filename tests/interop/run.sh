#!/bin/sh
# run.sh TEST.py [ARGS]: runs an interop test with the venv python that has
# tritonclient[http], numpy and prometheus_client (made by tests/run.sh at
# $RNND_SRC/.venv-test), resolved at run time.  Without that venv it exits 77, which meson reads as SKIP.
src=${RNND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
py="$src/.venv-test/bin/python"
if [ ! -x "$py" ]; then
  echo "SKIP: $py is missing; tests/run.sh (make test) makes it with tritonclient[http], numpy and prometheus_client"
  exit 77
fi
exec "$py" "$@"
