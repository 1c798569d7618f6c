/* model/v4_swiglu.c - V4's clipped SwiGLU (see v4_swiglu.h). */
#include "model/v4_swiglu.h"

#include <math.h>

void model_v4_swiglu_clip(const float *gate, const float *up, int n, float limit, float *out)
{
    for (int i = 0; i < n; i++) {
        float g = gate[i], u = up[i];
        if (limit > 0) {
            g = fminf(g, limit);
            u = fminf(fmaxf(u, -limit), limit);
        }
        out[i] = g / (1.0f + expf(-g)) * u;
    }
}
