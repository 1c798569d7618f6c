/* quant/gemm_float_avx512.c - the slice kernels (kernels.h quant_slice_fn)
 * of the float formats at the AVX-512 levels: f32, bf16, f16 and fp8b, whose
 * weights are widened to their dequantized f32 values (quant_fp8b_widen16),
 * so all four run the same kernels once the panel is built.
 *
 * Why a panel: the row kernels (kernels_avx512.c) widen every weight vector
 * again for each group of QUANT_NB activations, two port-0/5 operations per
 * 16 weights beside the FMAs, and their 3 x 4 tile reads a weight vector
 * from L2 for every 4 FMAs (32 bytes a cycle at the FMA peak). Here a call
 * widens its rows' weights once into an f32 panel (at most
 * QUANT_SLICE_PANEL_BYTES, so it stays in L2) and runs every activation of
 * the slice over it with FMA only.
 *
 * With GCC the kernels are the lane kernels further down (one output per
 * vector element, activations broadcast: this core sustains about one
 * 64-byte load per cycle, and the tiles below need 11 of them per 24 FMAs;
 * bench/gemm-float-results.md). The one-row tiles that follow are what other
 * compilers use, since the lane kernels replay GCC's reduction tree.
 *
 * One-row tiles: 3 rows x 8 activations. Each output
 * keeps the sequence of the one-row loop of rows(): acc0 takes the first 16
 * columns of every 32-column step, acc1 the second 16, the tail (cols % 32)
 * goes to acc0, then one reduction of acc0 + acc1. acc0 and acc1 are
 * independent chains, so the tile runs them one after the other (24
 * accumulators in registers rather than 48), each over a column block of
 * FLOAT_KC; a chain's accumulators rest in scratch between blocks (a store
 * and a load are exact). Per 16-column chunk: 3 weight loads (from the L2
 * panel) and 8 activation loads (from L1: the 8 activations' column block,
 * 16 KiB, is reused by every row tile of the call) for 24 FMAs, so the
 * panel is read at 16 bytes a cycle at the FMA peak.
 *
 * Compiled with the AVX-512 flags (Makefile, *_avx512.c); called only
 * through the tables of those levels.
 */
#include <assert.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant/gemm_float.h"
#include "quant/kernels.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* ------------------------------------------------- f32 / bf16 / f16 / fp8b */

/* fp8b: 256 x the scale of row r's block holding column c, broadcast
 * (quant_fp8b_widen16). */
INLINE __m512 fp8b_scale256(const struct qtensor *W, int r, int c)
{
    const int nbc = (W->cols + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK;
    return _mm512_set1_ps(W->scales[(size_t)(r / QUANT_FP8B_BLOCK) * nbc + c / QUANT_FP8B_BLOCK] * 256.0f);
}

#define FR 3            /* rows per register tile */
#define FNJ 8           /* activations per register tile */
/* Columns per block: the FNJ activations' block (16 KiB) stays in L1 while
 * every row tile of the call passes over it. A multiple of 32. */
#define FLOAT_KC 512

static_assert(FLOAT_KC % 32 == 0, "column blocks start at multiples of 32");
static_assert(48 % FR == 0, "quant_slice_rows is a multiple of the tile rows");

/* A panel holds each row tile's chunks in column order: chunk q (columns
 * 16q..16q+15) of tile t is FR vectors at panel + (t * nq + q) * FR * 16,
 * zeros past cols and in rows past the call's. */
INLINE void widen_float(int fmt, const struct qtensor *W, int r0, int r1, float *panel)
{
    const int cols = W->cols, nq = (cols + 15) / 16, ntile = (r1 - r0 + FR - 1) / FR;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    for (int t = 0; t < ntile; t++)
        for (int i = 0; i < FR; i++) {
            int r = r0 + t * FR + i;
            float *o = panel + (size_t)t * nq * FR * 16 + 16 * i;
            const uint8_t *p = (const uint8_t *)W->data + (size_t)r * rb;
            for (int q = 0; q < nq; q++, o += FR * 16) {
                int c = 16 * q;
                __mmask16 m = cols - c >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - c)) - 1);
                __m512 v;
                if (r >= r1) {
                    v = _mm512_setzero_ps();
                } else if (fmt == QUANT_F32) {
                    v = _mm512_maskz_loadu_ps(m, p + 4 * (size_t)c);
                } else if (fmt == QUANT_FP8B) {
                    v = quant_fp8b_widen16(_mm_maskz_loadu_epi8(m, p + c), fp8b_scale256(W, r, c));
                } else {
                    __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * (size_t)c);
                    v = fmt == QUANT_F16 ? _mm512_cvtph_ps(h)
                                         : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
                }
                _mm512_store_ps(o, v);
            }
        }
}

