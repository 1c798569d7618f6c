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
};

struct colibri_session {
    colibri_model *model;
    struct fwd_state st;        /* the KV cache lives here */
    int pos;                    /* tokens cached: positions [0, pos) */
    int32_t *tokens;            /* [n_ctx]; tokens[i] is the token cached at position i */
};

#endif
