/* api/internal.h - the structs behind the opaque handles of include/colibri.h,
 * shared by the src/api/ files (and only them). */
#ifndef COLIBRI_API_INTERNAL_H
#define COLIBRI_API_INTERNAL_H

#include "colibri.h"
#include "model/forward.h"
#include "model/fwd_device.h"
#include "model/model.h"

struct session_snaps;

struct colibri_model {
    struct model m;
    int n_threads;              /* colibri_model_opts.n_threads (0: OpenMP default) */
    /* streamed experts: the hot set's state file and the counts read from it */
    char *hot_path;
    uint32_t *hot_counts;
    uint64_t fingerprint;
    struct model_dev *dev;        /* colibri_model_opts.device (NULL: decode on the CPU) */
    /* rank 0 of --mpi: m.experts, the store over the ranks (for colibri_mpi_stats); else NULL */
    const struct expert_store *mpi_experts;
};

/* The model fingerprint of docs/FORMATS.md (KV files and hot-set files). */
uint64_t colibri_api_model_fingerprint(const struct model *m);

struct colibri_session {
    colibri_model *model;
    struct fwd_state st;        /* the KV cache lives here */
    int pos;                    /* tokens cached: positions [0, pos) */
    int32_t *tokens;            /* [n_ctx]; tokens[i] is the token cached at position i */
    struct session_spec *spec;  /* MTP drafting state (api/spec.c), NULL until a generation asks for it */
    struct model_dev_kv *dev_kv;  /* the device copy of the cache when the model has a device */
    struct session_snaps *snaps;  /* snapshots of a state that only goes forward (api/snapshots.h); NULL: none */
    size_t snaps_bytes;
    char kv_tier[16];             /* colibri_session_opts.kv_tier ("f32" when not set), for KV files of state */
    char kv_index[16];            /* the index keys' tier name (--kv-index, "f32" when not set), likewise */
};

/* After the session advanced to s->pos: a snapshot when it sits on a
 * multiple of the snapshot interval (api/api.c). */
void colibri_api_session_advanced(colibri_session *s);

/* After this rank's load of cm (load_rc its result, load_err its message):
 * the MPI handshake of mpi_hello (mpi/ranks.h); on rank 0 a success makes
 * cm->m.experts the store over the ranks (wrapping the one loaded). 0, or
 * the error naming the rank that failed. */
int colibri_api_mpi_attach(colibri_model *cm, colibri_mpi *p, int load_rc, const struct colibri_err *load_err,
                   struct colibri_err *err);
/* ---- speculative decoding with the model's MTP layer (api/spec.c) ----
 * The session keeps the MTP layer's cache beside its own: MTP row t holds the
 * pair (final hidden state at t, token at t+1), so rows [0, pos - 1) can be
 * filled as the main model runs, and the main model's final-normed hidden
 * states not yet paired are kept (at most COLIBRI_GEN_MAX_DRAFT + 1, or the
 * last of a prefill). Rows the session never computed (a prefix restored
 * from a KV file, tokens fed through colibri_batch_decode) stay stale: the
 * drafts after them are worse, the output is the same. */
struct session_spec;
/* Makes s ready to draft (the MTP state in the session's KV tier). 0,
 * COLIBRI_EUNSUPPORTED when the model has no MTP layer, or an error. */
int  colibri_spec_enable(colibri_session *s, struct colibri_err *err);
void colibri_spec_free(struct session_spec *sp);
int64_t colibri_spec_bytes(const struct session_spec *sp);
/* colibri_session_prefill for the generator, filling the MTP rows as it goes;
 * with defer (auto drafting, which may never draft) it fills none but keeps
 * the last prompt positions' hidden states, whose rows the first
 * colibri_spec_draft fills (the older rows stay stale). */
int  colibri_spec_prefill(colibri_session *s, const int32_t *tokens, int n, float *logits, int defer,
                          struct colibri_err *err);
/* Up to k drafts for positions pos+1.. given x, the token for position pos
 * (not yet cached): greedy over ids [0, n_text). Returns how many (0 when
 * the hidden state before x is not known), or a negative code. */
int  colibri_spec_draft(colibri_session *s, int32_t x, int k, int n_text, int32_t *drafts, struct colibri_err *err);
/* Feeds x and the k drafts in one absorbed forward: logits[(k + 1) * vocab],
 * row j the model's output after x, drafts[0..j). The session then holds all
 * k + 1; colibri_spec_keep says how many of them stay. */
int  colibri_spec_verify(colibri_session *s, int32_t x, const int32_t *drafts, int k, float *logits, struct colibri_err *err);
/* colibri_spec_verify and colibri_batch_decode in one: session i feeds
 * in[i][0..n_in[i]) (its pending token, then its drafts; 1 <= n_in[i] <=
 * COLIBRI_GEN_MAX_DRAFT + 1) in one absorbed forward of all of them; logits[i]
 * (NULL: not wanted) gets n_in[i] rows. A session with drafting state keeps
 * the hidden states colibri_spec_draft needs next. As colibri_batch_decode,
 * the sessions before the first that cannot advance (an id out of range, no
 * room in its context) advance, *n_done of them, and it and later ones do not. */
int  colibri_spec_verify_batch(colibri_session *const *s, const int32_t *const *in, const int *n_in, int n,
                               float *const *logits, int *n_done, struct colibri_err *err);
/* After colibri_spec_verify(pos0 = the position x went to): keeps n of the verified tokens. */
void colibri_spec_keep(colibri_session *s, int pos0, int n);

#endif
