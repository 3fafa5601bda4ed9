#!/bin/sh
# GET /v2/models/{m}/config: Triton-style config and the backend of each instance.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/v2/models/$MODEL/config"; echo