/* One chain of one tile over nk 32-column steps: acc[i][j] += w * x for the
 * chunk of each step that belongs to the chain. wp: the chain's first chunk
 * in the panel (the next is 2 chunks on); x[j] + c: its activation columns.
 * acc: FR * FNJ vectors, read unless first, always written. */
INLINE void chain_float(const float *wp, const float *const *x, int c, int nk,
                        __m512 *acc, int first)
{
    __m512 a[FR][FNJ];
    UNROLL
    for (int i = 0; i < FR; i++)
        UNROLL
        for (int j = 0; j < FNJ; j++) a[i][j] = first ? _mm512_setzero_ps() : acc[i * FNJ + j];
    const float *x0 = x[0] + c, *x1 = x[1] + c, *x2 = x[2] + c, *x3 = x[3] + c;
    const float *x4 = x[4] + c, *x5 = x[5] + c, *x6 = x[6] + c, *x7 = x[7] + c;
    for (int k = 0; k < nk; k++) {
        const float *w = wp + (size_t)k * 2 * FR * 16;
        __m512 wv[FR];
        UNROLL
        for (int i = 0; i < FR; i++) wv[i] = _mm512_load_ps(w + 16 * i);
        const float *xs[FNJ] = { x0, x1, x2, x3, x4, x5, x6, x7 };
        UNROLL
        for (int j = 0; j < FNJ; j++) {
            __m512 xv = _mm512_loadu_ps(xs[j] + 32 * k);
            UNROLL
            for (int i = 0; i < FR; i++) a[i][j] = _mm512_fmadd_ps(wv[i], xv, a[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < FR; i++)
        UNROLL
        for (int j = 0; j < FNJ; j++) acc[i * FNJ + j] = a[i][j];
}

static_assert(FNJ == 8, "chain_float names its 8 activation pointers");

INLINE void slice_float(int fmt, const struct qtensor *W, int r0, int r1,
                        const struct quant_act *a, int j0, int nj, float *Y, void *scratch)
{
    const int cols = W->cols, nq = (cols + 15) / 16, nfull = cols / 32;
    const int ntile = (r1 - r0 + FR - 1) / FR;
    float *panel = scratch;
    __m512 *sacc = (__m512 *)(panel + (size_t)quant_slice_rows(cols) * ((cols + 63) / 64 * 64));
    assert(r1 - r0 <= quant_slice_rows(cols));
    assert((size_t)ntile * 2 * FR * FNJ * sizeof(__m512) <= (64u << 10));
    widen_float(fmt, W, r0, r1, panel);
    for (int jt = j0; jt < j0 + nj; jt += FNJ) {
        const float *x[FNJ];
        for (int j = 0; j < FNJ; j++) {
            /* past the slice: repeat its last activation, outputs dropped */
            int jj = jt + j < j0 + nj ? jt + j : j0 + nj - 1;
            x[j] = a->x + (size_t)jj * cols;
        }
        if (nfull == 0) memset(sacc, 0, (size_t)ntile * 2 * FR * FNJ * sizeof(__m512));
        for (int c0 = 0; c0 < nfull * 32; c0 += FLOAT_KC) {
            int nk = (nfull * 32 - c0 < FLOAT_KC ? nfull * 32 - c0 : FLOAT_KC) / 32;
            for (int t = 0; t < ntile; t++) {
                const float *wt = panel + ((size_t)t * nq + c0 / 16) * FR * 16;
                __m512 *st = sacc + (size_t)t * 2 * FR * FNJ;
                chain_float(wt, x, c0, nk, st, c0 == 0);
                chain_float(wt + FR * 16, x, c0 + 16, nk, st + FR * FNJ, c0 == 0);
            }
        }
        for (int t = 0; t < ntile; t++) {
            __m512 *st = sacc + (size_t)t * 2 * FR * FNJ;
            /* the tail: 1 or 2 masked chunks into acc0, in column order */
            for (int q = 2 * nfull; q < nq; q++) {
                int c = 16 * q;
                __mmask16 m = cols - c >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - c)) - 1);
                const float *w = panel + ((size_t)t * nq + q) * FR * 16;
                for (int j = 0; j < FNJ; j++) {
                    __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + c);
                    for (int i = 0; i < FR; i++)
                        st[i * FNJ + j] = _mm512_fmadd_ps(_mm512_load_ps(w + 16 * i), xv, st[i * FNJ + j]);
                }
            }
            for (int i = 0; i < FR; i++) {
                int r = r0 + t * FR + i;
                if (r >= r1) break;
                for (int j = 0; j < FNJ && jt + j < j0 + nj; j++)
                    Y[(size_t)(jt + j) * W->rows + r] =
                        _mm512_reduce_add_ps(_mm512_add_ps(st[i * FNJ + j], st[FR * FNJ + i * FNJ + j]));
            }
        }
    }
}

