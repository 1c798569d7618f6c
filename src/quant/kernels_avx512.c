/* quant/kernels_avx512.c - AVX-512 (F/BW/VL/DQ + VNNI) kernels.
 *
 * Float formats (f32, bf16, f16, fp8b) widen the weights to f32 and use FMA
 * against the f32 activations; fp8b widens to its dequantized values (e4m3
 * times the block scale, rounded once: quant_fp8b_widen16), so its products
 * are those of f32 over the dequantized tensor. The int8-activation formats
 * (q8, q4*) are those of kernels_int8_avx512.c; this file has their
 * activation quantizer.
 *
 * Each row kernel handles nj (1..QUANT_NB) activations per weight load, so
 * prefill reads the weights once per QUANT_NB activations from cache and
 * once per batch from memory. Prefill (nj > 1) also tiles rows: 3 or 4
 * rows x nj over 1024-column blocks (activation slices stay in L1). Matvec
 * takes 4 rows per pass (sharing each f32 activation load; 4 prefetched
 * rows stream faster than one). No tile changes the operations of any one
 * output (kernels.h invariant).
 * Prefill of f32 / bf16 / f16 slices of QUANT_SLICE_MIN activations or more
 * goes through the slice kernels of gemm_float_avx512.c instead.
 */
#include <assert.h>
#include <immintrin.h>
#include <math.h>

#include "quant/fp8.h"
#include "quant/gemm_float.h"
#include "quant/kernels_int8.h"

#define INLINE static inline __attribute__((always_inline))
/* Loops over the rows and activations of a register tile must unroll fully
 * (constant trip counts) so the accumulator arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 16")
/* Keeps v in a register: a vector used by several FMAs is loaded once rather
 * than folded into each FMA as a memory operand (loads were the bottleneck). */
#define REG(v) __asm__("" : "+v"(v))

static const uint8_t *row_ptr(const struct qtensor *W, int r)
{
    return (const uint8_t *)W->data + (size_t)r * quant_fmt_row_bytes(W->fmt, W->cols);
}

/* The row kernels are written once with an activation count NJ and
 * instantiated for NJ = 1..4 by a switch, so the per-activation loops unroll. */
static_assert(QUANT_NB == 4, "the kernel switches cover nj = 1..4");

/* ------------------------------------------------------ f32 / bf16 / f16 */

/* 16 weights of column c..c+15 (mask m selects valid lanes) as f32; fp8b
 * multiplied by sv, its block scale times 256 (quant_fp8b_widen16). */
INLINE __m512 load_w16(int fmt, const uint8_t *p, int c, __mmask16 m, __m512 sv)
{
    if (fmt == QUANT_F32) return _mm512_maskz_loadu_ps(m, p + 4 * (size_t)c);
    if (fmt == QUANT_FP8B) return quant_fp8b_widen16(_mm_maskz_loadu_epi8(m, p + c), sv);
    __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * (size_t)c);
    if (fmt == QUANT_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));   /* bf16 */
}

/* R rows x NJ activations per pass over columns [c0, c1): each weight
 * vector is widened once for the NJ activations and each activation vector
 * is loaded once for the R rows, so a 16-column step costs R + NJ loads for
 * R * NJ FMAs. R * NJ <= 12 keeps the 2 * R * NJ accumulators in registers.
 * Between column blocks the accumulators rest in sacc ([R][NJ][2] vectors;
 * a store and a load are exact). Every output keeps the sequence of the
 * one-row loop: acc0 takes the first 16 columns of each 32-column step, acc1
 * the second, the masked tail goes to acc0, then one reduction of
 * acc0 + acc1; column blocks start at multiples of 32. So an output's bits
 * depend on neither R, NJ nor the column blocking. */
