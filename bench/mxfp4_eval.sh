#!/bin/sh
# mxfp4 routed experts next to the int4/int8 group formats on the bundled
# model: each format quantized at load from the stored bf16 experts (dense
# and embeddings as stored), f32 KV cache, one prefill per window of 512
# tokens of the held-out text; top-1, KL(stored || format), perplexity change,
# and the routed experts' bytes per weight (colibri info's resident size over
# the expert weight count, the MTP layer's experts included). One run per
# format.
#   sh bench/mxfp4_eval.sh [MODEL] [TEXT] [WINDOWS]
set -eu
model=${1:-models/colibri-tiny}
text=${2:-data/persuasion.txt}
win=${3:-40}
colibri=${COLIBRI:-./colibri}
nw=$(python3 -c "import json; c = json.load(open('$model/config.json')); \
print((c['num_hidden_layers'] - c['first_k_dense_replace'] + c.get('num_nextn_predict_layers', 0)) * c['n_routed_experts'] * 3 * c['hidden_size'] * c['moe_intermediate_size'])")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "Machine: ${cpu:-unknown CPU}, $(nproc) logical CPUs."
echo "Command: sh bench/mxfp4_eval.sh $model $text $win ($(date -u +%Y-%m-%d)); $nw routed-expert weights."
echo
echo "| experts | bytes/weight | top-1 | KL mean | KL p99 | max abs dlogit | ppl | change vs stored |"
echo "|---|---|---|---|---|---|---|---|"
for f in mxfp4 q4g64 q4g32 q8; do
    mib=$("$colibri" info -m "$model" --experts $f 2>/dev/null | sed -n 's/.*of which routed experts \([0-9.]*\) .*/\1/p' | head -n 1)
    bpw=$(python3 -c "print('%.4f' % ($mib * 1048576 / $nw))")
    "$colibri" eval -m "$model" --text "$text" --ctx 512 --max-windows "$win" --kv f32 --experts $f 2>/dev/null | tail -n 1 |
        sed -n "s|^weights=[^ ]* kv=f32 mode=prefill bytes_per_token=[0-9]* top1=\([0-9.]*\) kl_mean=\([^ ]*\) kl_p99=\([^ ]*\) max_dlogit=\([^ ]*\) ppl=\([0-9.]*\) dppl=\([^ ]*\)$|\| $f \| $bpw \| \1 \| \2 \| \3 \| \4 \| \5 \| \6 \||p"
done
