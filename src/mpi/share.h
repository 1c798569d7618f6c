/* mpi/share.h - which rank owns each routed expert.
 *
 * Without weights, each MoE layer's experts are dealt out round robin over
 * the owning ranks, starting one owner further on every layer:
 * owner(layer, e) = first + (e + layer) mod (size - first), where first is 0
 * when rank 0 owns a share and 1 when only the other ranks do. So every
 * owner holds E/owners experts of every layer (one more for some),
 * neighbouring expert ids (often routed together, as groups are) sit on
 * different ranks, and the same expert id moves from rank to rank along the
 * layers.
 *
 * With weights (one per rank, >= 0, say each rank's disk read rate), the E
 * slots of a layer are dealt by smooth weighted round robin: for each slot
 * in turn every owner's credit grows by its weight and the owner with the
 * most credit (the lowest rank on a tie) takes the slot and gives back the
 * sum of the weights. A rank then owns E * w / sum(w) experts of every layer
 * (within one), spread over the ids rather than in a block, and expert e of
 * layer l sits in slot (e + l) mod E, so ids still move along the layers.
 * Equal weights give the same counts as no weights, though not the same
 * table when owners does not divide E.
 *
 * Pure and deterministic: every rank computes the same table from the same
 * weights without talking. Which rank runs an expert never changes the
 * output (rank 0 sums every expert's rows in ascending expert order). */
#ifndef COLIBRI_MPI_SHARE_H
#define COLIBRI_MPI_SHARE_H

struct mpi_share {
    int size, first, n_experts;
    int *slot_owner;            /* [n_experts] with weights; NULL: round robin */
};

/* Builds the table for n_experts experts per layer over size ranks;
 * weights: NULL or size values (rank 0's is ignored when !rank0_owns).
 * 0, or -1 with the reason in msg[len]: no rank to own experts (size < 1,
 * or size 1 without rank 0's share), a weight that is negative or not
 * finite, or every owner's weight 0. */
int mpi_share_init(struct mpi_share *s, int size, int rank0_owns, const double *weights, int n_experts, char *msg,
                   int len);
void mpi_share_free(struct mpi_share *s);

/* The owning rank of expert e (0 <= e < n_experts) of layer `layer` (>= 0). */
int mpi_share_owner(const struct mpi_share *s, int layer, int e);

/* How many of one layer's experts rank `rank` owns (the same for every layer). */
int mpi_share_count(const struct mpi_share *s, int rank);

#endif
