#!/bin/sh
# Before/after speed of the model-layer pipeline change, interleaved in one run.
#   sh bench/pipeline.sh BEFORE_BINARY AFTER_BINARY [ROUNDS] [OUT.md]
# Both binaries need `colibri bench --cpu-time` (process CPU time, so a shared
# machine's other load counts less); -t 1 makes that the compute time. Each
# case runs before, after, before, after, ... ROUNDS times; the table gives the
# median and the range of tokens/s. The v2-lite-shaped synthetic model (one
# dense layer, DeepSeek-V2-Lite's attention: 16 heads, kv_lora 512 + 64) is
# written under ${TMPDIR:-/tmp} if missing.
set -eu
A=$1; B=$2; rounds=${3:-3}; out=${4:-bench/pipeline-results.md}
v2=${TMPDIR:-/tmp}/colibri-synth-v2lite-1
[ -f "$v2/model.safetensors.index.json" ] || "$B" synth "$v2" --preset v2-lite --layers 1 >/dev/null 2>&1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# case NAME BIN_ARGS_AFTER_BENCH ; results in $tmp/NAME.{A,B}.{pre,dec}
run_case() {
    name=$1; shift
    i=0
    while [ $i -lt "$rounds" ]; do
        for w in A B; do
            if [ $w = A ]; then bin=$A; x=$XA; else bin=$B; x=$XB; fi
            # shellcheck disable=SC2086
            r=$("$bin" bench -t 1 --cpu-time "$@" $x 2>/dev/null | sed -n 1p)
            echo "$r" | sed -n 's/.*prefill=.*(\([0-9.]*\) tok\/s) decode.*/\1/p' >> "$tmp/$name.$w.pre"
            echo "$r" | sed -n 's/.*decode=.*(\([0-9.]*\) tok\/s)$/\1/p' >> "$tmp/$name.$w.dec"
        done
        i=$((i + 1))
    done
}
stat() {   # median [min-max] of a file of numbers
    sort -n "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                          printf "%.1f [%.1f-%.1f]", m, v[1], v[NR] }'
}
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { printf "%.3f", b / a }'; }

XA=; XB=
run_case tiny_f32 -p 128 -n 64 -r 3
run_case tiny_fp8 -p 128 -n 64 -r 3 --kv fp8
run_case tiny_tq4 -p 128 -n 64 -r 3 --kv tq4
run_case tiny_f32_d900 -p 900 -n 64 -r 1
run_case v2_f32_d2048 -m "$v2" -p 2048 -n 32 -r 1
run_case v2_fp8_d2048 -m "$v2" -p 2048 -n 32 -r 1 --kv fp8
run_case v2_q4g64_f32 -m "$v2" -p 64 -n 32 -r 2 --dense q4g64 --embed q8
# the after binary alone: kv_b dequantized row by row (default) vs the f32 copy
A0=$A; A=$B; XA=; XB=--kv-b-f32
run_case copy_tiny_f32 -p 128 -n 64 -r 3
run_case copy_v2_q4g64 -m "$v2" -p 64 -n 32 -r 2 --dense q4g64 --embed q8
run_case copy_v2_fp8b -m "$v2" -p 64 -n 32 -r 2 --dense fp8b --embed q8
A=$A0; XA=; XB=

{
    echo "# Model-layer pipeline: speed before and after"
    echo
    echo "\`sh bench/pipeline.sh BEFORE AFTER $rounds\`: \`colibri bench -t 1 --cpu-time\` (one thread, process CPU"
    echo "time), before and after interleaved, $rounds rounds; median [min-max] tokens/s; ratio = after/before"
    echo "of the medians. tiny = models/colibri-tiny (bf16, 6 layers, 4 heads, kv_lora 128 + 32, 16 experts);"
    echo "v2 = \`colibri synth --preset v2-lite --layers 1\` (one dense layer, 16 heads, kv_lora 512 + 64, bf16)."
    echo
    echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, shared with other work (load average"
    echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end); $(date -u +%Y-%m-%d)."
    echo
    echo "| case | prefill before | prefill after | ratio | decode before | decode after | ratio |"
    echo "|---|---|---|---|---|---|---|"
    for c in tiny_f32 tiny_fp8 tiny_tq4 tiny_f32_d900 v2_f32_d2048 v2_fp8_d2048 v2_q4g64_f32; do
        echo "| $c | $(stat $tmp/$c.A.pre) | $(stat $tmp/$c.B.pre) | $(ratio $tmp/$c.A.pre $tmp/$c.B.pre) | $(stat $tmp/$c.A.dec) | $(stat $tmp/$c.B.dec) | $(ratio $tmp/$c.A.dec $tmp/$c.B.dec) |"
    done
    echo
    echo "kv_b in the absorbed decode, after binary only: dequantized row by row as it goes (the default,"
    echo "\"no copy\" column) vs the f32 copy kept from load (\`--kv-b-f32\`, \"copy\" column)."
    echo
    echo "| case | prefill no copy | prefill copy | ratio | decode no copy | decode copy | ratio |"
    echo "|---|---|---|---|---|---|---|"
    for c in copy_tiny_f32 copy_v2_q4g64 copy_v2_fp8b; do
        echo "| $c | $(stat $tmp/$c.A.pre) | $(stat $tmp/$c.B.pre) | $(ratio $tmp/$c.A.pre $tmp/$c.B.pre) | $(stat $tmp/$c.A.dec) | $(stat $tmp/$c.B.dec) | $(ratio $tmp/$c.A.dec $tmp/$c.B.dec) |"
    done
} > "$out"
cat "$out"
