/* model/rope.h - rotary position embedding as DeepSeek-V3 checkpoints pair it
 * (model-spec §2.1; rope_interleave false: half-split pairs, below):
 * interleaved pairs (x[2i], x[2i+1]) rotated by
 * pos * inv_freq[i], cos and sin scaled by the yarn attention factor. The
 * frequencies and the factor come from the config (model/config.c). */
#ifndef COLIBRI_MODEL_ROPE_H
#define COLIBRI_MODEL_ROPE_H

#include "model/config.h"

/* Rotates x[0..dr) in place for position pos. */
void model_rope_apply(float *x, int dr, int pos, const struct model_config *c);

/* The same in two steps, for many vectors at one position (a token's key
 * and every head's query): the scaled cos and sin of pos's dr / 2 angles
 * (dr <= MODEL_MAX_ROPE_DIM), then a rotation by them. model_rope_apply's
 * bits: it is these two steps. */
void model_rope_angles(int dr, int pos, const struct model_config *c, float *cs, float *sn);
void model_rope_rotate(float *x, int dr, const float *cs, const float *sn);

/* The rotation of the config's layout: interleaved pairs, or with
 * c->rope_half_split the pairs (x[i], x[i + dr/2]) of transformers'
 * rotate_half (apply_rotary_pos_emb), as rope_interleave false chooses. */
void model_rope_rotate_cfg(const struct model_config *c, float *x, int dr, const float *cs, const float *sn);

/* Llama 4's position-dependent query scale (Mistral 4), in f32 as
 * transformers' get_llama_4_attn_scale: 1 + beta * log(1 + floor(pos /
 * llama4_max_pos)); 1 when the config has no beta. */
float model_rope_query_scale(const struct model_config *c, int pos);

#endif
