#!/bin/sh
# bench/amx_bf16.sh - the bf16 products on one thread, rounds interleaved:
# prefill (n = 512) on W 2048 x 7168 and 512 x 7168 for bf16 (the default
# f32-activation path), bf16act-avx512 (VDPBF16PS) and bf16act (the default
# kernel: AMX tiles where available), with the compute peaks before each
# round; decode (n = 1) on W 32768 x 7168 (448 MiB) for the same three with
# the read probe before and after them. Raw lines; bench/amx-bf16-results.md
# has the tables made from them.
#
# usage: sh bench/amx_bf16.sh GEMM COLIBRI [rounds, default 5] > raw.txt
set -e
GEMM=$1 COLIBRI=$2 ROUNDS=${3:-5}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    $COLIBRI bench --peak -t 1 | sed "s/^/peak r$r /"
    for rows in 2048 512; do
        OMP_NUM_THREADS=1 $GEMM 512 $rows 3 bf16,bf16act-avx512,bf16act | sed "s/^/prefill r$r /"
    done
    OMP_NUM_THREADS=1 $GEMM 1 32768 5 read,bf16,bf16act-avx512,bf16act,read | sed "s/^/decode r$r /"
done
echo "loadavg end: $(cat /proc/loadavg)"