INLINE void tile_float16(int fmt, const struct qtensor *W, int r, int R, const float *const *x,
                         int NJ, int c0, int c1, __m512 *sacc, int j0, float *Y)
{
    const int cols = W->cols, first = c0 == 0, last = c1 == cols;
    const uint8_t *p[4];
    const float *srow[4];       /* fp8b: the rows' block scales */
    __m512 sv[4];               /* fp8b: 256 x the scale of the current block */
    __m512 acc0[4][QUANT_NB], acc1[4][QUANT_NB];
    const int nbc = (cols + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK;
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = row_ptr(W, r + i);
        srow[i] = fmt == QUANT_FP8B ? W->scales + (size_t)((r + i) / QUANT_FP8B_BLOCK) * nbc : NULL;
        sv[i] = _mm512_setzero_ps();
        UNROLL
        for (int j = 0; j < NJ; j++) {
            acc0[i][j] = first ? _mm512_setzero_ps() : sacc[2 * (i * NJ + j)];
            acc1[i][j] = first ? _mm512_setzero_ps() : sacc[2 * (i * NJ + j) + 1];
        }
    }
    /* matvec: the same columns of the next tile's rows (R rows on) one
     * step ahead, far enough to cover a memory latency (a few hundred
     * bytes ahead in the same row is not); the prefetch changes no bits */
    const size_t ahead = NJ == 1 && r + 2 * R <= W->rows ? (size_t)R * quant_fmt_row_bytes(W->fmt, cols) : 0;
    const size_t esz = fmt == QUANT_F32 ? 4 : fmt == QUANT_FP8B ? 1 : 2;
    int c = c0;
    for (; c + 32 <= c1; c += 32) {
        __m512 w[4];
        if (fmt == QUANT_FP8B && (c == c0 || c % QUANT_FP8B_BLOCK == 0))
            UNROLL
            for (int i = 0; i < R; i++) sv[i] = _mm512_set1_ps(srow[i][c / QUANT_FP8B_BLOCK] * 256.0f);
        if (ahead) {
            UNROLL
            for (int i = 0; i < R; i++) {
                _mm_prefetch((const char *)p[i] + ahead + esz * (size_t)c, _MM_HINT_T0);
                if (esz == 4) _mm_prefetch((const char *)p[i] + ahead + esz * (size_t)c + 64, _MM_HINT_T0);
            }
        }
        UNROLL
        for (int i = 0; i < R; i++) w[i] = load_w16(fmt, p[i], c, 0xFFFF, sv[i]);
        UNROLL
        for (int j = 0; j < NJ; j++) {
            __m512 xv = _mm512_loadu_ps(x[j] + c);
            REG(xv);
            UNROLL
            for (int i = 0; i < R; i++) acc0[i][j] = _mm512_fmadd_ps(w[i], xv, acc0[i][j]);
        }
        UNROLL
        for (int i = 0; i < R; i++) w[i] = load_w16(fmt, p[i], c + 16, 0xFFFF, sv[i]);
        UNROLL
        for (int j = 0; j < NJ; j++) {
            __m512 xv = _mm512_loadu_ps(x[j] + c + 16);
            REG(xv);
            UNROLL
            for (int i = 0; i < R; i++) acc1[i][j] = _mm512_fmadd_ps(w[i], xv, acc1[i][j]);
        }
    }
    for (; c < c1; c += 16) {
        __mmask16 m = cols - c >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - c)) - 1);
        UNROLL
        for (int i = 0; i < R; i++) {
            if (fmt == QUANT_FP8B) sv[i] = _mm512_set1_ps(srow[i][c / QUANT_FP8B_BLOCK] * 256.0f);
            __m512 w0 = load_w16(fmt, p[i], c, m, sv[i]);
            UNROLL
            for (int j = 0; j < NJ; j++)
                acc0[i][j] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x[j] + c), acc0[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) {
            if (last) {
                Y[(size_t)(j0 + j) * W->rows + r + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i][j], acc1[i][j]));
            } else {
                sacc[2 * (i * NJ + j)] = acc0[i][j];
                sacc[2 * (i * NJ + j) + 1] = acc1[i][j];
            }
        }
}

/* Prefill column block: the NJ activations' slices (NJ * 4 KiB) stay in L1
 * while every row of the call passes over them, so only the weights come
 * from L2. A multiple of 32 (see tile_float16). */
#define FLOAT_KC 1024
/* Rows whose accumulators rest on the stack between column blocks. */
#define FLOAT_RCHUNK 18

