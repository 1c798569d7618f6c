/* kv/index.h - DeepSeek Sparse Attention over a kv_cache: the lightning
 * indexer's scores against the index keys the cache holds as a row part
 * (KV_PART_INDEX_KEY, kv/cache.h), and the top-k selection that is passed to
 * kv_attend_select (kv/attend.h).
 *
 * For a query with per-head vectors q[h] (h < nI, dI values each, RoPE
 * already applied) and head weights w[h] (weights_proj(x)[h] * nI^-1/2):
 *
 *   score[t] = sum_h w[h] * relu(q[h] . k[t] * scale)      t < T, f32
 *
 * where k[t] is the index key of cached position t as its part's codec decodes
 * it (f32: exactly what was written) and scale = dI^-1/2
 * (DeepseekV32Indexer.forward). The selection is the min(k, T) positions with
 * the largest scores, returned in ascending position order (so that a
 * selection of every row gives kv_attend's own summation order); ties at the
 * boundary go to the lower position.
 *
 * Contract:
 *  - Only the index-key part of rows 0..T-1 of the layer is read.
 *  - kv_index_scores splits the rows over n_threads threads; every score is
 *    one thread's sum in an order fixed by the build, so the result does not
 *    depend on the thread count. An f32 key is read in place; any other
 *    tier's key is decoded (kv_codec_decode) one row at a time.
 *  - A struct kv_index_sel is owned by the caller, sized once
 *    (kv_index_sel_init) and reused; kv_index_topk allocates nothing.
 *    Not thread-safe: one selection per thread.
 */
#ifndef COLIBRI_KV_INDEX_H
#define COLIBRI_KV_INDEX_H

#include <stdint.h>

#include "colibri.h"
#include "kv/cache.h"

/* Widest index key scored (the shipped models: 128). */
#define KV_INDEX_MAX_DIM 512
/* Most index heads (the shipped models: 32, 64). */
#define KV_INDEX_MAX_HEADS 1024

/* score[0..T) for one query of nI heads: q is [nI][dI] with dI the cache's
 * index-key width, w is [nI]. work: kv_index_scores_work(nI, dI) floats of
 * working memory (NULL: allocated for the call). 0, or COLIBRI_EINVAL naming
 * what is wrong (no index-key part, q width, layer or T out of range). */
int kv_index_scores(const struct kv_cache *c, int layer, int T, int nI, const float *q, const float *w, float scale,
                    float *score, int n_threads, float *work, struct colibri_err *err);
size_t kv_index_scores_work(int nI, int dI);

/* Working memory of the selection: up to max_rows scored positions. */
struct kv_index_sel {
    int max_rows;
    uint64_t *keys;     /* [max_rows]: order key | position */
};
int  kv_index_sel_init(struct kv_index_sel *s, int max_rows, struct colibri_err *err);
void kv_index_sel_free(struct kv_index_sel *s);

/* The min(k, T) largest of score[0..T) into pos[] (ascending positions);
 * returns how many, or a negative COLIBRI_E* (T > max_rows, k < 1). NaN
 * scores are refused (COLIBRI_EINVAL naming the position). */
int kv_index_topk(struct kv_index_sel *s, const float *score, int T, int k, int32_t *pos,
                  struct colibri_err *err);

/* The plain reference of kv_index_scores on f32 keys[T][dI] (one loop, fmaf
 * in index order). */
void kv_index_scores_ref(int T, int nI, int dI, const float *keys, const float *q, const float *w, float scale,
                         float *score);

#endif
