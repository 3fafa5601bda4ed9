# common.sh: sourced by the examples.  RNND_URL (http://127.0.0.1:8000) is the
# server, MODEL (digits_lstm) the model; curl prints the answer, and --fail-with-body makes
# an HTTP error exit non-zero.
RNND_URL=${RNND_URL:-http://127.0.0.1:8000}
MODEL=${MODEL:-digits_lstm}
here=$(cd "$(dirname "$0")" && pwd)
