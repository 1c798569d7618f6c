/* model/parts.h - a decoder layer is made of three parts:
 *
 *   residual scheme   how the layer's two blocks read and update the
 *                     residual stream (plain: x += mixer(norm x), then
 *                     x += ffn(norm x))
 *   token mixer       mixes positions and owns the layer's cache entry
 *                     (MLA; MLA with DSA selection; V4's window + compressed
 *                     attention, whose per-session state is its own)
 *   channel mixer     mixes channels row by row (dense SwiGLU MLP; MoE, its
 *                     router one of enum model_router)
 *
 * model_layer_parts() chooses a layer's parts from its config, whose fields
 * the family table (model/config.c) set; nothing else asks which family a
 * model is. The forward (model/forward.c) runs each layer through its
 * residual scheme, which calls the mixers through these tables. A new
 * family adds parts (a table each, in its own file) and the config fields
 * that choose them, not a pipeline.
 *
 * Every part's forward:
 *  - runs the rows of the groups in `pr` (model/forward.h: each group is a
 *    session's rows at its positions) over in[n][hidden] into out[n][hidden];
 *  - reads its weights from the layer (struct layer_weights, model/model.h),
 *    which its `load` filled at model_load from the checkpoint's names, and
 *    writes what it caches to each group's state (the token mixer only);
 *  - runs its products, norms, adds and cache writes through pr->ex
 *    (model/fwd_ops.h: the CPU, or a device), so a part is written once;
 *  - takes scratch from pr->b (allocated once per session) and returns 0 or
 *    a negative COLIBRI_E* with a message. */
#ifndef COLIBRI_MODEL_PARTS_H
#define COLIBRI_MODEL_PARTS_H

#include "colibri.h"
#include "kv/cache.h"
#include "model/config.h"

struct model;
struct fwd_group;
struct run_bufs;
struct layer_parts;
struct layer_weights;
struct model_loader;
struct fwd_exec;

/* A part's weights of layer li, loaded into its members of lw (model/loader.h). */
typedef int (*part_load_fn)(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err);

/* Which MLA form a forward asks for (model/forward.h). */
enum fwd_mode { FWD_EXPANDED = 0, FWD_ABSORBED = 1 };

/* What a part sees of one forward through layer li: ex runs its operations
 * (model/fwd_ops.h) on b, that executor's buffers. */
struct part_run {
    const struct model *m;
    const struct fwd_group *grp;
    int n_grp;
    int li;
    enum fwd_mode mode;
    struct run_bufs *b;
    const struct fwd_exec *ex;
};

/* One append-only row array of a mixer's state (token_mixer.state_rows). */
struct mixer_rows {
    void *base;
    size_t row_bytes;
    int n;              /* rows in use at the state's position: position / every */
    int cap;
    int every;          /* positions per row */
};

struct token_mixer {
    const char *name;
    part_load_fn load;
    int (*forward)(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err);
    /* The layer's cache row beyond the base latent + RoPE parts (kv/cache.h):
     * adds the parts this mixer keeps per position to *spec (index_tier: the
     * tier of parts the user did not spell), or checks the ones spelled.
     * NULL: nothing beyond the base row. */
    int (*cache_parts)(const struct model_config *c, int li, enum kv_tier index_tier, struct kv_layer_spec *spec,
                       struct colibri_err *err);
    /* Optional per-session state the mixer keeps instead of (or besides)
     * cache rows: made for a context of n_ctx positions (*bytes: what it
     * holds), freed by state_free, its rows laid out as spec (the layer's
     * KV tier and parts, cache_parts applied; NULL: f32). Such state only
     * moves forward; it goes back only to position 0 (state_reset) or to a
     * snapshot. NULL: none. */
    int (*state_new)(const struct model *m, int li, int n_ctx, const struct kv_layer_spec *spec, void **state,
                     size_t *bytes, struct colibri_err *err);
    void (*state_free)(void *state);
    void (*state_reset)(void *state);   /* back to an empty session (position 0) */
    /* Snapshots of such a state (NULL: none). The state is what goes forward
     * (a window, open blocks) plus append-only row arrays (rows, once
     * written, never change), so a snapshot holds the first part and the
     * row counts, not the rows: snap_bytes(state) bytes, the same for every
     * state of one layer of one model and session size. snap_save writes
     * the state at its position to buf; snap_restore makes the state what
     * it was when buf was saved, taking the rows below the snapshot's counts
     * from rows_from (another state of the same layer, or NULL: the rows
     * are in place already: the state held them, or state_rows filled
     * them); a snapshot of another layout is refused naming the field.
     * state_rows lists the row arrays (at most max): base, bytes per row,
     * rows in use at the state's position, capacity; returns how many. */
    size_t (*snap_bytes)(const void *state);
    void (*snap_save)(const void *state, void *buf);
    int (*snap_restore)(void *state, const void *buf, const void *rows_from, struct colibri_err *err);
    int (*state_rows)(void *state, struct mixer_rows *rows, int max);
};

