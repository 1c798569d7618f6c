/* quant/kernels_vbmi_avx512.c - the AVX-512 level with VBMI: an fp8b kernel
 * that decodes e4m3 with byte-table lookups (VPERMI2B) instead of going
 * through f16. Formats without a kernel here use the plain AVX-512 ones.
 *
 * Every e4m3 value is exactly a bf16 (8 exponent bits hold e4m3's range,
 * 7 mantissa bits hold its 3), so a byte code maps to a 16-bit pattern: two
 * 128-entry tables give its high and low byte for the 7-bit magnitude, the
 * sign bit is copied into the high byte, and the bf16 becomes an f32 by
 * putting it in the top half of a 32-bit lane. The two rounds of in-lane
 * unpacking that do this leave the elements of each 64-column block in the
 * order of quant_act_perm64, so the kernel reads activations prepared in
 * that order. The NaN codes 0x7F/0xFF read as +-480, as on the f16 path.
 * Compiled with the AVX-512 flags; the functions add VBMI by attribute.
 */
#include <assert.h>
#include <immintrin.h>

#include "quant/gemm_float.h"
#include "quant/kernels.h"

#define VBMI __attribute__((target("avx512vbmi")))
#define INLINE static inline __attribute__((always_inline)) VBMI
/* Loops over the rows and activations of a register tile must unroll fully
 * (constant trip counts) so the accumulator arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 16")

static_assert(QUANT_NB == 4, "the kernel switch covers nj = 1..4");
static_assert(QUANT_FP8B_BLOCK % 64 == 0, "an fp8b block is whole 64-column steps");

/* bf16 bits of the e4m3 magnitude m (code & 0x7F), split into bytes;
 * generated from quant_fp8_e4m3_table (0x7F: 480). */
static const uint8_t fp8_bf16_hi[128] __attribute__((aligned(64))) = {
    0x00, 0x3B, 0x3B, 0x3B, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C,
    0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D,
    0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E,
    0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F,
    0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
    0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41,
    0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
    0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43,
};
static const uint8_t fp8_bf16_lo[128] __attribute__((aligned(64))) = {
    0x00, 0x00, 0x80, 0xC0, 0x00, 0x20, 0x40, 0x60, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
};

struct fp8_lut { __m512i ha, hb, la, lb; };

/* 64 code bytes at p of which n are valid (zeros past them). Whole steps use
 * a plain load: a streamed masked load is slower here. */
INLINE __m512i load_codes64(const uint8_t *p, int n)
{
    return n >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8((1ull << n) - 1, p);
}

/* One 64-column step: widen the codes (n: valid columns), multiply into
 * the block sums. */
INLINE void fp8_step64(const struct fp8_lut *t, const uint8_t *p, const float *const *xp, int c,
                       int n, int NJ, __m512 *b0, __m512 *b1)
{
    const __m512i z = _mm512_setzero_si512(), sign = _mm512_set1_epi8((char)0x80);
    __m512i v = load_codes64(p + c, n);
    __m512i hb = _mm512_permutex2var_epi8(t->ha, v, t->hb);
    hb = _mm512_ternarylogic_epi32(hb, v, sign, 0xF8);          /* hb | (v & 0x80) */
    __m512i lb = _mm512_permutex2var_epi8(t->la, v, t->lb);
    __m512i wl = _mm512_unpacklo_epi8(lb, hb), wh = _mm512_unpackhi_epi8(lb, hb);
    __m512 f0 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wl));
    __m512 f1 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wl));
    __m512 f2 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wh));
    __m512 f3 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wh));
    UNROLL
    for (int j = 0; j < NJ; j++) {
        const float *x = xp[j] + c;
        b0[j] = _mm512_fmadd_ps(f0, _mm512_loadu_ps(x), b0[j]);
        b1[j] = _mm512_fmadd_ps(f1, _mm512_loadu_ps(x + 16), b1[j]);
        b0[j] = _mm512_fmadd_ps(f2, _mm512_loadu_ps(x + 32), b0[j]);
        b1[j] = _mm512_fmadd_ps(f3, _mm512_loadu_ps(x + 48), b1[j]);
    }
}

