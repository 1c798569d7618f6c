#!/bin/sh
# bench/avx512_kernels.sh - the AVX-512 kernels of one build against an older
# build, rounds interleaved: compute peaks (each round), prefill GFLOP/s per
# format at n = 256 on 4096 x 7168 (1 and 2 threads) and at n = 16 on
# 2048 x 7168 (an MoE expert's share of a 512-token prefill, 1 thread),
# decode GB/s at n = 1 on 16384 x 7168 (1 thread, the read probe between
# formats), and colibri bench end to end on a model (e.g. colibri synth's
# v2-lite with 4 layers) with its weights quantized at load.
#   sh bench/avx512_kernels.sh OLD_GEMM NEW_GEMM OLD_COLIBRI NEW_COLIBRI MODEL [rounds] > raw.txt
#   python3 bench/avx512_kernels_summary.py raw.txt
set -e
OG=$1 NG=$2 OC=$3 NC=$4 MODEL=$5 ROUNDS=${6:-3}
FMTS=f32,bf16,f16,fp8b,q8,q4,q4g32,q4g64,q4g128
DEC=read,f32,bf16,f16,read,fp8b,q8,q4,read,q4g32,q4g64,q4g128,read
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    $NC bench --peak | sed "s/^/peak r$r /"
    for b in old new; do
        if [ $b = old ]; then g=$OG; else g=$NG; fi
        for t in 1 2; do
            OMP_NUM_THREADS=$t $g 256 4096 3 $FMTS,bf16act | sed "s/^/prefill-$t $b r$r /"
        done
        OMP_NUM_THREADS=1 $g 16 2048 10 $FMTS | sed "s/^/prefill16-1 $b r$r /"
        OMP_NUM_THREADS=1 $g 1 16384 7 $DEC | sed "s/^/decode-1 $b r$r /"
    done
    for b in old new; do
        if [ $b = old ]; then c=$OC; else c=$NC; fi
        for f in bf16 fp8b q8 q4g64; do
            $c bench -m "$MODEL" -p 512 -n 32 -r 1 -t 1 --cpu-time --experts $f --dense $f --embed $f 2>/dev/null |
                sed "s/^/e2e $b $f r$r /"
        done
    done
done
echo "loadavg end: $(cat /proc/loadavg)"
