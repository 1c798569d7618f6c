/* model/linear.h - y = x·Wᵀ over a batch of rows, W in any quant/ format, and
 * the f32 dot product the attention code uses.
 *
 * model_linear() uses quant_matmul for one row and for a batch; it reads
 * each weight row once per call and parallelizes over output rows,
 * and a batched row gets exactly the bits of the one-row product
 * (quant/kernels.h). A tensor marked act_bf16 (the opt-in
 * colibri_model_opts.bf16_act) goes through quant_matmul_bf16act instead,
 * for one row and for a batch alike, so the same holds there. */
#ifndef COLIBRI_MODEL_LINEAR_H
#define COLIBRI_MODEL_LINEAR_H

#include <stdint.h>

#include "quant/qtensor.h"

/* Elementwise model work (activations, norms, the experts' weighted adds)
 * of fewer elements than this stays on the calling thread: an OpenMP
 * region costs a few microseconds. */
#define MODEL_PAR_MIN_ELEMS 16384

/* y[n][rows] = x[n][cols] · Wᵀ, working memory from s (the run buffers'
 * quant scratch; NULL: allocated for the call). 0, or COLIBRI_ENOMEM with
 * the product named in err. */
int model_linear(const struct qtensor *W, const float *x, int n, float *y, struct quant_scratch *s,
                 struct colibri_err *err);

/* Σ a[i]·b[i] in a fixed order, the same on every machine: lane l of 16
 * sums the products of the elements i ≡ l (mod 16) up to the last whole 16
 * in rising i (each product rounded, then added), the n % 16 left go on
 * into lane 0, then the lanes are added in order 0..15 starting from 0.
 * (The order GCC's AVX-512 vectorization of the plain loop gave; written
 * out so that model_dot_f32_multi keeps it.) */
float model_dot_f32(const float *a, const float *b, int n);

/* out[j] = model_dot_f32(a[j], b, n) for j < na, bit for bit: b is read
 * once per 16 of the a[j] (the attention scores of a block of queries
 * against one key). */
void model_dot_f32_multi(const float *const *a, int na, const float *b, int n, float *out);

/* out[i][k] = Σ w[i][t]·v_t[k] over t < tn[i] in rising t, for k < n and
 * i < nw, with v_t = v + t·vstride: each product rounded, then added to a
 * sum that starts at 0 (the value sums of attention for a block of
 * queries). The same bits as that loop written plainly, on every machine. */
void model_weighted_sum_multi(const float *const *w, const int *tn, int nw, const float *v, int64_t vstride, int n,
                              float *const *out);

#endif