/* The matvec prefetches, at each 64-column step, the same step of the row
 * 4 rows on (one tile ahead, 28 KiB at 7168 columns). The e4m3 decode keeps
 * the core busy, and without a prefetch the memory and the compute time
 * added up (10.6-11.8 GB/s against 13.3-14.2 with one 512 bytes ahead on
 * Zen 4, bench/gemm-results-2.md). On the Ice Lake-SP of gemm-results-3.md
 * its loop runs at about 23 GB/s in L1/L2, so 512 bytes ahead is some
 * 20 ns, under a memory latency; a tile ahead gave 11.6-13.6 against
 * 10.8-11.9 GB/s (16384 rows, 6 rounds interleaved). */

/* matvec: 4 rows per pass share each activation load (the activations are
 * 4 bytes per weight byte, and re-reading them per row costs as much cache
 * traffic as the weights). Each row's arithmetic is exactly that of
 * fp8_step64 in rows_fp8b_nj, so results do not depend on the tiling. */
INLINE void tile4_fp8b(const struct fp8_lut *t, const struct qtensor *W, int r,
                       const float *xp, float *Y)
{
    const int cols = W->cols, B = QUANT_FP8B_BLOCK, nbc = (cols + B - 1) / B;
    const __m512i z = _mm512_setzero_si512(), sign = _mm512_set1_epi8((char)0x80);
    const uint8_t *p[4];
    const float *s[4];
    __m512 acc[4];
    UNROLL
    for (int i = 0; i < 4; i++) {
        p[i] = (const uint8_t *)W->data + (size_t)(r + i) * cols;
        s[i] = W->scales + (size_t)((r + i) / B) * nbc;
        acc[i] = _mm512_setzero_ps();
    }
    for (int bc = 0; bc < nbc; bc++) {
        __m512 b0[4], b1[4];
        UNROLL
        for (int i = 0; i < 4; i++) b0[i] = b1[i] = _mm512_setzero_ps();
        int c0 = bc * B, c1 = c0 + B < cols ? c0 + B : cols;
        for (int c = c0; c < c1; c += 64) {
            int n = c1 - c;
            __m512 x0 = _mm512_loadu_ps(xp + c), x1 = _mm512_loadu_ps(xp + c + 16);
            __m512 x2 = _mm512_loadu_ps(xp + c + 32), x3 = _mm512_loadu_ps(xp + c + 48);
            UNROLL
            for (int i = 0; i < 4; i++) {
                if (r + 4 + i < W->rows) _mm_prefetch((const char *)p[i] + 4 * (size_t)cols + c, _MM_HINT_T0);
                __m512i v = load_codes64(p[i] + c, n);
                __m512i hb = _mm512_permutex2var_epi8(t->ha, v, t->hb);
                hb = _mm512_ternarylogic_epi32(hb, v, sign, 0xF8);
                __m512i lb = _mm512_permutex2var_epi8(t->la, v, t->lb);
                __m512i wl = _mm512_unpacklo_epi8(lb, hb), wh = _mm512_unpackhi_epi8(lb, hb);
                b0[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wl)), x0, b0[i]);
                b1[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wl)), x1, b1[i]);
                b0[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wh)), x2, b0[i]);
                b1[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wh)), x3, b1[i]);
            }
        }
        UNROLL
        for (int i = 0; i < 4; i++)
            acc[i] = _mm512_fmadd_ps(_mm512_add_ps(b0[i], b1[i]), _mm512_set1_ps(s[i][bc]), acc[i]);
    }
    UNROLL
    for (int i = 0; i < 4; i++) Y[r + i] = _mm512_reduce_add_ps(acc[i]);
}

/* Scale blocks (128 columns) per prefill column block, and rows whose
 * accumulators rest on the stack between column blocks. */
#define FP8_KB 8
#define FP8_RCHUNK 16

