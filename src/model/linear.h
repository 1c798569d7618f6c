/* model/linear.h - the small numeric steps of the forward pass: y = x·Wᵀ over
 * a batch (W in any quant/ format), the f32 dot product, RMSNorm.
 *
 * linear() uses quant_matvec for one row and quant_matmul for a batch, which
 * read each weight row once per batch and parallelize over output rows. */
#ifndef COLIBRI_MODEL_LINEAR_H
#define COLIBRI_MODEL_LINEAR_H

#include <stdint.h>

#include "quant/qtensor.h"

/* y[n][rows] = x[n][cols] · Wᵀ */
void linear(const struct qtensor *W, const float *x, int n, float *y);

/* Σ a[i]·b[i], vectorized. */
float dot_f32(const float *a, const float *b, int n);

/* y = x / sqrt(mean(x²) + eps) * weight, over n rows of width d (in place allowed). */
void rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps);

#endif
