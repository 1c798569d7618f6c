#!/bin/sh
# bench/avx2_decode.sh - the AVX2 decode kernels (rows_* in src/quant/kernels_avx2.c)
# before and after, rounds interleaved, against the read probe measured in the same
# process: bench/matvec (bf16 fp8b mxfp4 q8 q4g32 q4g64, 1 and 2 threads) and
# colibri bench --bw on two synthetic models (v2-lite 3 layers with q8 dense and
# q4g32 experts; v4-flash 1 layer as the release stores it: fp8b dense, mxfp4
# experts, bf16 head).
#   sh bench/avx2_decode.sh OLD_BUILD NEW_BUILD MODELS [rounds] > raw.txt
#   python3 bench/avx2_decode_summary.py raw.txt
# OLD_BUILD and NEW_BUILD hold colibri and bench/matvec (make build/colibri
# build/bench/matvec). If OLD_BUILD does not exist it is built there from the
# commit before the row-group kernels. MODELS is a folder for the two models;
# missing ones are written first (colibri synth; minutes, not counted, 7 GB).
# PARTS="matvec" or "model" runs one half (default both); NETS="v2l" one model.
set -e
OLD=$(realpath -m "$1") NEW=$2 MODELS=$3 ROUNDS=${4:-3} PARTS=${PARTS:-matvec model} NETS=${NETS:-v2l v4f}
FMTS=bf16,fp8b,mxfp4,q8,q4g32,q4g64
if [ ! -x "$OLD/colibri" ]; then
    rev=$(git log --format=%H -1 --grep='^quant/kernels_avx2: walk adjacent rows')^
    src=$OLD-src
    [ -d "$src" ] || git worktree add --detach "$src" "$rev" >&2
    make -C "$src" -j2 BUILD="$OLD" "$OLD/colibri" "$OLD/bench/matvec" >&2
fi
have() { [ -f "$1/config.json" ] && ! ls "$1"/*.tmp >/dev/null 2>&1; }
case $PARTS in *model*)
    mkdir -p "$MODELS"
    case $NETS in *v2l*) have "$MODELS/v2l" ||
        "$NEW/colibri" synth "$MODELS/v2l" --preset v2-lite --layers 3 --experts q4g32 --dense q8 >&2 ;; esac
    case $NETS in *v4f*) have "$MODELS/v4f" || "$NEW/colibri" synth "$MODELS/v4f" --preset v4-flash >&2 ;; esac ;;
esac
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') ($(nproc) CPUs online)"
echo "loadavg start: $(cat /proc/loadavg)"
matvec_round() {
    for t in 1 2; do
        for b in old new; do
            if [ $b = old ]; then d=$OLD; else d=$NEW; fi
            OMP_NUM_THREADS=$t "$d/bench/matvec" --mib 128 --formats $FMTS |
                grep -E '^\| [a-z0-9]+ \| [0-9]+ \|' | sed "s/^/matvec $b t$t r$1 /"
        done
    done
}
model_round() {
    for m in $NETS; do
        for t in 1 2; do
            for b in old new; do
                if [ $b = old ]; then d=$OLD; else d=$NEW; fi
                "$d/colibri" bench -m "$MODELS/$m" -p 16 -n 16 -t $t -r 1 --bw 2>/dev/null |
                    grep -E '^model=|^read bandwidth' | sed "s/^/model $m $b t$t r$1 /"
            done
        done
    done
}
for r in $(seq "$ROUNDS"); do
    case $PARTS in *matvec*) matvec_round "$r" ;; esac
    case $PARTS in *model*) model_round "$r" ;; esac
    echo "loadavg after round $r: $(cat /proc/loadavg)"
done
echo "loadavg end: $(cat /proc/loadavg)"
