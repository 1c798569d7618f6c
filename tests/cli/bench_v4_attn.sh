#!/bin/sh
# colibri bench --v4-attn: runs at a small context, prints one row per layer
# kind and tier, and its KV bytes per token at V4-Flash dims are the ones
# computed by hand from the layer mix (20 CSA layers: a 512-value row and a
# 128-value index key per 4 tokens; 23 HCA layers: a row per 128 tokens):
#   f32  20 * (2048 + 512) / 4 + 23 * 2048 / 128 = 13168
#   bf16 20 * (1024 + 512) / 4 + 23 * 1024 / 128 = 7864
#   fp8  20 * (516 + 512) / 4 + 23 * 516 / 128   = 5232.7 (fp8 rows carry a 4-byte scale)
set -e
out=$("$COLIBRI" bench --v4-attn --attn-ctx 1024 --attn-tiers f32,bf16,fp8 --attn-min-time 0.01 --v4-rounds 1 -t 1)
echo "$out"
[ "$(echo "$out" | grep -c '^| 1024 | ')" -eq 9 ] || { echo "FAIL: want 3 kinds x 3 tiers"; exit 1; }
echo "$out" | grep -q '^| 1024 | CSA | bf16 | 384 | ' || { echo "FAIL: CSA rows at 1024 (128 window + 256 entries)"; exit 1; }
echo "$out" | grep -q '^| V4-Flash | f32 | 20 | 23 | 13168.0 |' || { echo "FAIL: f32 bytes/token"; exit 1; }
echo "$out" | grep -q '^| V4-Flash | bf16 | 20 | 23 | 7864.0 |' || { echo "FAIL: bf16 bytes/token"; exit 1; }
echo "$out" | grep -q '^| V4-Flash | fp8 | 20 | 23 | 5232.7 |' || { echo "FAIL: fp8 bytes/token"; exit 1; }
if "$COLIBRI" bench --v4-attn --attn-tiers nope --attn-ctx 256 2>/dev/null; then echo "FAIL: unknown tier accepted"; exit 1; fi
echo ok