/* ------------------------------------- f32 / bf16 / f16, lane kernels */

#define LG 48           /* rows per call: 3 vectors of 16 */
#define LNR QUANT_LANE_NR
#define LKB 112         /* steps per block: a lane's 48 x 112 panel (21 KiB) stays in L1 */
#define LSB 16          /* activation groups (of LNR) per pass */
#define LACC (3 * LNR)  /* accumulator vectors per group */

static_assert(LNR == 8, "the lane tile is 3 vectors x 8 activations");

/* Rows i of r[16] become columns: r[c] lane i = old r[i] lane c. */
INLINE void transpose16(__m512 r[16])
{
    __m512 a[16], b[16];
    UNROLL
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    UNROLL
    for (int i = 0; i < 4; i++) {
        b[4 * i] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], 0x44);
        b[4 * i + 1] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], 0xEE);
        b[4 * i + 2] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0x44);
        b[4 * i + 3] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0xEE);
    }
    /* b[4i + m], 128-bit block q: column 4q + m of rows 4i .. 4i+3 */
    UNROLL
    for (int m = 0; m < 4; m++) {
        __m512 t0 = _mm512_shuffle_f32x4(b[m], b[4 + m], _MM_SHUFFLE(1, 0, 1, 0));
        __m512 t1 = _mm512_shuffle_f32x4(b[m], b[4 + m], _MM_SHUFFLE(3, 2, 3, 2));
        __m512 t2 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], _MM_SHUFFLE(1, 0, 1, 0));
        __m512 t3 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], _MM_SHUFFLE(3, 2, 3, 2));
        r[m] = _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + m] = _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + m] = _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + m] = _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Widening reads 16 rows side by side, from memory for a prefill; a
 * prefetch this many bytes ahead in each row took bf16 prefill (n = 256,
 * 4096 x 7168, 1 thread, Zen 5) from 123-176 to 191-197 GFLOP/s (4 rounds
 * interleaved; 2048 ahead 161-193, the current line 188-195). */
#define WIDEN_AHEAD 512
/* The lane panel of rows [r0, r1) (at most LG): step s of a row (kernels.h
 * lane order) is LG floats at panel + s * LG, row r0 + i at element i;
 * zeros past cols and past r1. Built 16 rows x 16 columns at a time. */
INLINE void widen_lanes(int fmt, const struct qtensor *W, int r0, int r1, float *panel)
{
    const int cols = W->cols, nq = (cols + 15) / 16, nfull = cols / 32;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols), esz = fmt == QUANT_F32 ? 4 : fmt == QUANT_FP8B ? 1 : 2;
    for (int sg = 0; sg < LG / 16; sg++)
        for (int q = 0; q < nq; q++) {
            int c = 16 * q;
            __mmask16 m = cols - c >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - c)) - 1);
            __m512 v[16];
            UNROLL
            for (int i = 0; i < 16; i++) {
                int r = r0 + 16 * sg + i;
                const uint8_t *p = (const uint8_t *)W->data + (size_t)r * rb;
                if (r < r1) _mm_prefetch((const char *)p + esz * (size_t)c + WIDEN_AHEAD, _MM_HINT_T0);
                if (r >= r1) {
                    v[i] = _mm512_setzero_ps();
                } else if (fmt == QUANT_F32) {
                    v[i] = _mm512_maskz_loadu_ps(m, p + 4 * (size_t)c);
                } else if (fmt == QUANT_FP8B) {
                    v[i] = quant_fp8b_widen16(_mm_maskz_loadu_epi8(m, p + c), fp8b_scale256(W, r, c));
                } else {
                    __m256i hv = _mm256_maskz_loadu_epi16(m, p + 2 * (size_t)c);
                    v[i] = fmt == QUANT_F16 ? _mm512_cvtph_ps(hv)
                                            : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hv), 16));
                }
            }
            transpose16(v);
            /* column c + l: lane l of acc0 (h 0) or acc1, step k */
            int h = q < 2 * nfull ? q & 1 : 0, k = q < 2 * nfull ? q / 2 : nfull + (q - 2 * nfull);
            UNROLL
            for (int l = 0; l < 16; l++)
                _mm512_store_ps(panel + ((size_t)quant_lane_first(cols, h, l) + k) * LG + 16 * sg, v[l]);
        }
}

