#!/bin/sh
# GET /v2/health/live: 200 while the process serves.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body -w "%{http_code}\n" "$RNND_URL/v2/health/live"