struct channel_mixer {
    const char *name;
    int routed;                 /* 1: routed experts (in the model's expert store) */
    part_load_fn load;
    int (*forward)(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err);
    /* Optional: told, before the previous layer's channel mixer runs, an
     * estimate of this layer's FFN input before its norm, resid[n][hidden]:
     * the residual after the previous layer's attention block (plain), or
     * the streams at that point collapsed by this layer's own FFN pre-mix
     * (hyper-connections), so that a store that reads from disk can start
     * reading this layer's likely experts (a hint: never changes the output;
     * 0, or its product's error). */
    int (*predict)(const struct model *m, int li, const float *resid, int n, struct run_bufs *b,
                   struct colibri_err *err);
    /* Optional: told the slice's token ids tok[n] (checked in range) before
     * any layer runs, so that a mixer whose experts follow from the ids
     * alone (V4's hash layers) names them to the store at once and their
     * reads overlap the layers before it (a hint: never changes the
     * output). *room is the cache slots such early hints may still fill
     * (INT_MAX for a store without a cache): a layer naming more than *room
     * experts names none and sets it to 0, else subtracts what it named, so
     * that one layer's early reads never evict another's before its use. */
    void (*tokens_known)(const struct model *m, int li, const int32_t *tok, int n, int *room);
};

struct residual_scheme {
    const char *name;
    part_load_fn load;          /* its norms (and, with several streams, its mixing weights) */
    /* x[n][hidden] in place through the layer's parts. */
    int (*forward)(const struct part_run *pr, const struct layer_parts *p, float *x, int n,
                   struct colibri_err *err);
    /* With several streams (config hc_mult > 1 rows of x per token): the
     * model-level weights that collapse them before the final norm, and
     * the collapse x [n][streams * hidden] -> out [n][hidden] (out may be x).
     * NULL for one stream. */
    part_load_fn head_load;     /* called with li = -1 */
    int (*head)(const struct model *m, float *x, int n, float *out, struct colibri_err *err);
};

struct layer_parts {
    const struct residual_scheme *residual;
    const struct token_mixer *mixer;
    const struct channel_mixer *ffn;
};

/* The parts (model/parts.c, model/mla.c, model/moe.c, model/mlp.c,
 * model/residual_hyper.c, model/mixer_v4.c, model/moe_v4.c). */
extern const struct residual_scheme model_residual_plain;
extern const struct residual_scheme model_residual_hyper;   /* V4 hyper-connections, hc_mult streams */
extern const struct token_mixer model_mixer_v4;             /* V4 window + CSA / HCA attention */
extern const struct token_mixer model_mixer_kda;            /* GLM-5.3 KDA (model/mixer_kda.h) */
extern const struct token_mixer model_mixer_glm53_mla;      /* GLM-5.3 MLA + pooled DSA (mixer_glm53_mla.h) */
extern const struct channel_mixer model_ffn_moe_v4;         /* V4 MoE: sqrtsoftplus or hash routing */
extern const struct token_mixer model_mixer_mla;      /* MLA, every cached position */
extern const struct token_mixer model_mixer_mla_dsa;  /* MLA over the DSA indexer's selection */
extern const struct channel_mixer model_ffn_mlp;
extern const struct channel_mixer model_ffn_moe;

/* Layer li's parts (li >= num_hidden_layers: an MTP layer, whose attention
 * has no indexer in the reference). */
void model_layer_parts(const struct model_config *c, int li, struct layer_parts *out);

#endif
