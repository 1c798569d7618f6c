#!/bin/sh
# The streamed store against today's mmap path under one memory limit:
#   sh bench/stream_mmap.sh COLIBRI MODEL LEAVE [ROUNDS]
# COLIBRI: the binary; MODEL: a checkpoint larger than LEAVE; LEAVE: the
# memory left to everything but a hog (bench/memhog, run as root), e.g. 6G.
# The hog locks all of MemAvailable but LEAVE, so the page cache (where the
# mmap path keeps every weight) holds about LEAVE; the streamed store gets
# --ram LEAVE. Per round, with the model files' page cache dropped first
# (bench/pagecache --evict, checked with mincore): the mmap path (no --ram:
# the model fits 80% of the machine's memory, so it is mapped resident and
# prefaulted at load) and the streamed store, one repetition each, decode
# wall-clock tok/s. The disk's O_DIRECT rate is measured in the same run.
set -eu
colibri=$1; model=$2; leave=$3; rounds=${4:-3}
dir=$(dirname "$colibri")
hog=${MEMHOG:-$dir/bench/memhog}; pc=${PAGECACHE:-$dir/bench/pagecache}; diskread=${DISKREAD:-$dir/bench/diskread}
args="-m $model -p ${PROMPT:-4} -n ${GEN:-8} -t ${THREADS:-2} -r 1"
files=$(ls "$model"/*.safetensors)
mem() { awk '/^(MemAvailable|Cached|Mlocked):/ { printf "%s %.0f MiB  ", $1, $2 / 1024 }' /proc/meminfo; echo; }
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model $model ($(du -sh "$model" | cut -f1)), memory left to all but the hog: $leave"
"$diskread" --qd 8 --size 26214400 --total 2147483648 $files
"$pc" --evict $files > /dev/null
"$hog" --leave "$leave" > /tmp/stream_mmap_hog.$$ &
hog_pid=$!
trap 'kill $hog_pid 2>/dev/null; wait $hog_pid 2>/dev/null; rm -f /tmp/stream_mmap_hog.$$' EXIT
while ! grep -q locked /tmp/stream_mmap_hog.$$; do
    kill -0 $hog_pid 2>/dev/null || { echo "memhog failed"; exit 1; }
    sleep 1
done
echo "# hog: $(cat /tmp/stream_mmap_hog.$$)"
r=1
while [ $r -le "$rounds" ]; do
    echo "## round $r (load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$pc" --evict $files | tail -1
    echo "### mmap (no --ram): $(mem)"
    "$colibri" bench $args 2>&1 | grep -E '^(model=|experts:|memory:)|resident|mapped' || true
    "$pc" $files | tail -1
    "$pc" --evict $files | tail -1
    echo "### streamed (--ram $leave): $(mem)"
    "$colibri" bench $args --ram "$leave" --state-dir none 2>&1 | grep -E '^(model=|experts:|memory:)|streamed' || true
    r=$((r + 1))
done
"$diskread" --qd 8 --size 26214400 --total 2147483648 $files
