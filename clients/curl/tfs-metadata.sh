#!/bin/sh
# GET /v1/models/{m}/metadata: TF Serving metadata (the serving_default signature_def).
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/v1/models/$MODEL/metadata"; echo
