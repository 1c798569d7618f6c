/* model/v4_rope.h - DeepSeek-V4's partial rotary embedding (apply_rotary_pos_emb
 * and DeepseekV4RotaryEmbedding in transformers): interleaved pairs
 * (x[2i], x[2i+1]) of the LAST dr values of a vector rotated by
 * a = (float)pos * inv_freq[i], with cos(a) and sin(a) each times the rope's
 * attention scaling (1 for the default rope, the yarn factor otherwise). The
 * leading values are left alone. The inverse rotation (sin negated) is what
 * the attention applies to its output at the query's position.
 *
 * The frequencies are the caller's (the "main" or "compress" rope of the
 * config, default or yarn); this module only rotates. Reentrant. */
#ifndef COLIBRI_MODEL_V4_ROPE_H
#define COLIBRI_MODEL_V4_ROPE_H

struct v4_rope {
    int dr;                 /* rotated values, even (config qk_rope_head_dim) */
    const float *inv_freq;  /* [dr / 2] */
    float scale;            /* attention scaling of cos and sin */
};

/* Rotates x[dim - dr .. dim) in place for position pos; inverse != 0 rotates
 * back (sin negated). dim >= r->dr. */
void model_v4_rope_tail(float *x, int dim, const struct v4_rope *r, int pos, int inverse);

#endif
