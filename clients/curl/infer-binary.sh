#!/bin/sh
# POST /v2/models/{m}/infer with the binary tensor extension: the JSON header,
# then the input's 8x8 float32 values as raw little-endian bytes;
# Inference-Header-Content-Length says where the JSON ends.  The scores come
# back binary too (10 float32 after the answer's JSON header), shown by od.
. "$(dirname "$0")/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
header='{"inputs":[{"name":"input","datatype":"FP32","shape":[1,8,8],"parameters":{"binary_data_size":256}}],"outputs":[{"name":"scores","parameters":{"binary_data":true}}]}'
printf '%s' "$header" >"$tmp/body"
# The same image as infer.json, as float32: python3 packs it.
python3 -c 'import json, struct, sys
x = json.load(open(sys.argv[1]))["inputs"][0]["data"]
sys.stdout.buffer.write(struct.pack("<64f", *x))' "$here/infer.json" >>"$tmp/body"
curl -sS --fail-with-body -D "$tmp/headers" -o "$tmp/answer" -H "Content-Type: application/octet-stream" \
  -H "Inference-Header-Content-Length: ${#header}" --data-binary "@$tmp/body" \
  "$RNND_URL/v2/models/$MODEL/infer"
n=$(sed -n 's/^[Ii]nference-[Hh]eader-[Cc]ontent-[Ll]ength: *\([0-9]*\).*/\1/p' "$tmp/headers")
head -c "$n" "$tmp/answer"; echo
tail -c +$((n + 1)) "$tmp/answer" | od -A d -t f4 -w16
