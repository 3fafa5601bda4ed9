#!/bin/sh
# GET /v1/models/{m}: TF Serving model status (each version and its state).
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/v1/models/$MODEL"; echo
