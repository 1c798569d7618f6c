#!/bin/sh
# colibri eval on a tiny random model (f32 weights) with a 400-id tokenizer:
# the reference line (stored weights, f32 cache, prefill) first, one
# well-formed line per tier, smaller caches for the quantized tiers, TIER/ROPE
# entries; weight formats against the stored weights (a second load of the
# same weights agrees exactly, a quantized one does not); prefill vs decode;
# bad tiers, formats and combinations refused by name; per-layer entries
# (TIER@LAYERS:SETTING) cost the bytes of their layers and decode as they
# prefill.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$m/"
sed -n 1,60p /usr/share/common-licenses/GPL-3 > "$tmp/text.txt"
ev() { "$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --ctx 32 --max-windows 3 "$@" 2>/dev/null; }
num='[0-9.e+-]+'
out=$(ev --kv fp8,tq4,tq4/bf16)
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 4 ]
echo "$out" | sed -n 1p | grep -Eq "^weights=stored kv=f32 mode=prefill bytes_per_token=[0-9]+ top1=1.0000 kl_mean=0 kl_p99=0 max_dlogit=0 ppl=[0-9.]+ dppl=\+0.00%$"
echo "$out" | grep -Eq "^weights=stored kv=tq4/bf16 mode=prefill bytes_per_token=[0-9]+ top1=[0-9.]+ kl_mean=$num kl_p99=$num max_dlogit=$num ppl=[0-9.]+ dppl=[+-][0-9.]+%$"
b() { echo "$out" | sed -n "s|^weights=stored kv=$1 mode=prefill bytes_per_token=\([0-9]*\) .*|\1|p"; }
[ "$(b fp8)" -lt "$(b f32)" ] && [ "$(b tq4)" -lt "$(b fp8)" ] && [ "$(b tq4)" -lt "$(b tq4/bf16)" ]
field() { echo "$1" | sed -n "s|^weights=$2 kv=$3 mode=$4 .* $5=\([^ ]*\) .*|\1|p"; }
gt0() { awk -v x="$1" 'BEGIN { exit !(x > 0) }'; }
le() { awk -v x="$1" -v t="$2" 'BEGIN { exit !(x <= t) }'; }
gt0 "$(field "$out" stored fp8 prefill kl_mean)"
"$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --kv tq9 2>"$tmp/err" && exit 1
grep -q "tq9" "$tmp/err"
if "$COLIBRI" eval -m "$m" --text "$tmp/none.txt" 2>"$tmp/err"; then exit 1; fi
grep -q "none.txt" "$tmp/err"

# Weight formats against the stored weights, one window set: the stored
# weights loaded a second time (--experts f32 ... on an f32 checkpoint) agree
# exactly; q8 does not, and its line's ppl is the one a q8 reference prints.
same=$(ev --kv f32 --experts f32 --dense f32 --embed f32)
echo "$same"
[ "$(echo "$same" | wc -l)" -eq 2 ]
echo "$same" | sed -n 2p | grep -Eq "^weights=f32/f32/f32 kv=f32 mode=prefill bytes_per_token=[0-9]+ top1=1.0000 kl_mean=0 kl_p99=0 max_dlogit=0 ppl=[0-9.]+ dppl=\+0.00%$"
q8=$(ev --kv f32,fp8 --experts q4g64 --dense q8)
echo "$q8"
[ "$(echo "$q8" | wc -l)" -eq 3 ]
[ "$(echo "$q8" | sed -n 1p)" = "$(echo "$out" | sed -n 1p)" ]
gt0 "$(field "$q8" q4g64/q8/stored f32 prefill kl_mean)"
gt0 "$(field "$q8" q4g64/q8/stored f32 prefill max_dlogit)"
echo "$q8" | grep -q "^weights=q4g64/q8/stored kv=fp8 mode=prefill "
base=$(ev --kv f32 --experts q4g64 --dense q8 --base same)
echo "$base"
[ "$(echo "$base" | wc -l)" -eq 1 ]
[ "$(field "$base" q4g64/q8/stored f32 prefill ppl)" = "$(field "$q8" q4g64/q8/stored f32 prefill ppl)" ]
"$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --experts q3 2>"$tmp/err" && exit 1
grep -q -- "--experts: unknown weight format 'q3'" "$tmp/err"
"$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --base other 2>"$tmp/err" && exit 1
grep -q -- "--base: 'other'" "$tmp/err"
"$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --base same 2>"$tmp/err" && exit 1
grep -q -- "--base same" "$tmp/err"

# Token-by-token decode (the tiers' native consumers) against the prefill
# reference: with f32 weights and cache the two paths give the same logits;
# the tiers give the prefill's numbers; the opt-in integer consumer stays close.
dec=$(ev --decode --kv tq4,tq4+int8,q4_0+int16)
echo "$dec"
[ "$(echo "$dec" | wc -l)" -eq 5 ]
le "$(field "$dec" stored f32 decode max_dlogit)" 1e-4
le "$(field "$dec" stored f32 decode kl_p99)" 1e-8
[ "$(field "$dec" stored f32 decode top1)" = 1.0000 ]
ppl() { field "$1" stored "$2" "$3" ppl; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }
close "$(ppl "$dec" f32 decode)" "$(ppl "$out" f32 prefill)" 1e-5
close "$(ppl "$dec" tq4 decode)" "$(ppl "$out" tq4 prefill)" 1e-4
close "$(ppl "$dec" 'tq4+int8' decode)" "$(ppl "$out" tq4 prefill)" 0.05
if "$COLIBRI" run -m "$m" -p "x" -n 1 --kv tq4 --kv-int8 3 2>"$tmp/err"; then exit 1; fi
grep -q -- "--kv-int8" "$tmp/err"

# Per-layer layouts: layer 1 in f32 costs one f32 layer's bytes more than fp8
# everywhere; a /ROPE entry keeps its @ entries; decode agrees with prefill.
pl=$(ev --kv fp8,fp8@1:f32,tq4/bf16@0-1:rope=f32)
echo "$pl"
[ "$(echo "$pl" | wc -l)" -eq 4 ]
bpl() { echo "$pl" | sed -n "s|^weights=stored kv=$1 mode=prefill bytes_per_token=\([0-9]*\) .*|\1|p"; }
f32_row=$(( $(bpl f32) / 4 )) fp8_row=$(( $(bpl fp8) / 4 ))
[ "$(bpl fp8@1:f32)" -eq $((3 * fp8_row + f32_row)) ]
[ -n "$(bpl 'tq4/bf16@0-1:rope=f32')" ]
pdec=$(ev --decode --kv int8r@1:rope=f32)
close "$(ppl "$pdec" 'int8r@1:rope=f32' decode)" "$(field "$(ev --kv int8r@1:rope=f32)" stored 'int8r@1:rope=f32' prefill ppl)" 1e-4
refused() {
    "$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --kv "$1" 2>"$tmp/err" && exit 1
    grep -qF -- "$2" "$tmp/err" || { cat "$tmp/err"; exit 1; }
}
refused int8r@4:rope=f32 "layer 4 is outside the model's layers 0-3"
refused int8r@0-2:fp8@1:tq4 "layer 1's latent tier is set twice (@0-2:fp8 and @1:tq4)"
refused int8r@1:rope=f16 "unknown RoPE precision 'f16'"
refused int8r@1:int7 "unknown KV tier 'int7'"
