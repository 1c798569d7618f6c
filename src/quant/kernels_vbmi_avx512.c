/* quant/kernels_vbmi_avx512.c - the AVX-512 level with VBMI: an fp8b row
 * kernel that decodes e4m3 with byte-table lookups (VPERMI2B) instead of
 * going through f16, for the matvec (decode). Prefill slices and formats
 * without a kernel here use the plain AVX-512 ones; the numerics are theirs
 * (f32 products over the dequantized weights, kernels_avx512.c), so the
 * bits are the same at both levels.
 *
 * Every e4m3 value is exactly a bf16 (8 exponent bits hold e4m3's range,
 * 7 mantissa bits hold its 3), so a byte code maps to a 16-bit pattern: two
 * 128-entry tables give its high and low byte for the 7-bit magnitude, the
 * sign bit is copied into the high byte, and the bf16 becomes an f32 by
 * putting it in the top half of a 32-bit lane. The two rounds of in-lane
 * unpacking that do this would leave a 64-column step's elements out of
 * order; one VPERMB of the codes first (fp8_order) makes them come out in
 * column order, so each 16 columns meet the activations the f32 loop gives
 * them. The NaN codes 0x7F/0xFF read as +-480, as on the f16 path.
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
static_assert(QUANT_FP8B_BLOCK % 64 == 0, "a 64-column step has one block scale");

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

/* The code order that two rounds of in-lane unpacking turn into column
 * order: byte 16L + 4k + i takes code 16k + 4L + i. */
static const uint8_t fp8_order[64] __attribute__((aligned(64))) = {
    0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51,
    4, 5, 6, 7, 20, 21, 22, 23, 36, 37, 38, 39, 52, 53, 54, 55,
    8, 9, 10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59,
    12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63,
};

struct fp8_lut { __m512i ha, hb, la, lb, order; };

/* 64 codes -> their e4m3 values as f32, f[k] holding codes 16k .. 16k+15. */
INLINE void fp8_decode64(const struct fp8_lut *t, __m512i v, __m512 f[4])
{
    const __m512i z = _mm512_setzero_si512(), sign = _mm512_set1_epi8((char)0x80);
    v = _mm512_permutexvar_epi8(t->order, v);
    __m512i hb = _mm512_permutex2var_epi8(t->ha, v, t->hb);
    hb = _mm512_ternarylogic_epi32(hb, v, sign, 0xF8);          /* hb | (v & 0x80) */
    __m512i lb = _mm512_permutex2var_epi8(t->la, v, t->lb);
    __m512i wl = _mm512_unpacklo_epi8(lb, hb), wh = _mm512_unpackhi_epi8(lb, hb);
    f[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wl));
    f[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wl));
    f[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wh));
    f[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wh));
}

/* The matvec prefetches, at each 64-column step, the same step of the row
 * R rows on (one tile ahead, 28 KiB at 7168 columns and 4 rows). The e4m3
 * decode keeps the core busy, and without a prefetch the memory and the
 * compute time added up (10.6-11.8 GB/s against 13.3-14.2 with one 512
 * bytes ahead on Zen 4, bench/gemm-results-2.md); on the Ice Lake-SP of
 * gemm-results-3.md a tile ahead gave 11.6-13.6 against 10.8-11.9 GB/s
 * with 512 bytes ahead (16384 rows, 6 rounds interleaved). */

/* R rows x NJ activations (R * NJ <= 4): 4 rows per pass in the matvec share
 * each activation load (the activations are 4 bytes per weight byte). Each
 * output runs the f32 one-row loop of kernels_avx512.c over the dequantized
 * weights (the value times its block scale, rounded once): acc0 takes the
 * first 16 columns of each 32-column step, acc1 the second, the tail
 * (cols % 32) goes to acc0 16 columns at a time, and the output is the
 * reduction of acc0 + acc1. Whole 64-column steps decode by table; the
 * rest goes through quant_fp8b_widen16, which gives the same values. */
/* Columns c .. c+15 (mask m) of one row (codes p, block scales s) into
 * acc[NJ]. */
