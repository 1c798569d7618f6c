#!/bin/sh
# GLM-5.3 (tests/oracle_glm53, tools/oracle_glm53.py, tools/oracle_glm53_fp8.py): every fixture exact
# against transformers under colibri oracle's gate (decode = prefill
# included: the decode runs KDA's recurrent form, the prefill its chunked
# form), its KV tiers, and what is not implemented for GLM-5.3 refused by
# name.
set -e
out=$("$COLIBRI" oracle tests/oracle_glm53/*/)
echo "$out"
n=$(ls -d tests/oracle_glm53/*/ | wc -l)
[ "$(echo "$out" | grep -c ' tf=')" -eq "$n" ]

fix=tests/oracle_glm53/glm53_kda_hc4
refused() {   # refused WHAT PATTERN ARGS...: the command fails naming PATTERN
    what=$1 pat=$2
    shift 2
    if err=$("$@" 2>&1); then echo "FAIL: $what accepted"; exit 1; fi
    echo "$err" | grep -q "$pat" || { echo "FAIL: $what: unexpected message: $err"; exit 1; }
}
# --kv: the indexed layers' latents take the tier, the KDA states stay f32: an
# all-KDA fixture gives the f32 bits under int8r; the indexed one under bf16
# keeps every top-1 within 0.05 of transformers' logits, not the f32 bits
digest() { "$COLIBRI" oracle --no-gate --digest "$@" 2>/dev/null | sed -n 's/.*digest=//p'; }
[ "$(digest --kv int8r "$fix")" = "$(digest "$fix")" ] || { echo "FAIL: --kv int8r changed a KDA-only model"; exit 1; }
idx=tests/oracle_glm53/glm53_indexed
bf=$("$COLIBRI" oracle --no-gate --kv bf16 "$idx" 2>/dev/null | grep ' tf=')
echo "$bf" | grep -q " tf=84/84 " && echo "$bf" | awk '{ split($0, a, "max_dlogit="); exit !(a[2] + 0 < 0.05) }' &&
    [ "$(digest --kv bf16 "$idx")" != "$(digest "$idx")" ] || { echo "FAIL: --kv bf16 on $idx: $bf"; exit 1; }
refused "--kv q4_0 on kv_lora_rank 16" "latents (kv_lora_rank 16) cannot take the q4_0 tier" "$COLIBRI" oracle --kv q4_0 "$idx"
refused "--kv-rope" "has no RoPE" "$COLIBRI" oracle --kv bf16 --kv-rope int8 "$idx"
refused "--device" "GLM-5.3's layers are not wired to the device" "$COLIBRI" oracle --device host "$fix"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
edit() {   # edit DIR PYTHON-EXPR-ON-c: a copy of the fixture with config.json changed
    mkdir -p "$1"
    cp "$fix"/* "$1"/
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); t=c['text_config']; $2; json.dump(c, open(sys.argv[1],'w'))" "$1/config.json"
}
edit "$tmp/unknown" "t['some_new_field']=1"
refused "an unknown text field" "text_config.some_new_field" "$COLIBRI" oracle "$tmp/unknown"
edit "$tmp/quant" "t['quantization_config']={'quant_method':'fp8'}"
refused "quantization_config in text_config" "text_config.quantization_config" "$COLIBRI" oracle "$tmp/quant"
edit "$tmp/shared" "t['layer_types'][1]='indexed_attention'; t['indexer_types']=['full','shared','full']"
refused "a shared layer after a KDA layer" "layer 1 is a shared indexed layer" "$COLIBRI" oracle "$tmp/shared"
edit "$tmp/tail" "t['layer_types'][1]='indexed_attention'; t['index_kpool_always_select_tail']=False"
refused "the pool tail rule off" "index_kpool_always_select_tail=false" "$COLIBRI" oracle "$tmp/tail"
edit "$tmp/types" "t['layer_types'][2]='sliding_attention'"
refused "an unknown layer type" "layer_types\[2\]" "$COLIBRI" oracle "$tmp/types"
edit "$tmp/rope" "t['qk_rope_head_dim']=8"
refused "qk_rope_head_dim" "qk_rope_head_dim" "$COLIBRI" oracle "$tmp/rope"
edit "$tmp/score" "t['scoring_func']='softmax'"
refused "scoring_func softmax" "scoring_func 'softmax'" "$COLIBRI" oracle "$tmp/score"
fp8=tests/oracle_glm53/glm53_fp8
mkdir -p "$tmp/blk"
cp "$fp8"/* "$tmp/blk"/
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['quantization_config']['weight_block_size']=[64,64]; json.dump(c, open(sys.argv[1],'w'))" "$tmp/blk/config.json"
refused "fp8 in 64x64 blocks" "weight_block_size must be \[128, 128\]" "$COLIBRI" oracle "$tmp/blk"
echo "refusals ok"

# the FP8 release's encoding (F8_E4M3 + weight_scale_inv 128x128 blocks), read
# exactly: dequantized to f32 it is transformers' dequantizing load's model
"$COLIBRI" oracle --experts f32 --dense f32 "$fp8" | grep ' tf=84/84 gen=12/12 '

# GLM-5's keys a release may carry, read by no GLM-5.3 text module: the same model
edit "$tmp/glm5keys" "t.update(rope_theta=1e6, partial_rotary_factor=1.0, first_k_dense_replace=3, num_nextn_predict_layers=1, scoring_func='sigmoid', topk_method='noaux_tc')"
"$COLIBRI" oracle "$tmp/glm5keys" | grep ' tf=104/104 gen=12/12 '


# a flat text-only config (the text fields at the top level, no vision_config): the same model
mkdir -p "$tmp/flat"
cp "$fix"/* "$tmp/flat"/
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); t=c.pop('text_config'); c.pop('vision_config'); t.pop('model_type', None); c.update(t); json.dump(c, open(sys.argv[1],'w'))" "$tmp/flat/config.json"
"$COLIBRI" oracle "$tmp/flat" | grep ' tf=104/104 gen=12/12 '

