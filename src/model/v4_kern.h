/* model/v4_kern.h - DeepSeek-V4's attention core and lightning-indexer
 * scores for one query over all heads at once, on threads, with the
 * arithmetic of the one-head loops of v4_attn.c and v4_indexer.c: every dot
 * product is a double sum in index order (a float x float product is exact
 * in double, so interleaving heads changes no rounding), every softmax and
 * weighted sum runs in row order. The bits therefore equal those loops'
 * and do not depend on the thread count; heads are interleaved (V4 shares
 * one KV head, so a key row is read once for a block of heads) so that the
 * sums' latencies overlap.
 *
 * Threads: attention splits head blocks across n_threads, the indexer
 * splits blocks of entries; work is the caller's, work_stride bytes per
 * thread (model_v4_attn_work_bytes / model_v4_index_work_bytes). Nothing
 * allocates. 0 or COLIBRI_EINVAL naming the bad value. Reentrant. */
#ifndef COLIBRI_MODEL_V4_KERN_H
#define COLIBRI_MODEL_V4_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/codec.h"
#include "model/v4_attn.h"
#include "model/v4_indexer.h"

/* Heads one attention task takes (a key row is read once for them). */
#define V4_KERN_HEADS 8
/* Index keys one indexer task scores (decoded together when not f32). */
#define V4_KERN_KEYS 64

/* Per-thread bytes model_v4_attn_query_mt needs for up to n_rows keys. */
size_t model_v4_attn_work_bytes(int head_dim, int n_rows);

/* As model_v4_attn_query (v4_attn.h), same bits, heads on n_threads. */
int model_v4_attn_query_mt(const struct v4_attn *a, int pos, const float *q, const float *win, int n_win,
                           const float *comp, const int32_t *sel, int n_sel, float *out, void *work,
                           size_t work_stride, int n_threads, struct colibri_err *err);

/* Per-thread bytes of model_v4_index_scores_mt, and the bytes of its
 * shared part (the rotated queries, transposed to double). */
size_t model_v4_index_work_bytes(int n_heads, int head_dim);
size_t model_v4_index_shared_bytes(int n_heads, int head_dim);

/* As model_v4_indexer_scores (v4_indexer.h), same bits, entries on
 * n_threads, the keys n_entries rows of codec->row_bytes encoded by codec
 * (decoded as kv_codec_decode, so an f32 codec gives the f32 keys' bits).
 * qrot [n_heads][head_dim] receives the rotated query as there. */
int model_v4_index_scores_mt(const struct v4_indexer *ix, int pos, const float *q, const float *w,
                             const struct kv_codec *codec, const uint8_t *keys, int n_entries, float *qrot,
                             float *score, void *shared, void *work, size_t work_stride, int n_threads,
                             struct colibri_err *err);

#endif
