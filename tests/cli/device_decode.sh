#!/bin/sh
# The decode on a device executor (model/fwd_device.h) on $DEVICE: "host"
# (default: the CUDA kernels replayed on the CPU, in make test) or "cuda"
# (tests/cuda/forward_dev.sh, with COLIBRI=build/cuda/colibri on a GPU). Every
# oracle fixture it runs passes colibri oracle's gates against Hugging Face
# (decode_dlogit: its decode against the CPU prefill, <= 1e-4), the bundled
# model's greedy continuations equal Hugging Face's
# (models/colibri-tiny/eval.json, 48 tokens each), and what it does not run
# is refused by name. On the host device (a replay, slow) make test runs three
# fixtures (V3, fp8 weights, V2-Lite) and one sample; COLIBRI_TEST_FULL=1
# (make test-full) runs them all.
set -eu
DEVICE=${DEVICE:-host}
full=1
[ "$DEVICE" = host ] && [ "${COLIBRI_TEST_FULL:-0}" = 0 ] && full=0
fix=""
for d in tests/oracle/*/; do
    d=${d%/}
    case $(basename "$d") in
        deepseek_v32*|glm5*|mistral4*) ;;   # DSA, half-split RoPE, Llama 4's query scale: refused below
        deepseek_v3_tiny|deepseek_v3_fp8|deepseek_v2_lite_tiny) fix="$fix $d" ;;
        *) [ "$full" = 1 ] && fix="$fix $d" ;;
    esac
done
out=$("$COLIBRI" oracle --device "$DEVICE" $fix)
echo "$out"
[ "$(echo "$out" | grep -c ' tf=')" -eq "$(echo $fix | wc -w)" ]

err=$("$COLIBRI" oracle --device "$DEVICE" tests/oracle/glm5_tiny 2>&1) && { echo "DSA model accepted"; exit 1; }
echo "$err" | grep -q "Sparse Attention models are not wired to the device" || { echo "$err"; exit 1; }
err=$("$COLIBRI" oracle --device "$DEVICE" tests/oracle/mistral4_tiny 2>&1) && { echo "half-split RoPE accepted"; exit 1; }
echo "$err" | grep -q "half-split RoPE (rope_interleave false) is not wired to the device" || { echo "$err"; exit 1; }
err=$("$COLIBRI" oracle --device tpu tests/oracle/deepseek_v3_tiny 2>&1) && { echo "device tpu accepted"; exit 1; }
echo "$err" | grep -q "unknown device 'tpu'" || { echo "$err"; exit 1; }
if [ "$DEVICE" = host ]; then
    # the CPU build has no CUDA backend (a CUDA build on a machine without a GPU has no device)
    err=$("$COLIBRI" run -m models/colibri-tiny --device cuda -p hi -n 2 2>&1) && { echo "cuda accepted"; exit 1; }
    echo "$err" | grep -qE "device cuda: this build has no CUDA backend|cuda: no usable device" || { echo "$err"; exit 1; }
fi

m=models/colibri-tiny
samples="0 1 2"
[ "$full" = 1 ] || samples=0
for i in $samples; do
    prompt=$(python3 -c "import json; print(json.load(open('$m/eval.json'))['samples'][$i]['prompt'], end='')")
    python3 -c "import json; print(json.load(open('$m/eval.json'))['samples'][$i]['greedy'])" > /tmp/colibri-dev-want.$$
    "$COLIBRI" run -m "$m" --device "$DEVICE" -p "$prompt" -n 48 --temp 0 2>/dev/null > /tmp/colibri-dev-got.$$
    if ! cmp -s /tmp/colibri-dev-want.$$ /tmp/colibri-dev-got.$$; then
        echo "sample $i differs on --device $DEVICE:"; cat /tmp/colibri-dev-got.$$; echo; echo "HF:"; cat /tmp/colibri-dev-want.$$
        rm -f /tmp/colibri-dev-*.$$; exit 1
    fi
    echo "ok   sample $i on --device $DEVICE: 48 greedy tokens as Hugging Face"
done
rm -f /tmp/colibri-dev-*.$$
