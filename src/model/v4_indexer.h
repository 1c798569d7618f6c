/* model/v4_indexer.h - DeepSeek-V4's lightning indexer (DeepseekV4Indexer and
 * DeepseekV4IndexerScorer in transformers) for one query, in f32, after its
 * projections. Its keys are the entries of its own overlap compressor
 * (v4_compress.h with head_dim = index_head_dim, the indexer's kv_proj,
 * gate_proj, position_bias and kv_norm); for a query at position pos:
 *
 *   q[h]     = q_b_proj(q_residual)[h] (index_head_dim values), RoPE on its
 *              last rope.dr values at pos (the "compress" rope)
 *   score[s] = sum_h relu(q[h] . key[s]) * index_head_dim^-1/2
 *                    * weights_proj(x)[h] * index_n_heads^-1/2
 *   selected = the top min(index_topk, n_entries) entries by score among
 *              the visible ones (s < (pos + 1) / ratio), largest first; the
 *              attention sees only these compressed entries.
 *
 * transformers fills the rest of its top-k with -1 when fewer entries are
 * visible; here *n_sel says how many are real. Reentrant; nothing allocated;
 * 0 or COLIBRI_EINVAL naming the bad value. */
#ifndef COLIBRI_MODEL_V4_INDEXER_H
#define COLIBRI_MODEL_V4_INDEXER_H

#include <stdint.h>

#include "colibri.h"
#include "model/v4_rope.h"

struct v4_indexer {
    int n_heads;          /* index_n_heads */
    int head_dim;         /* index_head_dim */
    int topk;             /* index_topk */
    int ratio;            /* the CSA compress rate */
    struct v4_rope rope;  /* the "compress" rope */
};

/* score [n_entries] for the query at pos: q [n_heads][head_dim] unrotated
 * (rotated into qrot [n_heads][head_dim], the caller's scratch), w [n_heads]
 * = weights_proj(x) unscaled, keys [n_entries][head_dim]. Every entry is
 * scored; the visibility rule applies in model_v4_indexer_select. */
int model_v4_indexer_scores(const struct v4_indexer *ix, int pos, const float *q, const float *w, const float *keys,
                            int n_entries, float *qrot, float *score, struct colibri_err *err);

/* sel [min(topk, n_entries)]: the selection for the query at pos, largest
 * score first (ties to the lower index); *n_sel real entries. */
int model_v4_indexer_select(const struct v4_indexer *ix, int pos, const float *score, int n_entries, int32_t *sel,
                            int *n_sel, struct colibri_err *err);

#endif