INLINE void rows_float16(int fmt, const struct qtensor *W, int r0, int r1,
                         const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int cols = W->cols;
    const float *x[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * cols;
    if (NJ == 1) {
        /* matvec: no weight reuse to gain from column blocks (one block:
         * sacc is neither read nor written) */
        __m512 unused[2 * 4];
        for (; r0 + 4 <= r1; r0 += 4) tile_float16(fmt, W, r0, 4, x, 1, 0, cols, unused, j0, Y);
        for (; r0 < r1; r0++) tile_float16(fmt, W, r0, 1, x, 1, 0, cols, unused, j0, Y);
        return;
    }
    const int R = NJ == 4 ? 3 : 4;
    __m512 sacc[FLOAT_RCHUNK * QUANT_NB * 2];
    for (int rc = r0; rc < r1; rc += FLOAT_RCHUNK) {
        int re = rc + FLOAT_RCHUNK < r1 ? rc + FLOAT_RCHUNK : r1;
        for (int c0 = 0; c0 < cols; c0 += FLOAT_KC) {
            int c1 = c0 + FLOAT_KC < cols ? c0 + FLOAT_KC : cols;
            int r = rc;
            for (; r + R <= re; r += R)
                tile_float16(fmt, W, r, R, x, NJ, c0, c1, sacc + 2 * NJ * (r - rc), j0, Y);
            for (; r < re; r++) tile_float16(fmt, W, r, 1, x, NJ, c0, c1, sacc + 2 * NJ * (r - rc), j0, Y);
        }
    }
}

#define FLOAT_KERNEL(name, FMT)                                                      \
    static void rows_##name(const struct qtensor *W, int r0, int r1,                 \
                            const struct quant_act *a, int j0, int nj, float *Y)     \
    {                                                                                \
        switch (nj) {                                                                \
        case 1: rows_float16(FMT, W, r0, r1, a, j0, 1, Y); break;                   \
        case 2: rows_float16(FMT, W, r0, r1, a, j0, 2, Y); break;                   \
        case 3: rows_float16(FMT, W, r0, r1, a, j0, 3, Y); break;                   \
        default: rows_float16(FMT, W, r0, r1, a, j0, 4, Y); break;                  \
        }                                                                            \
    }
FLOAT_KERNEL(f32, QUANT_F32)
FLOAT_KERNEL(bf16, QUANT_BF16)
FLOAT_KERNEL(f16, QUANT_F16)
FLOAT_KERNEL(fp8b, QUANT_FP8B)

/* -------------------------------------------------- activation quantizer */

/* Bit-identical to quant_act_prep_ref: same f32 operations, lane-parallel. */
static float act_prep(const float *x, int cols, int cols_pad, int8_t *q, float *xs, float *xsum, int32_t *qsum)
{
    float total = 0.0f;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (int b = 0; b * QUANT_ACT_BLOCK < cols_pad; b++) {
        int c0 = b * QUANT_ACT_BLOCK, n = cols - c0;
        n = n < 0 ? 0 : n > 32 ? 32 : n;
        __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
        __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
        __m512 v0 = _mm512_maskz_loadu_ps(m0, x + c0), v1 = _mm512_maskz_loadu_ps(m1, x + c0 + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
        float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        __m512 vi = _mm512_set1_ps(inv), lim = _mm512_set1_ps(127.0f);
        __m512i i0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, vi), -lim), lim));
        __m512i i1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, vi), -lim), lim));
        _mm_storeu_si128((__m128i *)(q + c0), _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + c0 + 16), _mm512_cvtsepi32_epi8(i1));
        int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
        xs[b] = s;
        xsum[b] = s * (float)sum;
        if (qsum) qsum[b] = sum;
        total += xsum[b];
    }
    return total;
}

/* ------------------------------------------------------- dequantization */

/* fp8b row in f32 through quant_fp8b_widen16, 16 codes a step; NaN codes
 * get the table's NaN. A block whose scale is huge, infinite or NaN (a
 * hostile file's), where 256 x scale could overflow, goes through the table
 * instead, so the result is to_f32's in every case. */
static void dequant_fp8b(const struct qtensor *W, int row, float *out)
{
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * quant_fmt_row_bytes(W->fmt, W->cols);
    const int cols = W->cols, nbc = (cols + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK;
    const float *s = W->scales + (size_t)(row / QUANT_FP8B_BLOCK) * nbc;
    const __m512 pnan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)),
                 nnan = _mm512_castsi512_ps(_mm512_set1_epi32((int)0xFFC00000u));
    for (int c0 = 0; c0 < cols; c0 += QUANT_FP8B_BLOCK) {
        int c1 = c0 + QUANT_FP8B_BLOCK < cols ? c0 + QUANT_FP8B_BLOCK : cols;
        float sc = s[c0 / QUANT_FP8B_BLOCK];
        if (!(fabsf(sc) < 0x1p110f)) {
            for (int c = c0; c < c1; c++) out[c] = quant_fp8_e4m3_table[p[c]] * sc;
            continue;
        }
        const __m512 sv = _mm512_set1_ps(sc * 256.0f);
        for (int c = c0; c < c1; c += 16) {
            __mmask16 m = c1 - c >= 16 ? 0xFFFF : (__mmask16)((1u << (c1 - c)) - 1);
            __m128i codes = _mm_maskz_loadu_epi8(m, p + c);
            __m512 v = quant_fp8b_widen16(codes, sv);
            v = _mm512_mask_mov_ps(v, _mm_cmpeq_epi8_mask(codes, _mm_set1_epi8(0x7F)), pnan);
            v = _mm512_mask_mov_ps(v, _mm_cmpeq_epi8_mask(codes, _mm_set1_epi8((char)0xFF)), nnan);
            _mm512_mask_storeu_ps(out + c, m, v);
        }
    }
}

