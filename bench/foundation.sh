#!/bin/sh
# bench/foundation.sh - issue 31's "speed within noise" check: one build
# against an older one, interleaved, on DeepSeek-V2-Lite shapes with MoE
# (colibri synth --preset v2-lite --layers 3: one dense layer, two MoE layers
# of 64 experts top-6), converted once per weight format so nothing is
# quantized at load. Cases: weights bf16 / q8 / q4g64 x KV f32 / int8r, 1
# thread (process CPU time) and 2 threads (wall clock); prefill of 256 tokens
# and decode of 32 after it. Median [min-max] tok/s per case, ratio
# new/old of the medians.
#   sh bench/foundation.sh OLD_COLIBRI NEW_COLIBRI [ROUNDS] > bench/foundation-results.md
set -eu
OC=$1 NC=$2 R=${3:-3}
d=${TMPDIR:-/tmp}/colibri-synth-v2lite-3
for f in bf16 q8 q4g64; do
    [ -f "$d-$f/config.json" ] || "$NC" synth "$d-$f" --preset v2-lite --layers 3 --experts $f --dense $f --embed q8 >/dev/null 2>&1
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$R"); do
    for f in bf16 q8 q4g64; do
        for kv in f32 int8r; do
            for t in 1 2; do
                for b in old new; do
                    if [ $b = old ]; then c=$OC; else c=$NC; fi
                    ct=""; [ $t = 1 ] && ct=--cpu-time
                    line=$("$c" bench -m "$d-$f" -p 256 -n 32 -r 1 -t $t $ct --kv $kv 2>/dev/null | sed -n 1p)
                    k="$f.$kv.t$t.$b"
                    echo "$line" | sed -n 's/.*prefill=.*(\([0-9.]*\) tok\/s) decode.*/\1/p' >> "$tmp/$k.pre"
                    echo "$line" | sed -n 's/.*decode=.*(\([0-9.]*\) tok\/s)$/\1/p' >> "$tmp/$k.dec"
                done
            done
        done
    done
done
stat() { sort -n "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                printf "%.1f [%.1f-%.1f]", m, v[1], v[NR] }'; }
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { printf "%.3f", b / a }'; }
echo "# Before/after, issue 31 (\`sh bench/foundation.sh OLD NEW $R\`)"
echo
echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; load average $load0 at the start,"
echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end; $(date -u +%Y-%m-%d). OLD: $("$OC" --version 2>/dev/null | head -1);"
echo "NEW: $("$NC" --version 2>/dev/null | head -1). v2-lite synth, 3 layers (1 dense, 2 MoE), embed q8."
echo
echo "| weights | KV | threads | prefill old | prefill new | ratio | decode old | decode new | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for f in bf16 q8 q4g64; do for kv in f32 int8r; do for t in 1 2; do
    k="$f.$kv.t$t"
    echo "| $f | $kv | $t | $(stat $tmp/$k.old.pre) | $(stat $tmp/$k.new.pre) | $(ratio $tmp/$k.old.pre $tmp/$k.new.pre) | $(stat $tmp/$k.old.dec) | $(stat $tmp/$k.new.dec) | $(ratio $tmp/$k.old.dec $tmp/$k.new.dec) |"
done; done; done
