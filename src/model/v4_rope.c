/* model/v4_rope.c - V4's partial interleaved RoPE (see v4_rope.h). */
#include "model/v4_rope.h"

#include <math.h>

void model_v4_rope_tail(float *x, int dim, const struct v4_rope *r, int pos, int inverse)
{
    float *t = x + dim - r->dr;
    for (int i = 0; i < r->dr / 2; i++) {
        /* the angle is rounded to f32 first, as torch's f32 product gives it */
        float a = (float)pos * r->inv_freq[i];
        float c = cosf(a) * r->scale, s = sinf(a) * r->scale;
        if (inverse) s = -s;
        float x0 = t[2 * i], x1 = t[2 * i + 1];
        t[2 * i] = x0 * c - x1 * s;
        t[2 * i + 1] = x1 * c + x0 * s;
    }
}
