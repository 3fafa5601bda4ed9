#!/bin/sh
# POST /v2/models/{m}/infer with JSON tensors: one 8x8 image of digits_lstm, scores only.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body -H "Content-Type: application/json" \
  --data-binary "@$here/infer.json" "$RNND_URL/v2/models/$MODEL/infer"; echo
