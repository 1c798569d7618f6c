#!/bin/sh
# Perplexity of the bundled model with its weights in each format (quantized at
# load from the stored bf16), f32 KV cache, same windows of the held-out text.
#   sh bench/weights_eval.sh [MODEL] [TEXT] [WINDOWS]
set -eu
model=${1:-models/colibri-tiny}
text=${2:-data/persuasion.txt}
win=${3:-40}
echo "| weights (experts / dense / embed) | ppl | change vs stored |"
echo "|---|---|---|"
base=""
for f in stored bf16 fp8b q8 q4g128 q4g64 q4g32 q4 "q4g64/q8/q8"; do
    case $f in
        stored) args="" ;;
        */*) e=${f%%/*}; rest=${f#*/}; d=${rest%%/*}; m=${rest#*/}; args="--experts $e --dense $d --embed $m" ;;
        *) args="--experts $f --dense $f --embed $f" ;;
    esac
    ppl=$(./colibri eval -m "$model" --text "$text" --ctx 512 --max-windows "$win" --kv f32 $args 2>/dev/null |
          sed -n 's/.* ppl=\([0-9.]*\) .*/\1/p')
    [ -n "$base" ] || base=$ppl
    echo "| $f | $ppl | $(awk -v a="$ppl" -v b="$base" 'BEGIN { printf "%+.2f%%", 100 * (a / b - 1) }') |"
done
