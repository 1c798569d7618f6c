/* quant/gemm_float.h - internal: the slice kernels (kernels.h
 * quant_slice_fn) of the float formats at the AVX-512 levels (f32, bf16,
 * f16, fp8b), defined in gemm_float_avx512.c and entered in the table of
 * kernels_avx512.c. Each gives every output the bits of that level's
 * rows() kernel for the format. */
#ifndef COLIBRI_QUANT_GEMM_FLOAT_H
#define COLIBRI_QUANT_GEMM_FLOAT_H

#include "quant/kernels.h"

#if defined(__x86_64__)
/* The activation packing of the slice kernels: the lane
 * order (the lane kernels, built by GCC), or none (the one-row tiles, other
 * compilers). */
#if defined(__clang__)
#define QUANT_SLICE_FLOAT_PACK NULL
#else
#define QUANT_SLICE_FLOAT_PACK quant_act_lanes
#endif
void quant_slice_f32_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                            int j0, int nj, float *Y, void *scratch);
void quant_slice_bf16_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                             int j0, int nj, float *Y, void *scratch);
void quant_slice_f16_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                            int j0, int nj, float *Y, void *scratch);
void quant_slice_fp8b_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                             int j0, int nj, float *Y, void *scratch);

#if defined(__AVX512F__)
#include <immintrin.h>
/* 16 fp8b weights (e4m3 codes) times sv = 256 x their block scale: exactly
 * the dequantized values (format.c: table value x scale, rounded once), NaN
 * codes 0x7F / 0xFF reading as +-480. The code's sign-extended bits shifted
 * left 7 with bit 14 cleared are the f16 with e4m3's exponent and mantissa
 * bits, worth 2^-8 of its value (subnormals included), so the product with
 * 256 s is the real product v s rounded once. */
static inline __m512 quant_fp8b_widen16(__m128i codes, __m512 sv)
{
    __m256i h = _mm256_cvtepi8_epi16(codes);
    h = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16((short)0xBF80));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), sv);
}
#endif
#endif

#endif
