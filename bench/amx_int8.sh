#!/bin/sh
# bench/amx_int8.sh - the AMX level (q8 / q4 / q4g128 on AMX-INT8 tiles) against
# the AVX-512 level on the same binary, levels forced through bench/gemm's
# kernel-level argument, rounds interleaved: compute peaks, prefill (n = 512,
# 2048 x 7168, 1 and 2 threads), decode (n = 1, 65536 x 7168 = 470 MB q8, with
# the read probe), and colibri bench end to end against an older colibri
# (whose best level on an AMX machine is avx512vbmi).
#   sh bench/amx_int8.sh build/bench/gemm build/colibri OLD_COLIBRI [rounds] > raw.txt
set -e
GEMM=$1 NEW=$2 OLD=$3 ROUNDS=${4:-3}
FMTS=q8,q4,q4g32,q4g64,q4g128
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
$NEW bench --peak | sed 's/^/peak /'
for r in $(seq "$ROUNDS"); do
    for l in avx512vbmi amx; do
        OMP_NUM_THREADS=1 $GEMM 512 2048 3 $FMTS $l | sed "s/^/prefill-1t r$r /"
        OMP_NUM_THREADS=2 $GEMM 512 2048 3 $FMTS $l | sed "s/^/prefill-2t r$r /"
    done
    for l in avx512vbmi amx; do
        OMP_NUM_THREADS=1 $GEMM 1 65536 5 read,$FMTS $l | sed "s/^/decode r$r /"
    done
    for b in old new; do
        if [ $b = old ]; then c=$OLD; else c=$NEW; fi
        for f in q8 q4g128; do
            $c bench -p 512 -n 32 -r 2 -t 1 --cpu-time --experts $f --dense $f --embed $f 2>/dev/null | sed "s/^/e2e $b $f r$r /"
        done
    done
done
$NEW bench --peak | sed 's/^/peak /'
echo "loadavg end: $(cat /proc/loadavg)"
