#!/bin/sh
# Cold decode of a model whose routed experts are streamed, on 1, 2 and 3
# MPI ranks of this machine, each rank with its own expert store under the
# same --ram: sh bench/mpi_stream.sh MODEL RAM [ROUNDS [RANKS]]
# Per round and rank count (interleaved), the page cache of the model's files
# is dropped first (posix_fadvise DONTNEED; the streamed store reads with
# O_DIRECT anyway), then one repetition of `bench -p 4 -n 16 -t 1` (an
# expert cache that starts empty). Prints the decode line, the store's line
# per rank (reads, MiB from disk) and, with MPI, the per-token exchange.
# All ranks share this machine's disk and cores: see bench/mpi-results.md for
# what that can and cannot show.
set -eu
model=$1; ram=$2; rounds=${3:-3}; ranks=${4:-"1 2 3"}
colibri=build/mpi/colibri
files=$(ls "$model"/*.safetensors)
evict() { python3 -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' $files; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args="-m $model --ram $ram -p 4 -n 16 -r 1 -t 1 --state-dir none"
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); model $model, --ram $ram"
r=1
while [ "$r" -le "$rounds" ]; do
    for np in $ranks; do
        evict
        echo "## round $r, $np rank(s) (load $(cut -d' ' -f1-3 /proc/loadavg))"
        if [ "$np" = 1 ]; then
            # shellcheck disable=SC2086
            "$colibri" bench $args 2>&1 | grep -E '^(model=|experts:)'
        else
            # shellcheck disable=SC2086
            mpirun --oversubscribe -np "$np" "$colibri" bench $args --mpi 2>&1 |
                grep -E '^(model=|experts:|mpi rank|mpi: rank [0-9]* read)'
        fi
    done
    r=$((r + 1))
done
