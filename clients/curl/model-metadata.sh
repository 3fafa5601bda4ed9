#!/bin/sh
# GET /v2/models/{m}: versions, platform, inputs and outputs (-1 for variable dims).
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/v2/models/$MODEL"; echo
