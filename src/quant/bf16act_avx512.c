/* quant/bf16act_avx512.c - the VDPBF16PS kernel of quant/bf16act.h.
 *
 * An output's sequence: one f32 vector accumulator takes VDPBF16PS of each
 * 32-column step in order (the last step's weights masked to the row; the
 * activations are zero past cols), then one reduction. Tiles of 4 rows x 4
 * activations share each load (8 loads per 16 instructions); columns go in
 * blocks of BK so a tile's activations and weights stay in L1 while the
 * tiles of the call pass over them, the accumulators resting in scratch
 * between blocks (a store and a load are exact). Neither changes any
 * output's operations. */
#include <immintrin.h>

#include "quant/bf16act.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")
/* Columns per block: a 4-activation tile is 8 KiB of bf16 here. */
#define BK 1024

INLINE void tile(const uint16_t *Wd, int rows, int cols, int r, int R, const uint16_t *xb,
                 int cols_pad, int j, int NJ, int c0, int c1, float *sacc, int ld, float *Y)
{
    const uint16_t *p[4], *x[4];
    __m512 acc[4][4];
    UNROLL
    for (int i = 0; i < R; i++) p[i] = Wd + (size_t)(r + i) * cols;
    UNROLL
    for (int k = 0; k < NJ; k++) x[k] = xb + (size_t)(j + k) * cols_pad;
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int k = 0; k < NJ; k++)
            acc[i][k] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(sacc + 16 * ((size_t)i * ld + k));
    for (int c = c0; c < c1; c += 32) {
        __m512bh w[4];
        if (c + 32 <= cols) {
            UNROLL
            for (int i = 0; i < R; i++) w[i] = (__m512bh)_mm512_loadu_si512(p[i] + c);
        } else {
            __mmask32 m = (__mmask32)((1ull << (cols - c)) - 1);
            UNROLL
            for (int i = 0; i < R; i++) w[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, p[i] + c);
        }
        UNROLL
        for (int k = 0; k < NJ; k++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x[k] + c);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][k] = _mm512_dpbf16_ps(acc[i][k], w[i], xv);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int k = 0; k < NJ; k++) {
            if (c1 == cols_pad) Y[(size_t)(j + k) * rows + r + i] = _mm512_reduce_add_ps(acc[i][k]);
            else _mm512_store_ps(sacc + 16 * ((size_t)i * ld + k), acc[i][k]);
        }
}

/* One tile shape per (R, NJ) so the loops above unroll. */
static void tile_any(const uint16_t *Wd, int rows, int cols, int r, int R, const uint16_t *xb,
                     int cols_pad, int j, int NJ, int c0, int c1, float *sacc, int ld, float *Y)
{
#define T(RR, JJ) tile(Wd, rows, cols, r, RR, xb, cols_pad, j, JJ, c0, c1, sacc, ld, Y)
    switch (R * 8 + NJ) {
    case 4 * 8 + 4: T(4, 4); break;
    case 4 * 8 + 3: T(4, 3); break;
    case 4 * 8 + 2: T(4, 2); break;
    case 4 * 8 + 1: T(4, 1); break;
    case 1 * 8 + 4: T(1, 4); break;
    case 1 * 8 + 3: T(1, 3); break;
    case 1 * 8 + 2: T(1, 2); break;
    default: T(1, 1); break;
    }
#undef T
}

void quant_bf16act_rows_avx512(const uint16_t *Wd, int rows, int cols, int r0, int r1,
                               const uint16_t *xb, int cols_pad, int nx, float *Y, float *scratch)
{
    for (int c0 = 0; c0 < cols_pad; c0 += BK) {
        int c1 = c0 + BK < cols_pad ? c0 + BK : cols_pad;
        for (int j = 0; j < nx; j += 4) {
            int nj = nx - j < 4 ? nx - j : 4;
            for (int r = r0; r < r1;) {
                int R = r1 - r >= 4 ? 4 : 1;
                float *sacc = scratch + (size_t)16 * ((size_t)(r - r0) * nx + j);
                tile_any(Wd, rows, cols, r, R, xb, cols_pad, j, nj, c0, c1, sacc, nx, Y);
                r += R;
            }
        }
    }
}

void quant_bf16act_round_avx512(const float *x, int cols, int cols_pad, uint16_t *out)
{
    for (int c = 0; c < cols_pad; c += 32) {
        int n = cols - c;
        n = n < 0 ? 0 : n > 32 ? 32 : n;
        __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
        __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
        __m512 lo = _mm512_maskz_loadu_ps(m0, x + c), hi = _mm512_maskz_loadu_ps(m1, x + c + 16);
        _mm512_storeu_si512(out + c, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}
