#include "model/linear.h"

#include <math.h>

float dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void linear(const struct qtensor *W, const float *x, int n, float *y)
{
    if (n == 1) quant_matvec(W, x, y);
    else quant_matmul(W, x, n, y);
}

void rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps)
{
    for (int t = 0; t < n; t++) {
        const float *xr = x + (int64_t)t * d;
        float *yr = y + (int64_t)t * d;
        float ss = 0.0f;
        for (int i = 0; i < d; i++) ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int i = 0; i < d; i++) yr[i] = weight[i] * (xr[i] * inv);
    }
}
