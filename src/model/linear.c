#include "model/linear.h"

#include <math.h>

float dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void linear(const struct wmat *W, const float *x, int n, float *y)
{
    const int rows = W->rows, cols = W->cols;
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols * n > 32768)
    for (int r = 0; r < rows; r++) {
        const float *wr = W->w + (int64_t)r * cols;
        for (int t = 0; t < n; t++) y[(int64_t)t * rows + r] = dot_f32(wr, x + (int64_t)t * cols, cols);
    }
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
