/* model/indexer.h - the DeepSeek Sparse Attention lightning indexer of one
 * layer (DeepseekV32Indexer / GlmMoeDsaIndexer in transformers), in f32.
 *
 * For the rows of a forward (x = the layer's normed input, q_resid = the
 * MLA's normed q latent q_a_layernorm(q_a_proj(x))):
 *
 *   k     = LayerNorm(wk x)  (weight and bias, eps 1e-6), RoPE on its first
 *           qk_rope_head_dim values; written to the row's index-key part of
 *           the kv_cache (KV_PART_INDEX_KEY, index_head_dim values)
 *   q[h]  = (wq_b q_resid)[h], RoPE on the first qk_rope_head_dim values
 *   w[h]  = weights_proj(x)[h] * index_n_heads^-1/2
 *   score[t] over the cached positions t <= pos (kv/index.h), and the
 *   selection: the top min(index_topk, pos + 1) positions, ascending.
 *
 * RoPE pairs follow the family: half-split (x[i], x[i + dr/2]) for V3.2,
 * interleaved (x[2i], x[2i+1]) for GLM-5, with the model's frequencies and
 * yarn factor (model/config.h). DeepSeek's Hadamard rotation and fp8 of q/k
 * are skipped, as transformers skips them (a rotation leaves q.k unchanged).
 *
 * GLM-5 'shared' layers (model_config.indexer_full[layer] == 0) have no
 * indexer: model_indexer_select leaves the selection of the most recent full
 * layer in place for them to reuse. Layer 0 is always full (config.c refuses
 * otherwise).
 *
 * The selection lives in struct indexer_bufs (one per run_bufs, sized for
 * its rows), row by row: sel[row][0..n_sel[row]). */
#ifndef COLIBRI_MODEL_INDEXER_H
#define COLIBRI_MODEL_INDEXER_H

#include <stdint.h>

#include "colibri.h"
#include "kv/cache.h"
#include "kv/index.h"
#include "model/config.h"
#include "quant/qtensor.h"

#define INDEXER_K_NORM_EPS 1e-6f

struct indexer_weights {
    int present;                /* 0: no DSA, or a shared layer */
    struct qtensor wq_b;        /* [nI * dI, q_lora_rank] */
    struct qtensor wk;          /* [dI, hidden] */
    struct qtensor weights_proj;/* [nI, hidden], f32 (transformers keeps it in fp32) */
    float *k_norm_w, *k_norm_b; /* [dI] */
};

/* How a loader hands the indexer its tensors (model/weights.c): a Linear
 * weight in the dense role's format (keep_f32: always f32), a vector in f32.
 * Names are full checkpoint names. Both return 0 or a negative COLIBRI_E*
 * with a message naming the tensor. */
struct indexer_tensor_io {
    void *ctx;
    int (*mat)(void *ctx, const char *name, int rows, int cols, int keep_f32, struct qtensor *w,
               struct colibri_err *err);
    int (*vec)(void *ctx, const char *name, int n, float **out, struct colibri_err *err);
};

/* Loads layer li's indexer when the config gives it one (names from the
 * family table). 0 or the loader's error. */
int  model_indexer_load(struct indexer_weights *w, const struct model_config *c, int li,
                        const struct indexer_tensor_io *io, struct colibri_err *err);
void model_indexer_free(struct indexer_weights *w);
/* Bytes of its weights (data + scales) and of its small vectors. */
int64_t model_indexer_bytes(const struct indexer_weights *w, int64_t *small);

/* Activations and selection of the indexer for up to cap rows. */
struct indexer_bufs {
    int cap, k_max;             /* rows; selected positions per row (index_topk) */
    float *q;                   /* [cap][nI * dI] */
    float *w;                   /* [cap][nI] */
    float *k;                   /* [cap][dI] */
    int32_t *sel;               /* [cap][k_max] */
    int *n_sel;                 /* [cap] */
    float *score;               /* [score_cap] */
    size_t score_cap;
    struct kv_index_sel topk;   /* grows with the context */
    float *work;                /* kv_index_scores' working memory */
};

/* NULL in *out (and 0) for a config without DSA. */
int  model_indexer_bufs_new(const struct model_config *c, int cap, struct indexer_bufs **out, struct colibri_err *err);
void model_indexer_bufs_free(struct indexer_bufs *b);
/* Sizes the scores and the selection for contexts of up to n_ctx positions,
 * so that selecting allocates nothing. NULL b: nothing. 0 or COLIBRI_ENOMEM. */
int  model_indexer_bufs_reserve(struct indexer_bufs *b, int n_ctx, struct colibri_err *err);

/* Gives layer l's spec an index-key part (index_head_dim values in tier,
 * f32 or fp8) when the layer has its own indexer and the spec none; a
 * shared layer gets none. A spec's own index-key part must have that width
 * and tier, and only on a layer with an indexer. Nothing without DSA (the
 * DSA token mixer's cache_parts, model/parts.h). 0 or COLIBRI_EINVAL /
 * EUNSUPPORTED naming the layer or tier. */
int model_indexer_kv_layer(const struct model_config *c, int l, enum kv_tier tier, struct kv_layer_spec *spec,
                           struct colibri_err *err);

/* RoPE on x[0..dr) for position pos as the family pairs the indexer's
 * values (half-split or interleaved). */
void model_indexer_rope(float *x, int dr, int pos, const struct model_config *c);

/* Layer li's projections for n rows: wq_b(q_resid), wk(x), weights_proj(x)
 * into b (x [n][hidden], q_resid [n][q_lora_rank]), working memory from s.
 * Nothing for a shared layer. 0, or model_linear's error. */
int model_indexer_project(const struct indexer_weights *w, const float *x, const float *q_resid, int n,
                          struct indexer_bufs *b, struct quant_scratch *s, struct colibri_err *err);
/* Rows row0..row0+S-1 of b (after model_indexer_project), at positions pos0..:
 * normalises and rotates their keys and writes them to kv, then leaves each
 * row's selection over the positions <= its own in b (a shared layer returns
 * at once, keeping the previous selection). n_threads for the scoring. */
int model_indexer_select(const struct model_config *c, const struct indexer_weights *w, int li,
                         struct kv_cache *kv, int row0, int S, int pos0, struct indexer_bufs *b, int n_threads,
                         struct colibri_err *err);

#endif
