/* model/mla.h - Multi-head Latent Attention (DeepseekV3Attention), one layer.
 *
 * Projections: q = q_b(norm(q_a(h))) (or q_proj(h) without q_lora), then
 * [c_kv | k_pe] = kv_a(h); c_kv is RMS-normed, k_pe and q's RoPE part rotated
 * at their positions; (c_kv, k_pe) is written to the cache, and attention
 * reads it back from there, so prefill and decode see exactly the rows the
 * cache holds in its tier.
 *
 * Two forms of the same function:
 *   expanded (HF's eager form): k_nope | v = kv_b(c) for every cached row,
 *     softmax(q·k / sqrt) v per head.
 *   absorbed (DeepSeek's inference form): q_abs = W_UK[h]ᵀ q_nope scored
 *     against the latent, o = W_UV[h] Σ p c, through the attention door
 *     kv_attend (kv/attend.h) for every tier.
 * Decode uses the absorbed form. Prefill from position 0 uses the expanded
 * form; a prefill after cached rows uses whichever form costs fewer flops,
 * since the expanded form must rebuild K/V for every cached row
 * (mla_prefill_absorbed states the rule). The choice depends only on
 * (tokens, cached rows), so the same call gives the same bits every time. */
#ifndef COLIBRI_MODEL_MLA_H
#define COLIBRI_MODEL_MLA_H

#include "colibri.h"
#include "model/forward.h"

/* 1 when a prefill of S tokens after pos0 cached rows runs absorbed. */
int mla_prefill_absorbed(const struct model_config *c, int S, int pos0);

/* out[n][hid] = MLA(h[n][hid]) for layer li; the rows belong to the groups
 * (group g: rows [row0, row0 + n) at positions pos0...), whose rows are
 * cached in their own states. b: the batch's run buffers (n <= b->cap). */
int mla_forward(const struct model *m, const struct fwd_group *grp, int n_grp, int li, const float *h, int n,
                enum fwd_mode mode, float *out, struct run_bufs *b, struct colibri_err *err);

#endif
