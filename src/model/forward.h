/* model/forward.h - the forward pass of a DeepSeek-V3-family model, in f32,
 * as model-spec.md §2-3 states it: embed -> layers [RMSNorm -> MLA ->
 * RMSNorm -> MLP or MoE] -> RMSNorm -> lm_head.
 *
 * A `struct fwd_state` is the per-session part: the latent cache (a kv/
 * cache in some tier), the attention scratch, the run buffers and the compute
 * context; the model stays read-only, so any number of states may share one
 * model. Prefill uses the expanded MLA form (or the absorbed form through the
 * attention door when that is cheaper, see mla.h); decode uses the absorbed
 * form through kv_attend for every tier. Both read the same cache and give
 * the same logits up to rounding. */
#ifndef COLIBRI_MODEL_FORWARD_H
#define COLIBRI_MODEL_FORWARD_H

#include "base/compute.h"
#include "kv/attend.h"
#include "kv/cache.h"
#include "model/fwd_ops.h"
#include "model/model.h"
#include "model/parts.h"
#include "model/runstate.h"

/* Rows a state's run buffers carry by default; longer prefills run in
 * slices of this many tokens. */
#define FWD_DEFAULT_BATCH 2048
#define FWD_MAX_BATCH 4096

struct fwd_state {
    const struct model *model;  /* the model the state was made for */
    int n_ctx;
    struct kv_cache *kv;        /* n_layers x n_ctx rows; NULL for a model without latent rows (kv_lora_rank 0) */
    struct kv_scratch *scratch; /* for kv_attend */
    struct run_bufs bufs;       /* activations, allocated once */
    struct compute_ctx cc;
    /* Prefill after cached rows may take the absorbed form when it is cheaper
     * (mla_prefill_absorbed). Off by default: the forms round differently, so
     * with it a prompt's logits depend on how much of it was cached, and
     * prefix reuse must give exactly what a cold prefill gives. */
    int absorbed_prefill;
    /* The cache layer of model layer li is li - kv_layer0: 0 for a model's
     * own state, num_hidden_layers for a state that caches only the MTP
     * layers (model/mtp.h). */
    int kv_layer0;
    /* Per-layer state of token mixers that keep their own (parts.h
     * state_new), [num_hidden_layers]; NULL when no layer has any. Such a
     * state only moves forward: the session cannot be truncated or copied. */
    void **mixer_state;
    size_t mixer_state_bytes;
    /* A device executor for this state's one-row decodes and the buffers
     * it runs on (model/fwd_device.h sets both); NULL: the CPU only. */
    const struct fwd_exec *dev;
    struct run_bufs *dev_bufs;
};

/* tier / rope: kv/codec.h ids (KV_TIER_F32 and KV_ROPE_DEFAULT for the
 * reference); int8_mode: enum kv_int8_mode for kv_attend (KV_INT8_OFF =
 * exact); max_batch: rows per forward slice (<= 0: FWD_DEFAULT_BATCH; at most
 * FWD_MAX_BATCH and n_ctx). Every
 * buffer a decode needs is allocated here. 0 or a negative COLIBRI_E*. */
int  fwd_state_init(struct fwd_state *st, const struct model *m, int n_ctx, int max_batch, enum kv_tier tier,
                    enum kv_rope_prec rope, int int8_mode, const struct compute_ctx *cc, struct colibri_err *err);
/* The same with layer l's cache row laid out as layers[l] (the model's
 * num_hidden_layers entries; kv/layout.h parses a user's spelling). A DSA
 * model's layers with an indexer get an f32 index-key part when their spec
 * has none. */
int  model_fwd_state_init_layers(struct fwd_state *st, const struct model *m, int n_ctx, int max_batch,
                           const struct kv_layer_spec *layers, int int8_mode, const struct compute_ctx *cc,
                           struct colibri_err *err);
/* A uniform layout (tier, rope) whose layers with a DSA indexer carry its
 * keys in index_tier (KV_TIER_F32, the exact one, or KV_TIER_FP8: one e4m3
 * per value and an f32 scale per row; others are refused); index_tier is
 * ignored for a model without DSA. */
int  fwd_state_init_index(struct fwd_state *st, const struct model *m, int n_ctx, int max_batch, enum kv_tier tier,
                          enum kv_rope_prec rope, int int8_mode, enum kv_tier index_tier,
                          const struct compute_ctx *cc, struct colibri_err *err);
void fwd_state_free(struct fwd_state *st);
/* Empties the token mixers' own states (fwd_state.mixer_state): the state
 * then takes position 0 next. */
void model_fwd_state_reset_mixers(struct fwd_state *st);
/* Bytes the state holds: cache (at full capacity), scratch, run buffers. */
int64_t fwd_state_bytes(const struct fwd_state *st);

/* What a forward hands back. logits: NULL, or vocab floats per emitted row;
 * rows emitted: every row when all_logits, else the last row of each group.
 * hidden: NULL, or hidden_size floats per emitted row: the residual stream
 * after the last layer, before the final norm (what an MTP module takes). */
struct fwd_out {
    float *logits;
    float *hidden;
    int all_logits;
    int all_hidden;             /* hidden for every row, whichever rows emit logits */
    /* 1: a forward of one row in the absorbed form, logits only, runs on
     * its state's device executor when the state has one (st->dev) */
    int on_device;
};

/* Rows [row0, row0 + n) of a batch, fed to state st at positions pos0... */
struct fwd_group {
    struct fwd_state *st;
    int row0, n, pos0;
};

/* One forward over several groups (e.g. one decode token for each of several
 * sessions): the weights are read once per slice of rows, each group caches
 * and attends in its own state; the activations live in the first group's
 * state. Groups must tile the rows in order and name distinct states. Every
 * group is checked before anything is cached. Each row's result equals
 * running its group alone (quant_matmul is batch invariant, see
 * quant/kernels.h). */
int model_forward_groups(const struct model *m, const struct fwd_group *grp, int n_grp, const int32_t *tokens,
                         enum fwd_mode mode, const struct fwd_out *out, struct colibri_err *err);

/* One decoder layer li over x[n][hidden] in place, through its parts
 * (model/parts.h), the rows belonging to groups sub[0..n_sub) as in
 * model_forward_groups (n <= b->cap, nothing checked). */
int model_layer_forward(const struct model *m, const struct fwd_group *sub, int n_sub, int li, float *x, int n,
                        enum fwd_mode mode, struct run_bufs *b, struct colibri_err *err);

/* Each layer's cache row as its token mixer keeps it: layers[l] (the user's
 * spelling, kv/layout.h, or a uniform tier) gains the parts the mixer adds,
 * e.g. a DSA layer's index key in index_tier (when not spelled). */
int model_cache_layout(const struct model *m, enum kv_tier index_tier, struct kv_layer_spec *layers,
                       struct colibri_err *err);

/* One group: S tokens at positions pos0..pos0+S-1 (earlier positions must
 * already be cached). */
int model_forward(const struct model *m, struct fwd_state *st, const int32_t *tokens, int S, int pos0,
                  enum fwd_mode mode, const struct fwd_out *out, struct colibri_err *err);

#endif
