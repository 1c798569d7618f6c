/* quant/bf16act.h - an opt-in product for bf16 weights that also rounds the
 * activations to bf16, so the dot products run on VDPBF16PS (AVX-512 BF16):
 * twice the multiply-adds per instruction of the f32 FMA path that
 * quant_matmul takes for bf16 weights. It is not the default because the
 * numbers differ: each activation is rounded to bf16 (to nearest even, a
 * relative error of at most 2^-8), and VDPBF16PS flushes denormal inputs and
 * results to zero. Bound against the exact product of the weights with the
 * f32 activations, per output (denormal activations read as zero):
 *     2^-8 * sum_j |w_j x_j|  +  1e-5 * sum_j |w_j x_j|  (+ denormal flushes)
 * Each output's operations do not depend on the batch or its split, so a
 * column of a batch equals the same product with n = 1, bit for bit.
 * Parallelism follows quant_matmul (OpenMP over row blocks, serial when
 * called inside a parallel region). */
#ifndef COLIBRI_QUANT_BF16ACT_H
#define COLIBRI_QUANT_BF16ACT_H

#include <stdint.h>

#include "colibri.h"
#include "quant/qtensor.h"

/* 1 if this machine can run quant_matmul_bf16act (AVX-512 F/BW + BF16). */
int quant_bf16act_available(void);

/* Y[n][rows] = bf16(X)[n][cols] · Wᵀ for a bf16 W. COLIBRI_EUNSUPPORTED for
 * another format or a CPU without AVX-512 BF16 (the message says which);
 * COLIBRI_EINVAL for n <= 0; COLIBRI_ENOMEM (Y untouched). */
int quant_matmul_bf16act(const struct qtensor *W, const float *X, int n, float *Y,
                         struct colibri_err *err);

/* The kernel (bf16act_avx512.c), for bf16act.c only: rows [r0, r1) of the
 * bf16 matrix Wd ([rows][cols]) times the nx bf16 activations xb
 * ([nx][cols_pad], cols_pad = cols rounded up to 32, zeros past cols) into
 * Y[j * rows + r]. r1 - r0 <= QUANT_BF16ACT_ROWS; scratch holds
 * QUANT_BF16ACT_ROWS * nx * 16 floats, 64-byte aligned (the accumulators
 * of output (r, j) rest at vector (r - r0) * nx + j between column blocks). */
#define QUANT_BF16ACT_ROWS 16
/* out[cols_pad] = x[cols] rounded to bf16 (nearest even, denormals to zero),
 * zeros past cols; cols_pad a multiple of 32. */
void quant_bf16act_round_avx512(const float *x, int cols, int cols_pad, uint16_t *out);
void quant_bf16act_rows_avx512(const uint16_t *Wd, int rows, int cols, int r0, int r1,
                               const uint16_t *xb, int cols_pad, int nx, float *Y, float *scratch);

#endif
