/* model/pool_index.h - GLM-5.3's pooled DSA selection (Glm5NextTextIndexer
 * in transformers 5.18.0: index_kpool, index_kpool_always_select_tail), in
 * f32, after the indexer's projections. For the rows of a layer:
 *
 *   k[t]   = LayerNorm(wk x_t) (as GLM-5's indexer, no RoPE: GLM-5.3 is NoPE)
 *   gate[t]= compress_gate x_t                         (head_dim values)
 *   pools  = runs of kpool consecutive positions from 0; pool p is complete
 *            once position (p + 1) kpool - 1 exists, and only complete pools
 *            are candidates
 *   key[p][d] = sum_j softmax_j(gate[j][d] + ape[j][d]) k[j][d]
 *            over the pool's members j (ape: [kpool][head_dim], the learned
 *            position bias; the softmax per channel over the members)
 *   score[p] = sum_h w[h] relu(q[h] . key[p] / sqrt(head_dim))
 *            with q[h] = (wq_b q_resid)[h], w = weights_proj(x) / sqrt(n_heads)
 *
 * A query at position pos selects the top min(index_topk / kpool, visible)
 * complete pools whose last position is <= pos (ties: the lower pool first),
 * expanded to their positions, plus, with the tail rule, its own unfinished
 * pool's positions pos + 1 - (pos + 1) % kpool .. pos. Without the tail rule
 * a query before the first complete pool selects nothing (transformers then
 * attends uniformly over every key: the caller must refuse or mirror that).
 *
 * Nothing here allocates; scores and pool order are the caller's scratch.
 * Reentrant. */
#ifndef COLIBRI_MODEL_POOL_INDEX_H
#define COLIBRI_MODEL_POOL_INDEX_H

#include <stdint.h>

struct pool_index {
    int n_heads, head_dim;  /* config index_n_heads, index_head_dim */
    int kpool;              /* config index_kpool */
    int topk;               /* config index_topk (a multiple of kpool) */
    int tail;               /* config index_kpool_always_select_tail */
    const float *ape;       /* [kpool][head_dim] index_kpool_compress_ape */
};

/* The most positions one query selects: topk, plus kpool - 1 with the tail. */
int model_pool_index_max_sel(const struct pool_index *pi);

/* Pool key out [head_dim] of the kpool members' keys and gates [kpool][head_dim]. */
void model_pool_index_key(const struct pool_index *pi, const float *keys, const float *gates, float *out);

/* The selection of a query at position pos, from its q [n_heads][head_dim]
 * and w [n_heads], over pool_keys [n_pools][head_dim] (the complete pools
 * 0..n_pools-1; pools past pos are not candidates): positions ascending into
 * sel (model_pool_index_max_sel values at most), their count returned.
 * score: n_pools floats of scratch, order: n_pools ints. */
int model_pool_index_select(const struct pool_index *pi, int pos, const float *q, const float *w,
                            const float *pool_keys, int n_pools, float *score, int *order, int32_t *sel);

#endif
