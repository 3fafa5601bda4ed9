#!/bin/sh
# POST /v1/models/{m}:predict (TF Serving): two instances of their own lengths, 3 and 2 steps of 8 features.
. "$(dirname "$0")/common.sh"
curl -sS --fail-with-body -H "Content-Type: application/json" "$RNND_URL/v1/models/$MODEL:predict" -d '{"instances": [
  [[0,0,5,13,9,1,0,0],[0,0,13,15,10,15,5,0],[0,3,15,2,0,11,8,0]],
  [[0,0,0,12,13,5,0,0],[0,0,0,11,16,9,0,0]]]}'; echo
