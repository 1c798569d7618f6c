#!/bin/sh
# DeepSeek-V4 (tests/oracle_v4, tools/oracle_v4.py): every fixture exact
# against transformers under colibri oracle's gate (decode = prefill
# included), and what is not implemented for V4 refused by name.
set -e
out=$("$COLIBRI" oracle tests/oracle_v4/*/)
echo "$out"
n=$(ls -d tests/oracle_v4/*/ | wc -l)
[ "$(echo "$out" | grep -c ' tf=')" -eq "$n" ]

fix=tests/oracle_v4/deepseek_v4_tiny
refused() {   # refused WHAT PATTERN ARGS...: the command fails naming PATTERN
    what=$1 pat=$2
    shift 2
    if err=$("$@" 2>&1); then echo "FAIL: $what accepted"; exit 1; fi
    echo "$err" | grep -q "$pat" || { echo "FAIL: $what: unexpected message: $err"; exit 1; }
}
refused "--kv-rope bf16 on int8r" "RoPE precision bf16" "$COLIBRI" oracle --kv int8r --kv-rope bf16 "$fix"
refused "--ram" "streaming DeepSeek-V4" "$COLIBRI" oracle --ram 1M "$fix"
refused "--device" "not wired to the device" "$COLIBRI" oracle --device host "$fix"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
edit() {   # edit DIR PYTHON-EXPR-ON-c: a copy of the fixture with config.json changed
    mkdir -p "$1"
    cp "$fix"/* "$1"/
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1],'w'))" "$1/config.json"
}
edit "$tmp/unknown" "c['some_new_field']=1"
refused "an unknown field" "some_new_field" "$COLIBRI" oracle "$tmp/unknown"
edit "$tmp/quant" "c['quantization_config']={'quant_method':'fp8'}"
refused "quantization_config" "quantization_config" "$COLIBRI" oracle "$tmp/quant"
edit "$tmp/score" "c['scoring_func']='sigmoid'"
refused "scoring_func sigmoid" "scoring_func" "$COLIBRI" oracle "$tmp/score"
edit "$tmp/types" "c['layer_types'][1]='full_attention'"
refused "an unknown layer type" "layer_types\[1\]" "$COLIBRI" oracle "$tmp/types"
echo "refusals ok"

# KV tiers on the window and the compressed entries: prefill = decode still
# exact, the logits within each tier's bound of transformers' f32 (the
# random-weight fixtures' rows are 32 values, the tiers' worst case)
tiers() {   # tiers TIER MAX_DLOGIT
    out=$("$COLIBRI" oracle --no-gate --kv "$1" tests/oracle_v4/*/)
    echo "$out"
    [ "$(echo "$out" | grep -c ' decode_dlogit=0$')" -eq "$n" ] || { echo "FAIL: --kv $1: decode differs from prefill"; exit 1; }
    echo "$out" | awk -v m="$2" -v t="$1" '{ for (i = 1; i <= NF; i++) if ($i ~ /^max_dlogit=/) { split($i, a, "=");
        if (a[2] + 0 > m + 0) { print "FAIL: --kv " t ": " $1 " max_dlogit " a[2] " over " m; bad = 1 } } } END { exit bad }'
}
tiers bf16 0.1
tiers int8r 1.0

# the official fixture with its config in transformers' spelling: the same model
off=tests/oracle_v4/deepseek_v4_official
mkdir -p "$tmp/hf"
cp "$off"/* "$tmp/hf/"
cp "$off/config.hf.json" "$tmp/hf/config.json"
"$COLIBRI" oracle "$tmp/hf" | grep ' tf=300/300 gen=12/12 '

