/* dev/attn_bench_dsa.h - decode attention per KV tier, dense against DeepSeek
 * Sparse Attention in the same run (colibri bench --attn --attn-dsa K).
 *
 * For every tier and context T, one token through one layer:
 *   dense      kv_attend over all T rows of a cache without index keys
 *   DSA        the indexer's projections (an f32 matvec of wq_b, wk and
 *              weights_proj, [nI*dI, q_lora] + [dI, hidden] + [nI, hidden]),
 *              kv_index_scores over all T index keys, kv_index_topk, and
 *              kv_attend_select over the K selected rows, on a cache whose
 *              rows carry the index key (f32, and fp8 with a scale per row)
 * Variants take turns call by call; each keeps its best time. Rows, keys and
 * queries are i.i.d. Gaussian (the time does not depend on the values). The
 * table gives ms per token per layer, dense / DSA, and the bytes of a row
 * with and without the index key. */
#ifndef COLIBRI_KV_ATTN_BENCH_DSA_H
#define COLIBRI_KV_ATTN_BENCH_DSA_H

#include <stdio.h>

#include "colibri.h"
#include "dev/attn_bench.h"

struct kv_attn_bench_dsa_opts {
    int topk;                   /* index_topk (DeepSeek-V3.2: 2048) */
    int n_heads, head_dim;      /* index_n_heads, index_head_dim (64, 128) */
    int q_lora, hidden;         /* widths of the projections' inputs (1536, 7168) */
};

/* Uses o->ctx, o->heads[0], o->tiers, o->threads, o->min_time, o->cpu_time
 * of the dense bench's options. 0 or COLIBRI_EINVAL / ENOMEM naming what. */
int kv_attn_bench_dsa(const struct kv_attn_bench_opts *o, const struct kv_attn_bench_dsa_opts *d, FILE *table,
                      FILE *progress, struct colibri_err *err);

#endif
