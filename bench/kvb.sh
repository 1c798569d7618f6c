#!/bin/sh
# bench/kvb.sh - kv_b in the absorbed decode: each row dequantized as it is
# read (the new default) against the f32 copy kept from load, in a new build
# and an older one whose default was the copy. Decode of 64 tokens from a
# 1-token prompt (depth 0) on models already converted to each format, one
# thread by process CPU time (with the read probe, --bw) and two by wall
# clock; the four configurations interleaved in every round.
#   sh bench/kvb.sh OLD_COLIBRI NEW_COLIBRI MODEL_PREFIX "q4g64 q8 bf16 fp8b" [rounds] > raw.txt
#   python3 bench/kvb_summary.py raw.txt
# MODEL_PREFIX: as bench/prefill_e2e.sh (the model in format F is MODEL_PREFIX$F).
set -e
OC=$1 NC=$2 PFX=$3 FMTS=$4 ROUNDS=${5:-3}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    for f in $FMTS; do
        # old-copy: the old default; old-rows: its --no-kv-b-f32; new-rows: the new default; new-copy: --kv-b-f32
        for cfg in old-copy old-rows new-rows new-copy; do
            case $cfg in
            old-copy) c=$OC; x= ;;
            old-rows) c=$OC; x=--no-kv-b-f32 ;;
            new-rows) c=$NC; x= ;;
            new-copy) c=$NC; x=--kv-b-f32 ;;
            esac
            $c bench -m "$PFX$f" -p 1 -n 64 -r 1 -t 1 --cpu-time --bw $x 2>/dev/null |
                grep -E '^model=|^read bandwidth|^memory' | sed "s/^/t1 $cfg $f r$r /"
            $c bench -m "$PFX$f" -p 1 -n 64 -r 1 -t 2 $x 2>/dev/null | grep -E '^model=' | sed "s/^/t2 $cfg $f r$r /"
        done
    done
done
echo "loadavg end: $(cat /proc/loadavg)"
