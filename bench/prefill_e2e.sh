#!/bin/sh
# bench/prefill_e2e.sh - colibri bench end to end, one build against an older
# one, rounds interleaved: prefill of 512 tokens and decode of 32 on models
# already converted to each weight format (so nothing is quantized at load),
# 1 thread by process CPU time and 2 threads by wall clock, and decode of 64
# tokens from a 1-token prompt (depth 0), with the read probe (--bw) and the
# compute peaks (bench --peak) measured in each round.
# bench/prefill_e2e_summary.py turns prefill tok/s into GFLOP/s of weight
# products (from the model's config.json) over the peak of the format's
# instruction, and decode into a fraction of the read bound.
#   sh bench/prefill_e2e.sh OLD_COLIBRI NEW_COLIBRI MODEL_PREFIX "bf16 fp8b q8 q4g32 q4g64" [rounds] > raw.txt
#   python3 bench/prefill_e2e_summary.py raw.txt MODEL_PREFIX
# MODEL_PREFIX: the model in format F is MODEL_PREFIX$F (colibri convert SRC
# MODEL_PREFIX$F --experts F --dense F --embed F).
set -e
OC=$1 NC=$2 PFX=$3 FMTS=$4 ROUNDS=${5:-3}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    $NC bench --peak | sed "s/^/peak r$r /"
    for f in $FMTS; do
        for b in old new; do
            if [ $b = old ]; then c=$OC; else c=$NC; fi
            $c bench -m "$PFX$f" -p 512 -n 32 -r 1 -t 1 --cpu-time --bw 2>/dev/null | grep -E '^model=|^read bandwidth' |
                sed "s/^/e2e-1 $b $f r$r /"
            $c bench -m "$PFX$f" -p 512 -n 32 -r 1 -t 2 2>/dev/null | grep -E '^model=' | sed "s/^/e2e-2 $b $f r$r /"
            # decode from depth 0 (a 1-token prompt, then 64 tokens)
            $c bench -m "$PFX$f" -p 1 -n 64 -r 1 -t 1 --cpu-time --bw 2>/dev/null | grep -E '^model=|^read bandwidth' |
                sed "s/^/dec0-1 $b $f r$r /"
        done
    done
done
echo "loadavg end: $(cat /proc/loadavg)"