/* One lane, one group of LNR activations, nk steps: acc[i * LNR + j] (rows
 * 16i .. 16i+15, activation j) += panel row vectors x broadcast activation. */
INLINE void lane_tile(const float *w, const float *x, const float *pf, int nk, __m512 *acc, int first)
{
    __m512 a[3][LNR];
    UNROLL
    for (int i = 0; i < 3; i++)
        UNROLL
        for (int j = 0; j < LNR; j++) a[i][j] = first ? _mm512_setzero_ps() : acc[i * LNR + j];
    for (int k = 0; k < nk; k++) {
        if (!(k & 1)) _mm_prefetch((const char *)(pf + (size_t)k * LNR), _MM_HINT_T0);
        __m512 w0 = _mm512_load_ps(w + (size_t)k * LG), w1 = _mm512_load_ps(w + (size_t)k * LG + 16);
        __m512 w2 = _mm512_load_ps(w + (size_t)k * LG + 32);
        UNROLL
        for (int j = 0; j < LNR; j++) {
            __m512 xb = _mm512_set1_ps(x[(size_t)k * LNR + j]);
            a[0][j] = _mm512_fmadd_ps(w0, xb, a[0][j]);
            a[1][j] = _mm512_fmadd_ps(w1, xb, a[1][j]);
            a[2][j] = _mm512_fmadd_ps(w2, xb, a[2][j]);
        }
    }
    UNROLL
    for (int i = 0; i < 3; i++)
        UNROLL
        for (int j = 0; j < LNR; j++) acc[i * LNR + j] = a[i][j];
}

/* Lane (h, l) for groups [g0, g0 + ng) into out[ng][LACC]. */
static void lane_pass(const float *panel, const float *xl, size_t xper, int cols, int h, int l,
                      int g0, int ng, __m512 *out)
{
    const int pan_steps = 16 * quant_lane_steps(cols, 0) + 16 * quant_lane_steps(cols, 1);
    const int steps = quant_lane_steps(cols, h), s0 = quant_lane_first(cols, h, l);
    if (steps == 0) {
        for (int g = 0; g < ng * LACC; g++) out[g] = _mm512_setzero_ps();
        return;
    }
    for (int k0 = 0; k0 < steps; k0 += LKB) {
        int nk = steps - k0 < LKB ? steps - k0 : LKB;
        const float *w = panel + (size_t)(s0 + k0) * LG;
        /* the panel's next LKB steps (this lane's or the next lane's: lanes
         * are stored in the order they run) into L2, a share per group: the
         * panel is larger than L2 and a cold block stalls the first group */
        const char *next = (const char *)(w + (size_t)nk * LG), *end = (const char *)(panel + (size_t)pan_steps * LG);
        const size_t share = ((size_t)LKB * LG * sizeof(float) / ng + 63) / 64 * 64;
        for (int g = 0; g < ng; g++) {
            for (const char *p = next + g * share; p < next + (g + 1) * share && p < end; p += 64)
                _mm_prefetch(p, _MM_HINT_T1);
            /* the next group's activations, prefetched meanwhile (each
             * group's block of steps is a new stream from L3) */
            const float *x = xl + (size_t)(g0 + g) * xper + (size_t)(s0 + k0) * LNR;
            lane_tile(w, x, g + 1 < ng ? x + xper : x, nk, out + (size_t)g * LACC, k0 == 0);
        }
    }
}

/* dst = a + b over n vectors */
static void add_vecs(__m512 *dst, const __m512 *a, const __m512 *b, int n)
{
    for (int i = 0; i < n; i++) dst[i] = _mm512_add_ps(a[i], b[i]);
}

/* The last levels of the reduction tree over t[8][nb] (the t_i, pairs of
 * which make v_0 and v_1), then y = v_0 + v_1 stored for activations
 * [j0, j0 + nj) of groups g0.. and rows [r0, r1). */