INLINE void rows_fp8b_nj(const struct qtensor *W, int r0, int r1,
                         const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int cols = W->cols, B = QUANT_FP8B_BLOCK;
    const int nbc = (cols + B - 1) / B;
    const struct fp8_lut t = {
        _mm512_load_si512(fp8_bf16_hi), _mm512_load_si512(fp8_bf16_hi + 64),
        _mm512_load_si512(fp8_bf16_lo), _mm512_load_si512(fp8_bf16_lo + 64),
    };
    const float *xp[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) xp[j] = a->xp + (size_t)(j0 + j) * a->cols_pad64;
    if (NJ == 1)
        for (; r0 + 4 <= r1; r0 += 4) tile4_fp8b(&t, W, r0, xp[0], Y + (size_t)j0 * W->rows);
    /* Prefill goes over the columns in blocks of FP8_KB scale blocks: the
     * NJ activations' slices (NJ * 4 KiB) stay in L1 while every row of the
     * call passes over them. An output's accumulator rests in sacc between
     * column blocks (a store and a load are exact), so its operations are
     * those of one pass over the whole row. */
    __m512 sacc[FP8_RCHUNK * QUANT_NB];
    for (int rc = r0; rc < r1; rc += FP8_RCHUNK) {
        int re = rc + FP8_RCHUNK < r1 ? rc + FP8_RCHUNK : r1;
        for (int bc0 = 0; bc0 < nbc; bc0 += FP8_KB) {
            int bc1 = bc0 + FP8_KB < nbc ? bc0 + FP8_KB : nbc;
            for (int r = rc; r < re; r++) {
                const uint8_t *p = (const uint8_t *)W->data + (size_t)r * cols;
                const float *s = W->scales + (size_t)(r / B) * nbc;
                __m512 *sa = sacc + (size_t)(r - rc) * NJ;
                __m512 acc[QUANT_NB];
                UNROLL
                for (int j = 0; j < NJ; j++) acc[j] = bc0 == 0 ? _mm512_setzero_ps() : sa[j];
                for (int bc = bc0; bc < bc1; bc++) {
                    __m512 b0[QUANT_NB], b1[QUANT_NB];
                    UNROLL
                    for (int j = 0; j < NJ; j++) b0[j] = b1[j] = _mm512_setzero_ps();
                    int c0 = bc * B, c1 = c0 + B < cols ? c0 + B : cols;
                    for (int c = c0; c < c1; c += 64) fp8_step64(&t, p, xp, c, c1 - c, NJ, b0, b1);
                    __m512 sv = _mm512_set1_ps(s[bc]);
                    UNROLL
                    for (int j = 0; j < NJ; j++) acc[j] = _mm512_fmadd_ps(_mm512_add_ps(b0[j], b1[j]), sv, acc[j]);
                }
                UNROLL
                for (int j = 0; j < NJ; j++) {
                    if (bc1 == nbc) Y[(size_t)(j0 + j) * W->rows + r] = _mm512_reduce_add_ps(acc[j]);
                    else sa[j] = acc[j];
                }
            }
        }
    }
}

VBMI static void rows_fp8b(const struct qtensor *W, int r0, int r1,
                           const struct quant_act *a, int j0, int nj, float *Y)
{
    switch (nj) {
    case 1: rows_fp8b_nj(W, r0, r1, a, j0, 1, Y); break;
    case 2: rows_fp8b_nj(W, r0, r1, a, j0, 2, Y); break;
    case 3: rows_fp8b_nj(W, r0, r1, a, j0, 3, Y); break;
    default: rows_fp8b_nj(W, r0, r1, a, j0, 4, Y); break;
    }
}

const struct quant_isa_table quant_isa_avx512vbmi = {
    .k = { [QUANT_FP8B] = { .rows = rows_fp8b, .act_perm64 = 1,
                         .slice = quant_slice_fp8b_perm64_avx512,
                         .act_pack = QUANT_SLICE_FP8B_PACK } },
};
