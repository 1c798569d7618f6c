/* api/internal.h - the structs behind the opaque handles of include/colibri.h,
 * shared by the src/api/ files (and only them). */
#ifndef COLIBRI_API_INTERNAL_H
#define COLIBRI_API_INTERNAL_H

#include "colibri.h"
#include "model/forward.h"
#include "model/model.h"

struct colibri_model {
    struct model m;
    int n_threads;              /* colibri_model_opts.n_threads (0: OpenMP default) */
    /* streamed experts: the hot set's state file and the counts read from it */
    char *hot_path;
    uint32_t *hot_counts;
    uint64_t fingerprint;
};

/* The model fingerprint of docs/FORMATS.md (KV files and hot-set files). */
uint64_t colibri_api_model_fingerprint(const struct model *m);

struct colibri_session {
    colibri_model *model;
    struct fwd_state st;        /* the KV cache lives here */
    int pos;                    /* tokens cached: positions [0, pos) */
    int32_t *tokens;            /* [n_ctx]; tokens[i] is the token cached at position i */
};

/* After this rank's load of cm (load_rc its result, load_err its message):
 * the MPI handshake of mpi_hello (mpi/ranks.h); on rank 0 a success sets
 * cm->m.remote. 0, or the error naming the rank that failed. */
int colibri_api_mpi_attach(colibri_model *cm, colibri_mpi *p, int load_rc, const struct colibri_err *load_err,
                   struct colibri_err *err);

#endif
