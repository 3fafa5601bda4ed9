#!/bin/sh
# run.sh TEST.py: runs the rnnd-convert test with the venv python that tests/run.sh makes
# ($RNND_SRC/.venv-test: numpy, safetensors, h5py, onnx and clients/rnnd-convert installed
# editable), resolved at run time.  Without those it exits 77, which meson reads as SKIP.
src=${RNND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
py="$src/.venv-test/bin/python"
if ! "$py" -c 'import numpy, safetensors, h5py, onnx, rnnd_convert' >/dev/null 2>&1; then
  echo "SKIP: $py lacks numpy, safetensors, h5py, onnx or rnnd_convert; tests/run.sh (make test) installs them"
  exit 77
fi
exec "$py" "$@"
