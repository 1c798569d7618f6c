/* model/forward.h - the forward pass of a DeepSeek-V3-family model, in f32,
 * exactly as model-spec.md §2-3 states it.
 *
 * A `struct fwd_state` is the per-session part: the latent cache (normalized
 * c_kv and roped k_pe per layer per position, a kv/ cache in some tier) and
 * attention scratch; the model stays read-only, so any number of states may
 * share one model. Prefill uses the expanded MLA form on rows decoded from the
 * cache; decode uses the absorbed form, reading the f32 tier directly and every
 * other tier through kv_attend's native consumer. Both read the same cache and
 * give the same logits up to rounding. The f32 tier is the reference path. */
#ifndef COLIBRI_MODEL_FORWARD_H
#define COLIBRI_MODEL_FORWARD_H

#include "kv/attend.h"
#include "kv/cache.h"
#include "model/model.h"

struct fwd_state {
    int n_ctx;
    struct kv_cache *kv;        /* n_layers x n_ctx rows */
    struct kv_scratch *scratch; /* for kv_attend */
};

/* tier / rope: kv/codec.h ids (KV_TIER_F32 and KV_ROPE_DEFAULT for the
 * reference); int8_mode: enum kv_int8_mode for kv_attend (KV_INT8_OFF = exact). */
int  fwd_state_init(struct fwd_state *st, const struct model *m, int n_ctx, enum kv_tier tier,
                    enum kv_rope_prec rope, int int8_mode, struct colibri_err *err);
void fwd_state_free(struct fwd_state *st);

enum fwd_mode { FWD_EXPANDED = 0, FWD_ABSORBED = 1 };

/* Runs S tokens at positions pos0..pos0+S-1 (all earlier positions must already
 * be cached), caching their rows. logits: NULL, or S x vocab floats when
 * all_logits, else vocab floats for the last token. Token ids and positions are
 * checked; nothing is cached on failure. */
int model_forward(const struct model *m, struct fwd_state *st, const int32_t *tokens, int S, int pos0,
                  enum fwd_mode mode, float *logits, int all_logits, struct colibri_err *err);

/* Rows [row0, row0 + n) of a batch, fed to state st at positions pos0... */
struct fwd_group {
    struct fwd_state *st;
    int row0, n, pos0;
};

/* One forward over several groups (e.g. one decode token for each of several
 * sessions): the weights are read once for all rows, each group caches and
 * attends in its own state. Groups must tile the rows in order and name
 * distinct states. logits: all rows x vocab when all_logits, else one row per
 * group (its last token). Every group is checked before anything is cached.
 * Each row's result equals running its group alone (quant_matmul is batch
 * invariant, see quant/kernels.h). */
int model_forward_groups(const struct model *m, const struct fwd_group *grp, int n_grp, const int32_t *tokens,
                         enum fwd_mode mode, float *logits, int all_logits, struct colibri_err *err);

#endif
