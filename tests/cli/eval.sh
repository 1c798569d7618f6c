#!/bin/sh
# colibri eval on a tiny random model with a 400-id tokenizer: one
# well-formed line per tier, f32 first and equal to itself, smaller caches
# for the quantized tiers, TIER/ROPE entries, bad tiers refused by name.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$m/"
sed -n 1,60p /usr/share/common-licenses/GPL-3 > "$tmp/text.txt"
out=$("$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --ctx 32 --max-windows 3 --kv fp8,tq4,tq4/bf16 2>/dev/null)
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 4 ]
echo "$out" | sed -n 1p | grep -Eq '^kv=f32 bytes_per_token=[0-9]+ top1=1.0000 kl_mean=0 kl_p99=0 ppl=[0-9.]+ dppl=\+0.00%$'
echo "$out" | grep -Eq '^kv=tq4/bf16 bytes_per_token=[0-9]+ top1=[0-9.]+ kl_mean=[0-9.e+-]+ kl_p99=[0-9.e+-]+ ppl=[0-9.]+ dppl=[+-][0-9.]+%$'
b() { echo "$out" | sed -n "s/^kv=$1 bytes_per_token=\([0-9]*\) .*/\1/p"; }
[ "$(b fp8)" -lt "$(b f32)" ] && [ "$(b tq4)" -lt "$(b fp8)" ] && [ "$(b tq4)" -lt "$(b 'tq4\/bf16')" ]
if "$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --kv tq9 2>"$tmp/err"; then exit 1; fi
grep -q "tq9" "$tmp/err"
if "$COLIBRI" eval -m "$m" --text "$tmp/none.txt" 2>"$tmp/err"; then exit 1; fi
grep -q "none.txt" "$tmp/err"
# Token-by-token decode (the tiers' native consumers) gives the prefill's
# numbers; the opt-in integer consumer runs and stays close.
dec=$("$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --ctx 32 --max-windows 3 --decode --kv tq4,tq4+int8,q4_0+int16 2>/dev/null)
echo "$dec"
ppl() { echo "$1" | sed -n "s/^kv=$2 .* ppl=\([0-9.]*\) .*/\1/p"; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }
close "$(ppl "$dec" f32)" "$(ppl "$out" f32)" 1e-5
close "$(ppl "$dec" tq4)" "$(ppl "$out" tq4)" 1e-4
close "$(ppl "$dec" 'tq4+int8')" "$(ppl "$out" tq4)" 0.05
if "$COLIBRI" run -m "$m" -p "x" -n 1 --kv tq4 --kv-int8 3 2>"$tmp/err"; then exit 1; fi
grep -q -- "--kv-int8" "$tmp/err"
