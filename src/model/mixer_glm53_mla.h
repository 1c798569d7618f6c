/* model/mixer_glm53_mla.h - GLM-5.3's indexed_attention layers as a token
 * mixer part (model/parts.h: model_mixer_glm53_mla), Glm5NextTextAttention
 * with its Glm5NextTextIndexer: MLA without RoPE (qk_rope_head_dim 0) over
 * the positions the pooled DSA selection (model/pool_index.h) picks; a
 * 'shared' layer (indexer_types) reuses the selection of the layer just
 * before it, which must be a full indexed layer (config_glm53.c).
 *
 * Per row, in position order (so prefill and decode do the same arithmetic):
 *   qa = RMSNorm(q_a_proj x), q[h] = q_b_proj(qa)[h] (qk_nope_head_dim)
 *   latent = RMSNorm(kv_a_proj_with_mqa x) (kv_lora_rank), kept per position
 *   full layers: index key LayerNorm(wk x) and gate compress_gate x kept per
 *   position, each pool's key made when its last position arrives; the
 *   selection from wq_b(qa) and weights_proj(x)
 *   attention in the absorbed form: per head the query times kv_b's key rows
 *   (a latent-space query), softmax over the selected positions' latents
 *   (scale qk_nope_head_dim^-1/2), the weighted latent times kv_b's value
 *   rows; then o_proj.
 * transformers expands K and V instead (the same sums in another order).
 *
 * Its cache is a per-session state (token_mixer state_new) of n_ctx
 * positions x (a latent row in the KV tier (kv/codec.h) + 2 index_head_dim
 * f32) plus the pool keys, f32; a quantized tier's selected latents are
 * decoded once per row for all heads. It goes back only to a snapshot (model/parts.h snap_*): the latents
 * (one row per position) and the complete pools' keys (one row per
 * index_kpool positions) are its append-only row arrays; a snapshot holds
 * the position and the open pool's index keys and gates
 * (model_glm53_mla_snap_bytes). Tensor names:
 * model.layers.N.self_attn.{q_a_proj,q_a_layernorm,q_b_proj,
 * kv_a_proj_with_mqa,kv_a_layernorm,kv_b_proj,o_proj}.weight and
 * self_attn.indexer.{wq_b,wk,weights_proj}.weight, indexer.k_norm.{weight,
 * bias}, indexer.index_kpool_compress_{ape,gate}. */
#ifndef COLIBRI_MODEL_MIXER_GLM53_MLA_H
#define COLIBRI_MODEL_MIXER_GLM53_MLA_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "quant/qtensor.h"

struct glm53_mla_weights {
    struct qtensor q_a, q_b, kv_a, kv_b, o;     /* kv_b f32 [H (dn + dv)][r] */
    float *q_a_norm, *kv_a_norm;
    int indexer;                                /* 0: a shared layer */
    struct qtensor wq_b, wk, wproj, wgate;
    float *k_norm_w, *k_norm_b, *ape;
};

struct glm53_mla_bufs;

struct layer_weights;

/* Frees / counts a layer's GLM-5.3 token mixer weights (KDA or indexed). */
void model_glm53_layer_free(struct layer_weights *lw);
int64_t model_glm53_layer_bytes(const struct layer_weights *lw);

void model_glm53_mla_weights_free(struct glm53_mla_weights *w);
int64_t model_glm53_mla_weights_bytes(const struct glm53_mla_weights *w);
/* The heads' attention runs on n_threads threads (same bits on any number). */
int  model_glm53_mla_bufs_new(const struct model_config *c, int cap, int n_threads, struct glm53_mla_bufs **out,
                              size_t *bytes);
void model_glm53_mla_bufs_free(struct glm53_mla_bufs *b);
/* Bytes per position of one full indexed layer's state (latent, index key,
 * gate; a shared layer keeps the latent only). */
size_t model_glm53_mla_bytes_per_pos(const struct model_config *c);
/* Bytes of layer li's snapshot: a 48-byte header, and on a full indexed
 * layer index_kpool - 1 rows of index keys and as many of gates. */
size_t model_glm53_mla_snap_bytes(const struct model_config *c, int li);

#endif
