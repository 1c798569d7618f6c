#include "model/linear.h"

#include "quant/bf16act.h"

float model_dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void model_linear(const struct qtensor *W, const float *x, int n, float *y)
{
    /* the opt-in bf16-activation product for every n, so a batched row still
     * equals the same row alone; if its buffers cannot be allocated this
     * falls through to the f32 product, as quant_matmul falls back to the
     * scalar level */
    if (W->act_bf16 && quant_matmul_bf16act(W, x, n, y, NULL) == 0) return;
    if (n == 1) quant_matvec(W, x, y);
    else quant_matmul(W, x, n, y);
}
