#include "mpi/share.h"

#include <stdio.h>

int mpi_share_owner(int layer, int e, int size, int rank0_owns)
{
    int first = rank0_owns ? 0 : 1, owners = size - first;
    return first + (int)(((long long)e + layer) % owners);
}

int mpi_share_check(int size, int rank0_owns, char *msg, int len)
{
    if (size < 1) {
        snprintf(msg, (size_t)len, "MPI: %d ranks", size);
        return -1;
    }
    if (!rank0_owns && size < 2) {
        snprintf(msg, (size_t)len, "MPI: rank 0 owns no routed experts (--mpi-rank0-experts 0) and there is no "
                                   "other rank: run with mpirun -np 2 or more");
        return -1;
    }
    return 0;
}
