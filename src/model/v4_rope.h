/* model/v4_rope.h - DeepSeek-V4's partial rotary embedding (apply_rotary_pos_emb
 * and DeepseekV4RotaryEmbedding in transformers): interleaved pairs
 * (x[2i], x[2i+1]) of the LAST dr values of a vector rotated by
 * a = (float)pos * inv_freq[i], with cos(a) and sin(a) each times the rope's
 * attention scaling (1 for the default rope, the yarn factor otherwise). The
 * leading values are left alone. The inverse rotation (sin negated) is what
 * the attention applies to its output at the query's position.
 *
 * model_v4_rope_freqs makes the frequencies of one of the config's two ropes
 * ("main": default, theta rope_theta; "compress": theta compress_rope_theta,
 * default or yarn) as transformers' DeepseekV4RotaryEmbedding does: f32
 * pos_freq[i] = theta^(2i / dr), inv_freq = 1 / pos_freq; under yarn blended
 * with 1 / (factor * pos_freq) over the ramp between the beta_fast and
 * beta_slow correction dims (floored / ceiled: transformers reads `truncate`
 * from the outer rope dict, which V4 never sets, so it is always on). The
 * scaling is attention_factor when given (V4's config sets 1.0 for a yarn
 * compress rope), else yarn's mscale formula. Reentrant. */
#ifndef COLIBRI_MODEL_V4_ROPE_H
#define COLIBRI_MODEL_V4_ROPE_H

#include "colibri.h"

struct v4_rope {
    int dr;                 /* rotated values, even (config qk_rope_head_dim) */
    const float *inv_freq;  /* [dr / 2] */
    float scale;            /* attention scaling of cos and sin */
};

struct v4_rope_params {
    double theta;
    int dr;                   /* qk_rope_head_dim, even, <= 2 * V4_ROPE_MAX_PAIRS */
    int yarn;                 /* 0: default */
    double factor;            /* yarn only, from here on */
    double original_max_pos;  /* original_max_position_embeddings */
    double beta_fast, beta_slow;      /* 0: 32 and 1 */
    int has_attention_factor; /* 1: attention_factor below, else mscale's */
    double attention_factor;
    double mscale, mscale_all_dim;    /* 0 when absent */
};

#define V4_ROPE_MAX_PAIRS 256

/* inv_freq [p->dr / 2] and *scale. 0, or COLIBRI_EINVAL naming the bad value. */
int model_v4_rope_freqs(const struct v4_rope_params *p, float *inv_freq, float *scale, struct colibri_err *err);

/* Rotates x[dim - dr .. dim) in place for position pos; inverse != 0 rotates
 * back (sin negated). dim >= r->dr. */
void model_v4_rope_tail(float *x, int dim, const struct v4_rope *r, int pos, int inverse);

#endif
