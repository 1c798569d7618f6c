/* model/v4_attn.h - the core of DeepSeek-V4's attention (DeepseekV4Attention
 * and its eager_attention_forward in transformers) for one query, in f32,
 * between the projections: one shared KV head of head_dim values that is both
 * key and value, partial RoPE on the last rope.dr values, a sliding window,
 * compressed entries (v4_compress.h) and per-head attention sinks; then the
 * grouped output projection (DeepseekV4GroupedLinear o_a_proj, o_b_proj).
 *
 *   q[h]  = q_b_proj(q_residual)[h] / sqrt(mean(.^2) + norm_eps)
 *           (DeepseekV4UnweightedRMSNorm per head), RoPE at pos
 *   kv[j] = kv_norm(kv_proj(x_j)) (weighted RMSNorm), RoPE at j
 *   keys  = the window rows j, pos - window < j <= pos, then the compressed
 *           entries this query may see (all visible ones for HCA, the
 *           indexer's selection for CSA, none for a sliding-only layer)
 *   p     = softmax over [q[h] . key * head_dim^-1/2 ..., sinks[h]]; the
 *           sink's share is dropped, so the weights sum to less than 1
 *   o[h]  = sum p * key, then the inverse RoPE at pos on its last rope.dr
 *           values (the values carried the keys' rotation)
 *   y     = o_b . concat_g(o_a[g] . o[heads of group g])
 *
 * The sliding-only layers take the "main" rope, CSA and HCA layers the
 * "compress" rope (the one their compressor uses). Nothing allocates;
 * scratch is the caller's. 0 or COLIBRI_EINVAL naming the bad value.
 * Reentrant. */
#ifndef COLIBRI_MODEL_V4_ATTN_H
#define COLIBRI_MODEL_V4_ATTN_H

#include <stdint.h>

#include "colibri.h"
#include "model/v4_rope.h"

struct v4_attn {
    int n_heads;
    int head_dim;           /* 512 in V4 */
    int window;             /* sliding_window: keys pos - window < j <= pos */
    float norm_eps;         /* rms_norm_eps (q_b_norm and kv_norm) */
    const float *sinks;     /* [n_heads] */
    const float *kv_norm_w; /* [head_dim] */
    struct v4_rope rope;
};

/* q [n_heads][head_dim] = q_b_proj(q_residual), normalised and rotated for
 * pos in place. */
int model_v4_attn_prep_q(const struct v4_attn *a, int pos, float *q, struct colibri_err *err);

/* kv [head_dim] = kv_proj(x), normalised and rotated for pos in place: the
 * row the window keeps. */
int model_v4_attn_prep_kv(const struct v4_attn *a, int pos, float *kv, struct colibri_err *err);

/* One query at pos: q prepared, win [n_win][head_dim] the window rows of
 * positions pos - n_win + 1 .. pos (n_win <= window), comp the compressed
 * entries [..][head_dim] of which rows sel[0..n_sel) are attended (sel NULL:
 * rows 0..n_sel). out [n_heads][head_dim]; scratch n_win + n_sel floats. */
int model_v4_attn_query(const struct v4_attn *a, int pos, const float *q, const float *win, int n_win,
                        const float *comp, const int32_t *sel, int n_sel, float *out, float *scratch,
                        struct colibri_err *err);

/* The grouped output projection: o_a [groups * o_rank][n_heads * head_dim /
 * groups] (group g's block is rows g * o_rank ..), o_b [hidden][groups *
 * o_rank]; in [n_heads * head_dim] -> out [hidden], mid [groups * o_rank]
 * the caller's scratch. */
int model_v4_attn_out_proj(int in_dim, int groups, int o_rank, int hidden, const float *o_a, const float *o_b,
                           const float *in, float *mid, float *out, struct colibri_err *err);

#endif