static void lanes_finish(__m512 *t, int nb, int n, int ng, int g0, int j0, int nj, int r0, int r1,
                         const struct qtensor *W, float *Y)
{
    for (int i = 0; i < 4; i++) add_vecs(t + (size_t)i * nb, t + (size_t)(4 + i) * nb, t + (size_t)i * nb, n);
    add_vecs(t, t, t + (size_t)2 * nb, n);                  /* v_0 */
    add_vecs(t + nb, t + nb, t + (size_t)3 * nb, n);        /* v_1 */
    for (int g = 0; g < ng; g++)
        for (int j = 0; j < LNR; j++) {
            int jj = (g0 + g) * LNR + j;
            if (jj >= j0 + nj) break;
            for (int i = 0; i < 3 && r0 + 16 * i < r1; i++) {
                int vi = g * LACC + i * LNR + j, nr = r1 - r0 - 16 * i;
                __m512 y = _mm512_add_ps(t[vi], t[nb + vi]);
                _mm512_mask_storeu_ps(Y + (size_t)jj * W->rows + r0 + 16 * i,
                                      nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1), y);
            }
        }
}

/* Rows [r0, r1) (at most LG) x activations [j0, j0+nj) (j0 a multiple of
 * LNR) over the lane panel. Per output the 32 lane sums are those of the
 * one-row loop, and they are added as _mm512_reduce_add_ps(acc0 + acc1)
 * adds them in GCC's avx512fintrin.h: s_l = acc0_l + acc1_l, then
 * t_i = s_(8+i) + s_i (i < 8), u_i = t_(4+i) + t_i (i < 4),
 * v_0 = u_0 + u_2, v_1 = u_1 + u_3, y = v_0 + v_1; here each of those
 * additions is one vector addition over 16 rows. test_quant checks the bits
 * against the matvec. */
static inline __attribute__((always_inline, unused)) void slice_lanes(int fmt, const struct qtensor *W, int r0, int r1,
                        const struct quant_act *a, int j0, int nj, float *Y, void *scratch)
{
    const int cols = W->cols;
    const size_t xper = quant_act_pack_stride(cols);
    float *panel = scratch;
    __m512 *buf = (__m512 *)(panel + (size_t)quant_slice_rows(cols) * ((cols + 63) / 64 * 64));
    const int nb = LSB * LACC;
    __m512 *cur = buf, *lo = cur + nb, *s = lo + nb, *t = s + nb;   /* t: 8 x nb */
    static_assert(11 * LSB * LACC * 64 <= (288u << 10), "kernels.h scratch");
    assert(r1 - r0 <= LG && LG <= quant_slice_rows(cols) && j0 % LNR == 0);
    widen_lanes(fmt, W, r0, r1, panel);
    const int gend = (j0 + nj + LNR - 1) / LNR;
    for (int g0 = j0 / LNR; g0 < gend; g0 += LSB) {
        int ng = gend - g0 < LSB ? gend - g0 : LSB, n = ng * LACC;
        for (int i = 0; i < 8; i++) {
            lane_pass(panel, a->xl, xper, cols, 0, i, g0, ng, lo);
            lane_pass(panel, a->xl, xper, cols, 1, i, g0, ng, cur);
            add_vecs(s, lo, cur, n);                            /* s_i */
            lane_pass(panel, a->xl, xper, cols, 0, i + 8, g0, ng, lo);
            lane_pass(panel, a->xl, xper, cols, 1, i + 8, g0, ng, cur);
            add_vecs(cur, lo, cur, n);                          /* s_(8+i) */
            add_vecs(t + (size_t)i * nb, cur, s, n);            /* t_i */
        }
        lanes_finish(t, nb, n, ng, g0, j0, nj, r0, r1, W, Y);
    }
}

#if defined(__clang__)
/* The lane kernels copy GCC's reduction tree; other compilers keep the
 * one-row tiles above. */
#define SLICE_FLOAT slice_float
#else
#define SLICE_FLOAT slice_lanes
#endif

void quant_slice_f32_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                            int j0, int nj, float *Y, void *scratch)
{
    SLICE_FLOAT(QUANT_F32, W, r0, r1, a, j0, nj, Y, scratch);
}

void quant_slice_bf16_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                             int j0, int nj, float *Y, void *scratch)
{
    SLICE_FLOAT(QUANT_BF16, W, r0, r1, a, j0, nj, Y, scratch);
}

void quant_slice_f16_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                            int j0, int nj, float *Y, void *scratch)
{
    SLICE_FLOAT(QUANT_F16, W, r0, r1, a, j0, nj, Y, scratch);
}

void quant_slice_fp8b_avx512(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                             int j0, int nj, float *Y, void *scratch)
{
    SLICE_FLOAT(QUANT_FP8B, W, r0, r1, a, j0, nj, Y, scratch);
}
