#include "mpi/share.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int mpi_share_init(struct mpi_share *s, int size, int rank0_owns, const double *weights, int n_experts, char *msg,
                   int len)
{
    *s = (struct mpi_share){ size, rank0_owns ? 0 : 1, n_experts, NULL };
    if (size < 1 || n_experts < 1) {
        snprintf(msg, (size_t)len, "MPI: %d ranks, %d experts per layer", size, n_experts);
        return -1;
    }
    if (!rank0_owns && size < 2) {
        snprintf(msg, (size_t)len, "MPI: rank 0 owns no routed experts (--mpi-rank0-experts 0) and there is no "
                                   "other rank: run with mpirun -np 2 or more");
        return -1;
    }
    if (!weights) return 0;
    double total = 0;
    for (int r = s->first; r < size; r++) {
        if (!isfinite(weights[r]) || weights[r] < 0) {
            snprintf(msg, (size_t)len, "MPI: rank %d's weight %g is not a finite number >= 0", r, weights[r]);
            return -1;
        }
        total += weights[r];
    }
    if (!(total > 0)) {
        snprintf(msg, (size_t)len, "MPI: every expert-owning rank has weight 0: nobody would own an expert");
        return -1;
    }
    double *credit = calloc((size_t)size, sizeof *credit);
    s->slot_owner = malloc((size_t)n_experts * sizeof *s->slot_owner);
    if (!credit || !s->slot_owner) {
        free(credit);
        mpi_share_free(s);
        snprintf(msg, (size_t)len, "out of memory");
        return -1;
    }
    /* smooth weighted round robin: the owner furthest behind its share takes the slot */
    for (int slot = 0; slot < n_experts; slot++) {
        int best = -1;
        for (int r = s->first; r < size; r++) {
            credit[r] += weights[r];
            if (weights[r] > 0 && (best < 0 || credit[r] > credit[best])) best = r;
        }
        credit[best] -= total;
        s->slot_owner[slot] = best;
    }
    free(credit);
    return 0;
}

void mpi_share_free(struct mpi_share *s)
{
    free(s->slot_owner);
    s->slot_owner = NULL;
}

int mpi_share_owner(const struct mpi_share *s, int layer, int e)
{
    if (s->slot_owner) return s->slot_owner[(int)(((long long)e + layer) % s->n_experts)];
    int owners = s->size - s->first;
    return s->first + (int)(((long long)e + layer) % owners);
}

int mpi_share_count(const struct mpi_share *s, int rank)
{
    int n = 0;
    for (int e = 0; e < s->n_experts; e++) n += mpi_share_owner(s, 0, e) == rank;
    return n;
}
