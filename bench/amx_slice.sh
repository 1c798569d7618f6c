#!/bin/sh
# bench/amx_slice.sh - the AMX level's prefill slice, an older build against
# this one, with the AVX-512 level (avx512vbmi) of this build beside them,
# rounds interleaved: n = 512 (a dense layer's prompt) and n = 48 (what one
# routed expert sees of a 512-token prompt on DeepSeek-V2-Lite: 6 of 64),
# W 2048 x 7168, 1 and 2 threads, with the compute peaks of the run.
#   sh bench/amx_slice.sh OLD_GEMM NEW_GEMM NEW_COLIBRI [rounds] > raw.txt
#   python3 bench/amx_slice_summary.py raw.txt
set -e
OG=$1 NG=$2 NC=$3 ROUNDS=${4:-3}
FMTS=q8,q4,q4g32,q4g64,q4g128
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    $NC bench --peak | sed "s/^/peak r$r /"
    for n in 512 48; do
        for t in 1 2; do
            OMP_NUM_THREADS=$t $NG $n 2048 5 $FMTS avx512vbmi | sed "s/^/slice-${t}t r$r new /"
            OMP_NUM_THREADS=$t $OG $n 2048 5 $FMTS amx | sed "s/^/slice-${t}t r$r old /"
            OMP_NUM_THREADS=$t $NG $n 2048 5 $FMTS amx | sed "s/^/slice-${t}t r$r new /"
        done
    done
done
echo "loadavg end: $(cat /proc/loadavg)"
