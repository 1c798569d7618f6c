#include "model/rope.h"

#include <math.h>

void model_rope_angles(int dr, int pos, const struct model_config *c, float *cs, float *sn)
{
    for (int i = 0; i < dr / 2; i++) {
        float angle = (float)pos * c->inv_freq[i];
        cs[i] = (float)cos((double)angle) * c->rope_attention_factor;
        sn[i] = (float)sin((double)angle) * c->rope_attention_factor;
    }
}

void model_rope_rotate(float *x, int dr, const float *cs, const float *sn)
{
    for (int i = 0; i < dr / 2; i++) {
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * cs[i] - x1 * sn[i];
        x[2 * i + 1] = x1 * cs[i] + x0 * sn[i];
    }
}

void model_rope_apply(float *x, int dr, int pos, const struct model_config *c)
{
    float cs[MODEL_MAX_ROPE_DIM / 2], sn[MODEL_MAX_ROPE_DIM / 2];
    model_rope_angles(dr, pos, c, cs, sn);
    model_rope_rotate(x, dr, cs, sn);
}

void model_rope_rotate_cfg(const struct model_config *c, float *x, int dr, const float *cs, const float *sn)
{
    if (!c->rope_half_split) {
        model_rope_rotate(x, dr, cs, sn);
        return;
    }
    int h = dr / 2;
    for (int i = 0; i < h; i++) {
        float x0 = x[i], x1 = x[i + h];
        x[i] = x0 * cs[i] - x1 * sn[i];
        x[i + h] = x1 * cs[i] + x0 * sn[i];
    }
}

float model_rope_query_scale(const struct model_config *c, int pos)
{
    if (c->llama4_beta == 0) return 1.0f;
    float q = floorf((float)pos / (float)c->llama4_max_pos);
    return 1.0f + c->llama4_beta * logf(1.0f + q);
}
