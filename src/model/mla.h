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
 * Decode uses the absorbed form. Prefill uses the expanded form, whose
 * result for a row does not depend on how the prompt was split into calls
 * (K/V are rebuilt from the cached latents by a batch-invariant product), so
 * prefix reuse gives a cold prefill's bits. A state may opt in to the
 * absorbed form for a prefill after cached rows when it costs fewer flops
 * (mla_prefill_absorbed states the rule), giving up that invariance. */
#ifndef COLIBRI_MODEL_MLA_H
#define COLIBRI_MODEL_MLA_H

#include "colibri.h"
#include "model/forward.h"

/* 1 when a prefill of S tokens after pos0 cached rows costs fewer flops in
 * the absorbed form (used when fwd_state.absorbed_prefill is set). */
int mla_prefill_absorbed(const struct model_config *c, int S, int pos0);

/* out[n][hid] = MLA(h[n][hid]) for layer li; the rows belong to the groups
 * (group g: rows [row0, row0 + n) at positions pos0...), whose rows are
 * cached in their own states. b: the batch's run buffers (n <= b->cap). */
int mla_forward(const struct model *m, const struct fwd_group *grp, int n_grp, int li, const float *h, int n,
                enum fwd_mode mode, float *out, struct run_bufs *b, struct colibri_err *err);

#endif
