#!/bin/sh
# colibri bench --attn prints one row per tier (f32 first) with DeepSeek-V3's
# row sizes: fp8 <= 0.26x and tq4 <= 0.15x the f32 bytes (issue targets).
# Timings are not checked.
set -eu
out=$("$COLIBRI" bench --attn --attn-ctx 64 --attn-heads 4 --attn-min-time 0.01 2>/dev/null)
echo "$out"
[ "$(echo "$out" | grep -v '^| tier' | grep -c '^| [a-z0-9_]* |')" -eq 10 ]
echo "$out" | grep -q '^| f32 | 2304 | 1.000 |'
ratio() { echo "$out" | sed -n "s/^| $1 | [0-9]* | \([0-9.]*\) |.*/\1/p"; }
awk -v f="$(ratio fp8)" -v t="$(ratio tq4)" 'BEGIN { exit !(f <= 0.26 && t <= 0.15) }'
if "$COLIBRI" bench --attn --attn-tiers tq9 2>/dev/null; then exit 1; fi
