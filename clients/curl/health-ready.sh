#!/bin/sh
# GET /v2/health/ready: 200 when every model loaded and the server is not stopping.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body -w "%{http_code}\n" "$RNND_URL/v2/health/ready"
