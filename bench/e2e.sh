#!/bin/sh
# End-to-end decode/prefill speed per weight format on a synthetic model with
# DeepSeek-V2-Lite's shapes (fewer layers so it fits here), against the
# read-bandwidth bound measured in the same run.
#   sh bench/e2e.sh [LAYERS] [OUT.md]
# Needs ./colibri (make). Writes the synthetic model under ${TMPDIR:-/tmp}.
set -eu
layers=${1:-3}
out=${2:-bench/e2e-results.md}
dir=${TMPDIR:-/tmp}/colibri-synth-v2lite-$layers
[ -f "$dir/model.safetensors.index.json" ] || ./colibri synth "$dir" --preset v2-lite --layers "$layers" 2>/dev/null
{
    echo "# End-to-end decode and prefill per weight format"
    echo
    echo "Synthetic model: DeepSeek-V2-Lite shapes (hidden 2048, 64 experts top-6 + 2 shared, kv_lora 512,"
    echo "vocab 102400), $layers layers, weights quantized at load from a bf16 synth (\`colibri synth --preset v2-lite"
    echo "--layers $layers\`). Prefill 64 tokens, decode 32, best of 2; f32 KV cache. \"of bound\" = decode tok/s"
    echo "divided by (read bandwidth / weight bytes read per decoded token), bandwidth probed in the same run."
    echo
    echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)."
    echo
    echo "| format | MiB read / token | prefill tok/s | decode tok/s | read GB/s | bound tok/s | of bound |"
    echo "|---|---|---|---|---|---|---|"
    for f in bf16 fp8b q8 q4g64; do
        r=$(./colibri bench -m "$dir" -p 64 -n 32 -r 2 --bw --experts $f --dense $f --embed $f 2>/dev/null)
        pre=$(echo "$r" | sed -n 's/.*prefill=.*(\([0-9.]*\) tok\/s) decode.*/\1/p')
        dec=$(echo "$r" | sed -n 's/.*decode=.*(\([0-9.]*\) tok\/s)$/\1/p')
        bw=$(echo "$r" | sed -n 's/^read bandwidth \([0-9.]*\) GB\/s.*/\1/p')
        mib=$(echo "$r" | sed -n 's/.*; \([0-9.]*\) MiB of weights.*/\1/p')
        bound=$(echo "$r" | sed -n 's/.*bound \([0-9.]*\) tok\/s.*/\1/p')
        pct=$(echo "$r" | sed -n 's/.*reaches \([0-9]*\)% .*/\1/p')
        echo "| $f | $mib | $pre | $dec | $bw | $bound | $pct% |"
    done
} > "$out"
cat "$out"
