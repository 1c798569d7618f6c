/* model/linear.h - the weight matrices of the forward pass and y = x·Wᵀ.
 *
 * A `struct wmat` is one Linear weight, [rows = out, cols = in], held in f32.
 * linear() multiplies a batch of n input rows; it parallelizes over output rows
 * with OpenMP, so each weight row is read once per batch. Must not be called
 * from inside an OpenMP parallel region (it opens its own). */
#ifndef COLIBRI_MODEL_LINEAR_H
#define COLIBRI_MODEL_LINEAR_H

#include <stdint.h>

struct wmat {
    int rows, cols;
    float *w;           /* rows x cols, owned */
};

/* y[n][rows] = x[n][cols] · Wᵀ */
void linear(const struct wmat *W, const float *x, int n, float *y);

/* Σ a[i]·b[i], vectorized. */
float dot_f32(const float *a, const float *b, int n);

/* y = x / sqrt(mean(x²) + eps) * weight, over n rows of width d (in place allowed). */
void rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps);

#endif
