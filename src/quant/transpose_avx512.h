/* quant/transpose_avx512.h - internal: the 16 x 16 transpose of 32-bit
 * elements that the panel packings of kernels_int8_avx512.c (4 int8 columns
 * per element) and bf16act_avx512.c (a bf16 column pair per element) use to
 * put one weight row per vector element. For files built with the AVX-512
 * flags only. */
#ifndef COLIBRI_QUANT_TRANSPOSE_AVX512_H
#define COLIBRI_QUANT_TRANSPOSE_AVX512_H

#include <immintrin.h>

/* 16 x 16 transpose of 32-bit elements: T[s] element i = V[i] element s. */
static inline __attribute__((always_inline)) void quant_transpose16x16_epi32(const __m512i *V, __m512i *T)
{
    __m512i A[8], B[8], X[4][4];
    _Pragma("GCC unroll 16")
    for (int p = 0; p < 8; p++) {
        A[p] = _mm512_unpacklo_epi32(V[2 * p], V[2 * p + 1]);
        B[p] = _mm512_unpackhi_epi32(V[2 * p], V[2 * p + 1]);
    }
    /* X[q][k], 128-bit lane L: rows 4q .. 4q+3 of element 4L + k */
    _Pragma("GCC unroll 16")
    for (int q = 0; q < 4; q++) {
        X[q][0] = _mm512_unpacklo_epi64(A[2 * q], A[2 * q + 1]);
        X[q][1] = _mm512_unpackhi_epi64(A[2 * q], A[2 * q + 1]);
        X[q][2] = _mm512_unpacklo_epi64(B[2 * q], B[2 * q + 1]);
        X[q][3] = _mm512_unpackhi_epi64(B[2 * q], B[2 * q + 1]);
    }
    /* lane q of T[4L + k] = lane L of X[q][k] */
    _Pragma("GCC unroll 16")
    for (int k = 0; k < 4; k++) {
        __m512i y0 = _mm512_shuffle_i32x4(X[0][k], X[1][k], 0x44), y1 = _mm512_shuffle_i32x4(X[0][k], X[1][k], 0xEE);
        __m512i y2 = _mm512_shuffle_i32x4(X[2][k], X[3][k], 0x44), y3 = _mm512_shuffle_i32x4(X[2][k], X[3][k], 0xEE);
        T[k] = _mm512_shuffle_i32x4(y0, y2, 0x88);
        T[4 + k] = _mm512_shuffle_i32x4(y0, y2, 0xDD);
        T[8 + k] = _mm512_shuffle_i32x4(y1, y3, 0x88);
        T[12 + k] = _mm512_shuffle_i32x4(y1, y3, 0xDD);
    }
}

#endif
