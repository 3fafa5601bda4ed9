#!/bin/sh
# GET /metrics: Prometheus text (rnnd_up, rnnd_requests_total, ...).
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body "$RNND_URL/metrics"
