#!/bin/sh
# GET /v2/models/{m}/stats: the statistics extension (counts, times, batch sizes).
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/v2/models/$MODEL/stats"; echo
