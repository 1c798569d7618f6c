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
 * (mla_prefill_absorbed states the rule), giving up that invariance.
 * MTP layers take model_mixer_mla: transformers' reference gives them no
 * indexer. */
#ifndef COLIBRI_MODEL_MLA_H
#define COLIBRI_MODEL_MLA_H

#include "colibri.h"
#include "model/forward.h"
#include "model/fwd_ops.h"

/* 1 when a prefill of S tokens after pos0 cached rows costs fewer flops in
 * the absorbed form (used when fwd_state.absorbed_prefill is set). */
int mla_prefill_absorbed(const struct model_config *c, int S, int pos0);

/* The CPU's MLA operations of model/fwd_ops.h (the CPU executor's mla_row
 * and attend_absorbed; their contracts are there). */
int model_mla_cache_row(const struct model_config *c, const float *kv_a_norm, struct fwd_state *st, int kl, int pos,
                        float *kv_a, float *q, struct colibri_err *err);
int model_mla_attend_absorbed(const struct model_config *c, const struct attn_weights *w, struct fwd_state *st,
                              int li, const float *q, int S, int pos0, const struct mla_sel *sel, float *o,
                              struct run_bufs *b, struct colibri_err *err);

/* The token mixers model_mixer_mla and model_mixer_mla_dsa (model/parts.h)
 * are this layer: out[n][hid] = MLA(in[n][hid]) for layer pr->li, each
 * group's rows cached in its own state; with DSA, over the positions the
 * layer's indexer (model/indexer.h) selects. */

#endif
