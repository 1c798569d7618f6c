#!/bin/sh
# DeepSeek-V4's routed experts streamed against the disk and against resident:
#   sh bench/v4_stream.sh COLIBRI MODEL SLOTS [ROUNDS]
# MODEL: a V4 checkpoint (colibri synth --preset v4-flash); SLOTS: experts the
# cache holds (the --ram budget is the weights outside the experts plus that
# many slots of the largest expert, rounded up to a MiB). First the logits
# with the experts streamed are compared with the resident ones
# (build/bench/stream_same). Then per round, interleaved: the disk's O_DIRECT
# rate with expert-sized reads at queue depth 8 (build/bench/diskread), the
# streamed decode from cold (the files' page cache dropped with
# posix_fadvise DONTNEED, no hot-set state file; the store reads with
# O_DIRECT, so every expert it reads comes from the disk), and the resident
# decode (weights in memory, page cache warm). -p ${PROMPT:-64} -n ${GEN:-16}
# -t ${THREADS:-2}, one repetition each (the first repetition is the cold one).
set -eu
colibri=$1; model=$2; slots=$3; rounds=${4:-3}
bin=$(dirname "$colibri")
files=$(ls "$model"/*.safetensors)
evict() { python3 -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' $files; }
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$colibri" info -m "$model" 2>/dev/null | grep -E '^(experts|weights|memory):'
fixed=$("$colibri" info -m "$model" --ram 1K 2>&1 | sed -n 's/.*other than routed experts need \([0-9.]*\) MiB.*/\1/p')
k=$("$colibri" info -m "$model" 2>/dev/null | sed -n 's/^experts:.*(top-\([0-9]*\)).*/\1/p')   # config.json may leave it to the family's default
least=$("$colibri" info -m "$model" --ram 1K 2>&1 | sed -n 's/.* at least \([0-9.]*\) MiB$/\1/p')
expert=$(awk -v a="$least" -v f="$fixed" -v k="$k" 'BEGIN { printf "%.3f", (a - f) / k }')
ram=$(awk -v f="$fixed" -v e="$expert" -v s="$slots" 'BEGIN { printf "%.0fM", f + e * s + 4 }')
size=$(awk -v e="$expert" 'BEGIN { printf "%.0f", e * 1048576 }')
echo "# experts of $expert MiB, top-$k; --ram $ram ($slots slots)"
"$colibri" info -m "$model" --ram "$ram" 2>&1 | grep 'routed experts streamed'
args="-m $model -p ${PROMPT:-64} -n ${GEN:-16} -t ${THREADS:-2} -r 1"
"$bin/bench/stream_same" "$model" "$(awk -v f="$fixed" -v e="$expert" -v s="$slots" 'BEGIN { printf "%.0f", (f + e * s + 4) * 1048576 }')" 8 4
r=1
while [ "$r" -le "$rounds" ]; do
    echo "## round $r (load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$bin/bench/diskread" --qd 8 --size "$size" --total 2147483648 $files
    evict; echo "### streamed, cold"
    "$colibri" bench $args --ram "$ram" --state-dir none 2>/dev/null | grep -E '^(model=|experts:|repetition)'
    echo "### resident"
    "$colibri" bench $args 2>/dev/null | grep -E '^model='
    r=$((r + 1))
done
"$bin/bench/diskread" --qd 8 --size "$size" --total 2147483648 $files
