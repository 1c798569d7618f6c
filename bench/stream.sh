#!/bin/sh
# Streamed expert store against the disk: sh bench/stream.sh BASE NEW MODEL RAM [ROUNDS]
#   BASE, NEW: colibri binaries (before and after); MODEL: a checkpoint whose
#   routed experts exceed RAM (--ram); ROUNDS: interleaved rounds (default 3).
# Prints the disk's O_DIRECT rate at queue depth 1, 8, 32 with expert-sized
# reads (bench/diskread, built next to NEW as $BUILD/bench/diskread; on a
# shared virtual disk the rate moves from minute to minute, so each round
# measures depth 8 again before its runs), then per
# round each binary's decode with the page cache of the model's files dropped
# first (posix_fadvise DONTNEED; no root needed): three repetitions for NEW
# (O_DIRECT: repetition 1 starts with an empty expert cache, 2 and 3 with
# what 1 left; no hot-set state file, --state-dir none), and the same for
# BASE when it has the streamed store (it knows --state-dir), else one (a
# store reading through the page cache would read RAM after the first).
set -eu
base=$1; new=$2; model=$3; ram=$4; rounds=${5:-3}
diskread=${DISKREAD:-build/bench/diskread}
args="-m $model --ram $ram -p ${PROMPT:-4} -n ${GEN:-16} -t ${THREADS:-2}"
files=$(ls "$model"/*.safetensors)
evict() { python3 -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' $files; }
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
expert=$("$new" info -m "$model" 2>/dev/null | sed -n 's/.*routed experts \([0-9.]*\).*/\1/p')
echo "# model $model, --ram $ram"
for qd in 1 8 32; do "$diskread" --qd $qd --size 26214400 --total 2147483648 $files; done
"$diskread" --qd 8 --size 4194304 --total 2147483648 $files
r=1
while [ $r -le "$rounds" ]; do
    echo "## round $r (load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$diskread" --qd 8 --size 26214400 --total 2147483648 $files   # this round's bound
    if "$base" bench --help 2>&1 | grep -q state-dir; then
        evict; echo "### before, cold then warm"; "$base" bench $args --state-dir none -r 3 2>/dev/null | grep -E '^(repetition|model=|experts:|memory:)'
    else
        evict; echo "### before, cold"; "$base" bench $args -r 1 2>/dev/null | grep -E '^(model=|experts:|memory:)'
    fi
    evict; echo "### after, cold then warm"; "$new" bench $args --state-dir none -r 3 2>/dev/null | grep -E '^(repetition|model=|experts:|memory:)'
    r=$((r + 1))
done
"$diskread" --qd 8 --size 26214400 --total 2147483648 $files
