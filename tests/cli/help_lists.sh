#!/bin/sh
# --help names the accepted formats, tiers and RoPE precisions from the
# library's tables: every placeholder is expanded, and each list has the
# table's first and last entries.
set -eu
for cmd in run chat serve oracle convert eval; do
    out=$("$COLIBRI" $cmd --help)
    if echo "$out" | grep -Eq '\{[a-z]+(-[a-z]+)+\}'; then echo "$cmd --help: unexpanded placeholder"; exit 1; fi
done
help=$("$COLIBRI" run --help)
echo "$help" | grep -Eq -- '--experts S +routed-expert weight format: f32 bf16 f16 .* mxfp4 \(default: as stored\)$'
echo "$help" | grep -Eq -- '--kv S +KV-cache tier: f32 bf16 fp8 .* polar3 \(default f32;'
echo "$help" | grep -Eq -- '--kv-rope S +precision of the cached RoPE part: f32 bf16 fp8 int8 \(default per tier\)$'
"$COLIBRI" oracle --help | grep -Eq -- '--kv S +KV-cache tier \(f32 bf16 .* polar3; default f32\)$'
