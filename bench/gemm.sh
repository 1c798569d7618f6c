#!/bin/sh
# bench/gemm.sh - prefill (matmul) and decode (matvec) per weight format, an
# old build against a new one in the same run, rounds interleaved, then a
# summary of medians (bench/gemm_summary.py). Also the compute peaks
# (colibri bench --peak, before each pair of runs) so each prefill figure can be read as a
# fraction of its instruction's peak measured in the same interval, and a read probe interleaved with the matvecs as
# the decode bound.
#
# usage: sh bench/gemm.sh OLD_GEMM NEW_GEMM COLIBRI [rounds, default 3] > raw.txt
#   e.g. make BUILD=build-base bench (at the old commit; build bench/gemm.c
#   against its library with -DGEMM_NO_BF16ACT), make bench, then
#   sh bench/gemm.sh build-base/bench/gemm build/bench/gemm build/colibri > raw.txt
#   python3 bench/gemm_summary.py raw.txt
set -e
OLD=$1 NEW=$2 COLIBRI=$3 ROUNDS=${4:-3}
FMTS=f32,bf16,f16,q8,q4,q4g32,q4g64,q4g128,fp8b
DEC=read,f32,bf16,f16,read,q8,q4,q4g32,read,q4g64,q4g128,fp8b,read
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    for t in 1 2; do
        # the peaks move with the load on a shared machine: measured each time
        $COLIBRI bench --peak | sed 's/^/peak /'
        for b in old new; do
            if [ $b = old ]; then bin=$OLD; else bin=$NEW; fi
            OMP_NUM_THREADS=$t $bin 256 4096 3 $FMTS | sed "s/^/prefill $b r$r /"
            if [ $b = new ]; then OMP_NUM_THREADS=$t $bin 256 4096 3 bf16act,bf16act-avx512 | sed "s/^/prefill $b r$r /"; fi
            OMP_NUM_THREADS=$t $bin 1 8192 7 $DEC | sed "s/^/decode $b r$r /"
        done
    done
done
echo "loadavg end: $(cat /proc/loadavg)"
