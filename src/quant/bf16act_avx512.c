/* quant/bf16act_avx512.c - the VDPBF16PS kernel of quant/bf16act.h.
 *
 * An output's sequence: one f32 vector accumulator takes VDPBF16PS of each
 * 32-column step in order (the last step's weights masked to the row; the
 * activations are zero past cols), then one reduction. Tiles of 4 rows x 4
 * activations share each load (8 loads per 16 instructions); columns go in
 * blocks of BK so a tile's activations and weights stay in L1 while the
 * tiles of the call pass over them, the accumulators resting in scratch
 * between blocks (a store and a load are exact). Neither changes any
 * output's operations. Batches of QUANT_BF16ACT_LANE_MIN or more (GCC
 * builds) take the lane slice at the end of this file, with the same bits. */
#include <immintrin.h>
#include <string.h>

#include "quant/bf16act.h"
#include "quant/transpose_avx512.h"

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

/* ------------------------------------------------------------ lane slice
 *
 * Batches of QUANT_BF16ACT_LANE_MIN activations or more (GCC builds; see
 * bf16act.h): one output per vector element instead of per vector. Lane l
 * of an output's accumulator above takes, at step k, the column pair
 * (32k + 2l, 32k + 2l + 1); here that lane's chain runs for 48 rows at
 * once, a row per element, over a panel holding each row's pair as a dword
 * (a 16 x 16 dword transpose of 16 rows' 64-byte steps), against the
 * activation's pair broadcast. VDPBF16PS does the same arithmetic on each
 * element whichever position it holds, so each lane's chain is the rows
 * kernel's; the 16 chains are then added in the tree _mm512_reduce_add_ps
 * uses (GCC's avx512fintrin.h): t_i = a_(8+i) + a_i, u_i = t_(4+i) + t_i,
 * v_0 = u_0 + u_2, v_1 = u_1 + u_3, y = v_0 + v_1, one vector addition per
 * 16 rows. The tile is 3 vectors of rows x LNJ activations: 3 loads and 8
 * broadcasts per 24 VDPBF16PS, where the 4 x 4 tile above loads a vector
 * per 2. */
#define LROWS 48        /* rows per call: 3 vectors of 16 */
#define LNJ 8           /* activations per tile, and per packed group */
#define LKB 112         /* steps per block: a lane's 48 x 112 pairs (21 KiB) stay in L1 */
#define LGRP 8          /* activation groups per pass */
#define LACC (3 * LNJ)  /* accumulator vectors per group */

size_t quant_bf16act_lanes_scratch(int cols_pad)
{
    return (size_t)LROWS * cols_pad * sizeof(uint16_t) + (size_t)10 * LGRP * LACC * sizeof(__m512);
}

void quant_bf16act_lanes_pack(const uint16_t *xb, int n, int cols_pad, int g, uint32_t *out)
{
    const int nk = cols_pad / 32;
    for (int l = 0; l < 16; l++)
        for (int k = 0; k < nk; k++)
            for (int t = 0; t < LNJ; t++) {
                int j = g * LNJ + t;
                uint32_t v = 0;
                if (j < n) memcpy(&v, xb + (size_t)j * cols_pad + 32 * k + 2 * l, sizeof v);
                out[((size_t)l * nk + k) * LNJ + t] = v;
            }
}

/* The panel of rows [r0, r1): lane l, step k, row vector v at
 * panel + ((l * nk + k) * 3 + v) * 16 dwords; zeros past cols and r1. */
static void lanes_panel(const uint16_t *Wd, int cols, int cols_pad, int r0, int r1, uint32_t *panel)
{
    const int nk = cols_pad / 32;
    for (int v = 0; v < 3; v++)
        for (int k = 0; k < nk; k++) {
            const int c = 32 * k;
            const __mmask32 m = cols - c >= 32 ? ~0u : (__mmask32)((1u << (cols - c)) - 1);
            __m512i V[16], T[16];
            for (int i = 0; i < 16; i++) {
                int r = r0 + 16 * v + i;
                if (r >= r1) {
                    V[i] = _mm512_setzero_si512();
                    continue;
                }
                const uint16_t *p = Wd + (size_t)r * cols + c;
                _mm_prefetch((const char *)p + 512, _MM_HINT_T0);
                V[i] = _mm512_maskz_loadu_epi16(m, p);
            }
            quant_transpose16x16_epi32(V, T);
            for (int l = 0; l < 16; l++)
                _mm512_store_si512(panel + (((size_t)l * nk + k) * 3 + v) * 16, T[l]);
        }
}

/* One lane over nk steps for one group: acc[v * LNJ + j] (rows 16v ..,
 * activation j) chains VDPBF16PS of the panel's pairs and the broadcast
 * activation pairs x[k * LNJ + j]. */
