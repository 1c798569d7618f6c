/* mpi/share.h - which rank owns each routed expert.
 *
 * Each MoE layer's experts are dealt out round robin over the owning ranks,
 * starting one owner further on every layer: owner(layer, e) =
 * first + (e + layer) mod (size - first), where first is 0 when rank 0 owns a
 * share and 1 when only the other ranks do. So every owner holds E/owners
 * experts of every layer (one more for some), neighbouring expert ids (often
 * routed together, as groups are) sit on different ranks, and the same
 * expert id moves from rank to rank along the layers. Pure: every rank
 * computes the same table without talking. */
#ifndef COLIBRI_MPI_SHARE_H
#define COLIBRI_MPI_SHARE_H

/* The owning rank of expert e of layer `layer`; size >= 1 ranks, size >= 2
 * when !rank0_owns (mpi_share_check says so first). */
int mpi_share_owner(int layer, int e, int size, int rank0_owns);

/* 0 when the ranks can own experts: size >= 1, and a rank besides 0 when
 * rank 0 owns none; else a message in msg[len] and -1. */
int mpi_share_check(int size, int rank0_owns, char *msg, int len);

#endif