INLINE void chunk16(const uint8_t *p, const float *s, int c, __mmask16 m, const float *const *x, int NJ,
                    __m512 *acc)
{
    const __m512 w = quant_fp8b_widen16(_mm_maskz_loadu_epi8(m, p + c),
                                        _mm512_set1_ps(s[c / QUANT_FP8B_BLOCK] * 256.0f));
    UNROLL
    for (int j = 0; j < NJ; j++) acc[j] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x[j] + c), acc[j]);
}

INLINE void tile_fp8b(const struct fp8_lut *t, const struct qtensor *W, int r, int R,
                      const float *const *x, int NJ, int j0, float *Y)
{
    const int cols = W->cols, B = QUANT_FP8B_BLOCK, nbc = (cols + B - 1) / B;
    const uint8_t *p[4];
    const float *s[4];
    __m512 acc0[4][QUANT_NB], acc1[4][QUANT_NB];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)W->data + (size_t)(r + i) * cols;
        s[i] = W->scales + (size_t)((r + i) / B) * nbc;
        UNROLL
        for (int j = 0; j < NJ; j++) acc0[i][j] = acc1[i][j] = _mm512_setzero_ps();
    }
    const int ahead = NJ == 1 && r + 2 * R <= W->rows;
    int c = 0;
    for (; c + 64 <= cols; c += 64) {
        UNROLL
        for (int i = 0; i < R; i++) {
            if (ahead) _mm_prefetch((const char *)p[i] + (size_t)R * cols + c, _MM_HINT_T0);
            __m512 f[4];
            fp8_decode64(t, _mm512_loadu_si512(p[i] + c), f);
            const __m512 sv = _mm512_set1_ps(s[i][c / B]);
            UNROLL
            for (int k = 0; k < 4; k++) f[k] = _mm512_mul_ps(f[k], sv);
            UNROLL
            for (int j = 0; j < NJ; j++) {
                const float *xj = x[j] + c;
                acc0[i][j] = _mm512_fmadd_ps(f[0], _mm512_loadu_ps(xj), acc0[i][j]);
                acc1[i][j] = _mm512_fmadd_ps(f[1], _mm512_loadu_ps(xj + 16), acc1[i][j]);
                acc0[i][j] = _mm512_fmadd_ps(f[2], _mm512_loadu_ps(xj + 32), acc0[i][j]);
                acc1[i][j] = _mm512_fmadd_ps(f[3], _mm512_loadu_ps(xj + 48), acc1[i][j]);
            }
        }
    }
    /* the rest as the f32 loop takes it: whole 32-column steps, then the
     * tail 16 columns at a time into acc0 */
    for (; c + 32 <= cols; c += 32)
        UNROLL
        for (int i = 0; i < R; i++) {
            chunk16(p[i], s[i], c, 0xFFFF, x, NJ, acc0[i]);
            chunk16(p[i], s[i], c + 16, 0xFFFF, x, NJ, acc1[i]);
        }
    for (; c < cols; c += 16) {
        const __mmask16 m = cols - c >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - c)) - 1);
        UNROLL
        for (int i = 0; i < R; i++) chunk16(p[i], s[i], c, m, x, NJ, acc0[i]);
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++)
            Y[(size_t)(j0 + j) * W->rows + r + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i][j], acc1[i][j]));
}

INLINE void rows_fp8b_nj(const struct qtensor *W, int r0, int r1,
                         const struct quant_act *a, int j0, int NJ, float *Y)
{
    const struct fp8_lut t = {
        _mm512_load_si512(fp8_bf16_hi), _mm512_load_si512(fp8_bf16_hi + 64),
        _mm512_load_si512(fp8_bf16_lo), _mm512_load_si512(fp8_bf16_lo + 64),
        _mm512_load_si512(fp8_order),
    };
    const float *x[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * W->cols;
    if (NJ == 1)
        for (; r0 + 4 <= r1; r0 += 4) tile_fp8b(&t, W, r0, 4, x, 1, j0, Y);
    for (; r0 < r1; r0++) tile_fp8b(&t, W, r0, 1, x, NJ, j0, Y);
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
    .k = { [QUANT_FP8B] = { .rows = rows_fp8b, .slice = quant_slice_fp8b_avx512,
                            .act_pack = QUANT_SLICE_FLOAT_PACK } },
};
