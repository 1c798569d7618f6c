#!/bin/sh
# The streamed store against today's mmap path under one memory limit:
#   sh bench/stream_mmap.sh COLIBRI MODEL RAM LEAVE [ROUNDS]
# COLIBRI: the binary; MODEL: a checkpoint larger than LEAVE; RAM: the
# streamed store's --ram; LEAVE: the memory left to everything but a hog
# (bench/memhog, run as root), a little above RAM for the process's own
# buffers. The hog locks all of MemAvailable but LEAVE, so the page cache
# (where the mmap path keeps every weight) holds about LEAVE at most, less
# what other processes take meanwhile (MemAvailable and Cached are printed
# before each run; the model's share of the page cache after the mmap run;
# the disk's sectors read during each run, by every process). The hog makes
# itself the OOM killer's first victim. Per
# round, with the model files' page cache dropped first
# (bench/pagecache --evict, checked with mincore): the mmap path (no --ram:
# the model fits 80% of the machine's memory, so it is mapped resident and
# prefaulted at load) and the streamed store, one repetition each, decode
# wall-clock tok/s. The disk's O_DIRECT rate is measured in the same run.
set -eu
colibri=$1; model=$2; ram=$3; leave=$4; rounds=${5:-2}
dir=$(dirname "$colibri")
hog=${MEMHOG:-$dir/bench/memhog}; pc=${PAGECACHE:-$dir/bench/pagecache}; diskread=${DISKREAD:-$dir/bench/diskread}
args="-m $model -p ${PROMPT:-4} -n ${GEN:-8} -t ${THREADS:-2} -r 1"
files=$(ls "$model"/*.safetensors)
disk=$(df --output=source "$model" | tail -1 | sed 's|/dev/||')
sectors() { awk '{ print $3 }' "/sys/block/$disk/stat" 2>/dev/null || echo 0; }
mem() { awk '/^(MemAvailable|Cached|Mlocked):/ { printf "%s %.0f MiB  ", $1, $2 / 1024 }' /proc/meminfo; echo; }
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model $model ($(du -sh "$model" | cut -f1)), --ram $ram, memory left to all but the hog: $leave"
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
    s0=$(sectors)
    "$colibri" bench $args 2>&1 | grep -E '^(model=|experts:|memory:)|resident|mapped' || true
    echo "read from $disk during the run (load and decode, every process): $(( ($(sectors) - s0) / 2048 )) MiB"
    "$pc" $files | tail -1
    "$pc" --evict $files | tail -1
    echo "### streamed (--ram $ram): $(mem)"
    s0=$(sectors)
    "$colibri" bench $args --ram "$ram" --state-dir none 2>&1 | grep -E '^(model=|experts:|memory:)|streamed' || true
    echo "read from $disk during the run (load and decode, every process): $(( ($(sectors) - s0) / 2048 )) MiB"
    r=$((r + 1))
done
"$diskread" --qd 8 --size 26214400 --total 2147483648 $files