INLINE void lanes_tile(const uint32_t *w, const uint32_t *x, int nk, __m512 *acc, int first)
{
    __m512 a[3][LNJ];
    UNROLL
    for (int v = 0; v < 3; v++)
        UNROLL
        for (int j = 0; j < LNJ; j++) a[v][j] = first ? _mm512_setzero_ps() : acc[v * LNJ + j];
    for (int k = 0; k < nk; k++) {
        __m512i w0 = _mm512_load_si512(w + (size_t)k * 48), w1 = _mm512_load_si512(w + (size_t)k * 48 + 16);
        __m512i w2 = _mm512_load_si512(w + (size_t)k * 48 + 32);
        __asm__("" : "+v"(w0), "+v"(w1), "+v"(w2));     /* in registers for the 8 activations */
        UNROLL
        for (int j = 0; j < LNJ; j++) {
            __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x[(size_t)k * LNJ + j]);
            a[0][j] = _mm512_dpbf16_ps(a[0][j], (__m512bh)w0, xv);
            a[1][j] = _mm512_dpbf16_ps(a[1][j], (__m512bh)w1, xv);
            a[2][j] = _mm512_dpbf16_ps(a[2][j], (__m512bh)w2, xv);
        }
    }
    UNROLL
    for (int v = 0; v < 3; v++)
        UNROLL
        for (int j = 0; j < LNJ; j++) acc[v * LNJ + j] = a[v][j];
}

/* Lane l for groups [g0, g0 + ng) into out[ng][LACC]. */
static void lanes_pass(const uint32_t *panel, const uint32_t *xl, int nk, int l, int g0, int ng, __m512 *out)
{
    const size_t xper = (size_t)16 * nk * LNJ;        /* dwords per packed group */
    for (int k0 = 0; k0 < nk; k0 += LKB) {
        int kn = nk - k0 < LKB ? nk - k0 : LKB;
        const uint32_t *w = panel + ((size_t)l * nk + k0) * 48;
        for (int g = 0; g < ng; g++)
            lanes_tile(w, xl + (size_t)(g0 + g) * xper + ((size_t)l * nk + k0) * LNJ, kn, out + (size_t)g * LACC,
                       k0 == 0);
    }
}

static void add_vecs(__m512 *dst, const __m512 *a, const __m512 *b, int n)
{
    for (int i = 0; i < n; i++) dst[i] = _mm512_add_ps(a[i], b[i]);
}

void quant_bf16act_lanes_avx512(const uint16_t *Wd, int rows, int cols, int cols_pad, int r0, int r1,
                                const uint32_t *xl, int n, float *Y, void *scratch)
{
    const int nk = cols_pad / 32, ngr = (n + LNJ - 1) / LNJ;
    uint32_t *panel = scratch;
    __m512 *lo = (__m512 *)((uint8_t *)scratch + (size_t)LROWS * cols_pad * sizeof(uint16_t));
    __m512 *cur = lo + LGRP * LACC, *t = cur + LGRP * LACC;   /* t: 8 x LGRP * LACC */
    const int nb = LGRP * LACC;
    lanes_panel(Wd, cols, cols_pad, r0, r1, panel);
    for (int g0 = 0; g0 < ngr; g0 += LGRP) {
        int ng = ngr - g0 < LGRP ? ngr - g0 : LGRP, nv = ng * LACC;
        for (int i = 0; i < 8; i++) {
            lanes_pass(panel, xl, nk, i, g0, ng, lo);
            lanes_pass(panel, xl, nk, 8 + i, g0, ng, cur);
            add_vecs(t + (size_t)i * nb, cur, lo, nv);                  /* t_i = a_(8+i) + a_i */
        }
        for (int i = 0; i < 4; i++) add_vecs(t + (size_t)i * nb, t + (size_t)(4 + i) * nb, t + (size_t)i * nb, nv);
        add_vecs(t, t, t + (size_t)2 * nb, nv);                         /* v_0 = u_0 + u_2 */
        add_vecs(t + nb, t + nb, t + (size_t)3 * nb, nv);               /* v_1 = u_1 + u_3 */
        for (int g = 0; g < ng; g++)
            for (int j = 0; j < LNJ; j++) {
                int jj = (g0 + g) * LNJ + j;
                if (jj >= n) break;
                for (int v = 0; v < 3 && r0 + 16 * v < r1; v++) {
                    int vi = g * LACC + v * LNJ + j, nr = r1 - r0 - 16 * v;
                    __m512 y = _mm512_add_ps(t[vi], t[nb + vi]);
                    _mm512_mask_storeu_ps(Y + (size_t)jj * rows + r0 + 16 * v,
                                          nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1), y);
                }
            }
    }
}