/* int4 row (q4, q4gG) in f32: the 64 bytes of a 128-column block give its
 * low nibbles (columns 0-63) and high nibbles (64-127); each 16 of them
 * widen to int32, less 8, times the scale of their group (every group size
 * is a multiple of 32, a power of two or the whole row), the single product
 * to_f32 rounds. A partial last block goes element by element. */
static void dequant_int4(const struct qtensor *W, int row, float *out)
{
    const int cols = W->cols;
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * quant_fmt_row_bytes(W->fmt, cols);
    const struct quant_fmt_traits *t = quant_fmt_traits(W->fmt);
    const int grouped = t->scale_kind == QUANT_SCALE_GROUP, g = grouped ? t->group_cols : cols;
    const int gshift = __builtin_ctz((unsigned)g), ng = (cols + g - 1) / g;
    const float *s = W->scales + (size_t)row * ng;
    const __m512i eight = _mm512_set1_epi32(8), low4 = _mm512_set1_epi32(0xF);
    int c0 = 0;
    for (; c0 + QUANT_INT4_BLOCK <= cols; c0 += QUANT_INT4_BLOCK) {
        const uint8_t *b = p + (size_t)(c0 / QUANT_INT4_BLOCK) * (QUANT_INT4_BLOCK / 2);
        UNROLL
        for (int q = 0; q < 8; q++) {
            const int c = c0 + 16 * q;
            const float sc = grouped ? s[c >> gshift] : s[0];
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + 16 * (q % 4))));
            v = q < 4 ? _mm512_and_si512(v, low4) : _mm512_srli_epi32(v, 4);
            __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(v, eight));
            _mm512_storeu_ps(out + c, _mm512_mul_ps(f, _mm512_set1_ps(sc)));
        }
    }
    for (int c = c0; c < cols; c++) out[c] = (float)quant_int4_get(p, c) * s[grouped ? c >> gshift : 0];
}

/* The int8 formats: kernels_int8_avx512.c (block-exact numerics). */
#define INT8_ENTRY(name)                                                                  \
    { .rows = quant_int8_rows_##name, .act_int8 = 1, .slice = quant_int8_slice_##name,   \
      .act_qsum = 1 }
const struct quant_isa_table quant_isa_avx512 = {
    .k = {
        [QUANT_F32] = { rows_f32, 0, .slice = quant_slice_f32_avx512,
                         .act_pack = QUANT_SLICE_FLOAT_PACK },
        [QUANT_BF16] = { rows_bf16, 0, .slice = quant_slice_bf16_avx512,
                         .act_pack = QUANT_SLICE_FLOAT_PACK },
        [QUANT_F16] = { rows_f16, 0, .slice = quant_slice_f16_avx512,
                         .act_pack = QUANT_SLICE_FLOAT_PACK },
        [QUANT_Q8] = INT8_ENTRY(q8),
        [QUANT_Q4] = INT8_ENTRY(q4),
        [QUANT_Q4G32] = INT8_ENTRY(q4g32),
        [QUANT_Q4G64] = INT8_ENTRY(q4g64),
        [QUANT_Q4G128] = INT8_ENTRY(q4g128),
        [QUANT_FP8B] = { rows_fp8b, 0, .slice = quant_slice_fp8b_avx512,
                          .act_pack = QUANT_SLICE_FLOAT_PACK },
    },
    .act_prep = act_prep,
    .dequant = { [QUANT_Q4] = dequant_int4, [QUANT_Q4G32] = dequant_int4, [QUANT_Q4G64] = dequant_int4,
                 [QUANT_Q4G128] = dequant_int4, [QUANT_FP8B] = dequant_fp8b },
};
