#!/bin/sh
# Decode latency of expert parallelism against the link delay: every rank of
# `mpirun -np N` runs inside one network namespace whose loopback carries a
# `tc netem` delay, and the ranks talk over TCP through it (shared memory
# off), so every message between two ranks waits DELAY once each way. Prints,
# per delay, colibri bench's decode tok/s and its per-token round trips and
# bytes per rank; the bound is (round trips per token on the critical path)
# x 2 x DELAY added to the delay-0 time per token.
#   sh bench/mpi_netem.sh [MODEL [NP [DELAYS_US [BENCH_ARGS...]]]]
# Needs root (ip netns, tc), a make MPI=1 build in build/mpi.
set -eu
model=${1:-models/colibri-tiny}; np=${2:-3}; delays=${3:-"0 50 200"}
[ $# -gt 3 ] && shift 3 || set --
ns=colibri-mpi-netem.$$
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for d in $delays; do
    if [ "$d" -gt 0 ]; then ip netns exec "$ns" tc qdisc replace dev lo root netem delay "${d}us"
    else ip netns exec "$ns" tc qdisc del dev lo root 2>/dev/null || true; fi
    echo "== one-way delay ${d} us, $np ranks"
    ip netns exec "$ns" mpirun -np "$np" --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo \
        build/mpi/colibri bench -m "$model" --mpi "$@" 2>&1 | grep -E "^(model=|mpi rank)"
done
