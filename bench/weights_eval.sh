#!/bin/sh
# Each weight format on the bundled model against the weights as stored: the
# formats quantize at load from the stored bf16, f32 KV cache, prefill, the
# same windows of the held-out text. top-1 agreement, KL(stored || format)
# mean and 99th percentile in nats, the largest |logit difference|, perplexity
# and its change (colibri eval's reference line is the stored model).
#   sh bench/weights_eval.sh [MODEL] [TEXT] [WINDOWS]
set -eu
model=${1:-models/colibri-tiny}
text=${2:-data/persuasion.txt}
win=${3:-40}
colibri=${COLIBRI:-./colibri}
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "# Weight formats on $model against its stored weights"
echo
echo "Machine: ${cpu:-unknown CPU}, $(nproc) logical CPUs. Command: \`sh bench/weights_eval.sh $model $text $win\`"
echo "($(date -u +%Y-%m-%d)). Each format is quantized at load from the stored weights; f32 KV cache; one prefill"
echo "per window of 512 tokens, $win windows; top-1 and KL(stored || format) in nats per scored token."
echo
echo "| weights (experts / dense / embed) | top-1 | KL mean | KL p99 | max abs dlogit | ppl | change vs stored |"
echo "|---|---|---|---|---|---|---|"
for f in stored f32 bf16 f16 fp8b q8 q4g128 q4g64 q4g32 q4 "q4g64/q8/q8" "q4g64/q8/stored"; do
    case $f in
        stored) args="" ;;
        */*) e=${f%%/*}; rest=${f#*/}; d=${rest%%/*}; m=${rest#*/}
             args="--experts $e --dense $d"; [ "$m" = stored ] || args="$args --embed $m" ;;
        *) args="--experts $f --dense $f --embed $f" ;;
    esac
    "$colibri" eval -m "$model" --text "$text" --ctx 512 --max-windows "$win" --kv f32 $args 2>/dev/null | tail -n 1 |
        sed -n "s|^weights=[^ ]* kv=f32 mode=prefill bytes_per_token=[0-9]* top1=\([0-9.]*\) kl_mean=\([^ ]*\) kl_p99=\([^ ]*\) max_dlogit=\([^ ]*\) ppl=\([0-9.]*\) dppl=\([^ ]*\)$|\| $f \| \1 \| \2 \| \3 \| \4 \| \5 \| \6 \||p"
done
