#!/bin/sh
# GET /v2: name, version and the extensions served.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/v2"; echo
