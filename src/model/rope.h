/* model/rope.h - rotary position embedding as DeepSeek-V3 checkpoints pair it
 * (model-spec §2.1): interleaved pairs (x[2i], x[2i+1]) rotated by
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

#endif
