#!/bin/sh
# GET /v2/models/{m}/ready: 200 when the model has a loaded version.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body -w "%{http_code}\n" "$RNND_URL/v2/models/$MODEL/ready"
