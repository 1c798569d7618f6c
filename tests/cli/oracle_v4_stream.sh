#!/bin/sh
# DeepSeek-V4's and GLM-5.3's routed experts (clipped SwiGLU; V4's hash
# layers prefetched) streamed under --ram (tests/oracle_v4, tests/oracle_glm53): at
# every budget, from the smallest (one token's experts: top-k slots) up to
# the largest that still streams, every logit the fixture's prefill and decode compute
# is the resident model's bit for bit (oracle --digest), and the run says
# the experts were streamed. The gate itself is oracle_v4.sh's (deepseek_v4_fp8
# passes it with --experts f32 only), so --no-gate here.
set -eu
t=${TMPDIR:-/tmp}/oracle_v4_stream.$$; trap 'rm -rf "$t" "$t.state"' EXIT
export XDG_CACHE_HOME="$t.state"
slots() {   # slots DIR BYTES: cache slots at that budget, 0 when refused, 999999 when all is resident
    o=$("$COLIBRI" info -m "$1" --ram "$2" 2>&1) || { echo 0; return; }
    echo "$o" | sed -n 's/.*routed experts streamed: a cache of \([0-9]*\) experts.*/\1/p' | grep . || echo 999999
}
least() {   # least DIR N HI: the smallest budget in bytes (<= HI) whose cache holds N or more slots
    lo=1 hi=$3
    while [ $((hi - lo)) -gt 1 ]; do
        mid=$(((lo + hi) / 2))
        if [ "$(slots "$1" $mid)" -ge "$2" ]; then hi=$mid; else lo=$mid; fi
    done
    echo $hi
}
for f in tests/oracle_v4/*/ tests/oracle_glm53/*/; do
    f=${f%/}
    k=$(sed -n 's/.*"num_experts_per_tok": *\([0-9]*\).*/\1/p' "$f/config.json")
    e=$(sed -n 's/.*"n_routed_experts": *\([0-9]*\).*/\1/p' "$f/config.json")
    top=$(($(stat -c %s "$f/model.safetensors") * 2))
    b0=$(least "$f" "$k" $top)
    b1=$(least "$f" $((k + 1)) $top)
    slot=$((b1 - b0))
    b9=$(($(least "$f" 999999 $top) - 1))   # the largest budget that still streams
    [ "$(slots "$f" $b0)" -eq "$k" ]
    [ "$(slots "$f" $((b0 - 1)))" -eq 0 ]
    want=$("$COLIBRI" oracle --no-gate --digest --state-dir none "$f")
    echo "$want"
    for b in $b0 $b1 $((b0 + slot * e / 2)) $b9; do
        got=$("$COLIBRI" oracle --no-gate --digest --state-dir none --ram $b "$f" 2>"$t")
        grep -q "routed experts streamed: a cache of $(slots "$f" $b) experts" "$t" || { cat "$t"; exit 1; }
        echo "$(basename "$f") --ram $b ($(slots "$f" $b) slots): $got"
        [ "$got" = "$want" ]
    done
done
