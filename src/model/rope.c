#include "model/rope.h"

#include <math.h>

void model_rope_apply(float *x, int dr, int pos, const struct model_config *c)
{
    for (int i = 0; i < dr / 2; i++) {
        float angle = (float)pos * c->inv_freq[i];
        float cs = (float)cos((double)angle) * c->rope_attention_factor;
        float sn = (float)sin((double)angle) * c->rope_attention_factor;
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * cs - x1 * sn;
        x[2 * i + 1] = x1 * cs + x0 * sn;
    }
}
