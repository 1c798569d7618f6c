#!/bin/sh
# bench/gemm_float.sh - prefill of the float weight formats (f32, bf16, f16,
# fp8b), an old build against a new one, rounds interleaved, 1 and 2
# threads, each pair of runs after a measurement of the compute peaks
# (colibri bench --peak), so every figure can be read as a fraction of the
# fp32 FMA peak measured in the same interval (bench/gemm-float-results.md).
#
# usage: sh bench/gemm_float.sh OLD_GEMM NEW_GEMM COLIBRI [rounds, default 3] > raw.txt
set -e
OLD=$1 NEW=$2 COLIBRI=$3 ROUNDS=${4:-3}
FMTS=f32,bf16,f16,fp8b
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    for t in 1 2; do
        $COLIBRI bench --peak | sed "s/^/peak r$r t$t /"
        OMP_NUM_THREADS=$t $OLD 256 4096 3 $FMTS | sed "s/^/prefill old r$r /"
        OMP_NUM_THREADS=$t $NEW 256 4096 3 $FMTS | sed "s/^/prefill new r$r /"
    done
done
echo "loadavg end: $(cat /proc/loadavg)"
