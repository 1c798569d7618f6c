#include "model/linear.h"

float model_dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void model_linear(const struct qtensor *W, const float *x, int n, float *y)
{
    if (n == 1) quant_matvec(W, x, y);
    else quant_matmul(W, x, n, y);
}
