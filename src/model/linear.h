/* model/linear.h - y = x·Wᵀ over a batch of rows, W in any quant/ format, and
 * the f32 dot product the attention code uses.
 *
 * model_linear() uses quant_matvec for one row and quant_matmul for a batch;
 * both read each weight row once per call and parallelize over output rows,
 * and a batched row gets exactly the bits of the one-row product
 * (quant/kernels.h). A tensor marked act_bf16 (the opt-in
 * colibri_model_opts.bf16_act) goes through quant_matmul_bf16act instead,
 * for one row and for a batch alike, so the same holds there. */
#ifndef COLIBRI_MODEL_LINEAR_H
#define COLIBRI_MODEL_LINEAR_H

#include <stdint.h>

#include "quant/qtensor.h"

/* y[n][rows] = x[n][cols] · Wᵀ */
void model_linear(const struct qtensor *W, const float *x, int n, float *y);

/* Σ a[i]·b[i], vectorized (the order of the sum is the compiler's). */
float model_dot_f32(const float *a, const float *b, int n);

#endif
