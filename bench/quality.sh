#!/bin/sh
# The numbers the README quotes for the bundled model, in one run:
#   sh bench/quality.sh [MODEL] [TEXT] [WINDOWS]
# writes bench/kv-eval.txt (colibri eval per KV tier), bench/kv-eval-decode.txt
# (tiers through the native decode consumers, exact and integer),
# bench/kv-eval-layers.txt (per-layer layouts next to the uniform 1-byte tiers),
# bench/kv-tradeoff.png (needs matplotlib) and bench/weights-eval.md, and
# prints the full-text f32 perplexity to compare with the model card's HF one.
set -eu
model=${1:-models/colibri-tiny}
text=${2:-data/persuasion.txt}
win=${3:-40}
[ -f "$text" ] || python3 tools/corpus.py --out data >/dev/null
echo "== full-text f32 perplexity (all windows of 512)"
./colibri eval -m "$model" --text "$text" --ctx 512 --kv f32 2>/dev/null | tee bench/kv-eval-full-f32.txt
echo "== KV tiers, $win windows of 512"
./colibri eval -m "$model" --text "$text" --ctx 512 --max-windows "$win" \
    --kv f32,bf16,fp8,int8r,q4_0,tq4,tq3,tq2,polar4,polar3,tq4/bf16,tq4/fp8,tq3/bf16 2>/dev/null | tee bench/kv-eval.txt
echo "== KV tiers through the decode consumers, 8 windows of 512"
./colibri eval -m "$model" --text "$text" --ctx 512 --max-windows 8 --decode \
    --kv fp8,fp8+int16,int8r,int8r+int8,q4_0,q4_0+int16,q4_0+int8,tq4,tq4+int16,tq4+int8,tq3,tq3+int8 2>/dev/null |
    tee bench/kv-eval-decode.txt
echo "== per-layer KV layouts (layer numbers are the bundled model's, bench/kv-floor.md), $win windows of 512"
./colibri eval -m "$model" --text "$text" --ctx 512 --max-windows "$win" \
    --kv bf16,fp8,int8r,int8r@1:rope=f32,int8r@1:rope=bf16,int8r@0-2:rope=f32,int8r@0-2:rope=bf16,fp8@0-2:int8r,fp8@0-1:int8r@1:rope=f32,fp8@0-1:int8r@1:rope=bf16,fp8@0-2:int8r:rope=f32 \
    2>/dev/null | tee bench/kv-eval-layers.txt
layers=$(sed -n 's/.*"num_hidden_layers": *\([0-9]*\).*/\1/p' "$model/config.json")
r=$(sed -n 's/.*"kv_lora_rank": *\([0-9]*\).*/\1/p' "$model/config.json")
dr=$(sed -n 's/.*"qk_rope_head_dim": *\([0-9]*\).*/\1/p' "$model/config.json")
python3 bench/kv_tradeoff.py bench/kv-eval.txt --elements $((layers * (r + dr))) --out bench/kv-tradeoff.png || true
echo "== weight formats, $win windows"
sh bench/weights_eval.sh "$model" "$text" "$win" | tee bench/weights-eval.md
