/* quant/gemm_float.h - internal: the slice kernels (kernels.h
 * quant_slice_fn) of the float formats at the AVX-512 levels, defined in
 * gemm_float_avx512.c and entered in the tables of kernels_avx512.c (f32,
 * bf16, f16) and kernels_vbmi_avx512.c (fp8b, activations in the
 * quant_act_perm64 order: the table asks for act_perm64). Each gives every
 * output the bits of its level's rows() kernel for that format. */
#ifndef COLIBRI_QUANT_GEMM_FLOAT_H
#define COLIBRI_QUANT_GEMM_FLOAT_H

#include "quant/kernels.h"

#if defined(__x86_64__)
/* The activation packing of the f32 / bf16 / f16 slice kernels: the lane
 * order (the lane kernels, built by GCC), or none (the one-row tiles, other
 * compilers). */
#if defined(__clang__)
#define QUANT_SLICE_FLOAT_PACK NULL
#define QUANT_SLICE_FP8B_PACK NULL
#else
#define QUANT_SLICE_FP8B_PACK quant_act_lanes_perm64
#define QUANT_SLICE_FLOAT_PACK quant_act_lanes
#endif
void quant_slice_f32_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                            int j0, int nj, float *Y, void *scratch);
void quant_slice_bf16_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                             int j0, int nj, float *Y, void *scratch);
void quant_slice_f16_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                            int j0, int nj, float *Y, void *scratch);
/* fp8b's activation packing: lane l, step q holds position 16q + l of the
 * quant_act_perm64 order. */
void quant_act_lanes_perm64(const float *x, int n, int cols, int g, float *out);
void quant_slice_fp8b_perm64_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                                    int j0, int nj, float *Y, void *scratch);
#endif

#endif
