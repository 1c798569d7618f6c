/* quant/kernels_avx2.c - AVX2 + FMA + F16C kernels (x86-64 without AVX-512).
 *
 * Float formats widen to f32 and use FMA. fp8b makes the same products as
 * the AVX-512 file's f16 route (e4m3 x 2^-8 times the activation, x 2^8
 * folded into the block scale) from integer bits alone: e4m3 placed in an
 * f32's low exponent bits is 2^-120 x its value, and the activation, taken
 * x 2^112 once per row group, restores the product exactly. q8 / q4* use int8 activations (blocks of 32) and VPMADDUBSW:
 * q4 multiplies the stored nibble q+8 (unsigned) by the activation and takes
 * 8 x the block's activation sum out at the end; q8 uses |w| and the
 * activation with w's sign (no offset). Neither can saturate the 16-bit
 * pair sums (15*127*2 and 127*127*2 < 32767). Column tails that do not fill a
 * vector are finished in scalar code. mxfp4 looks each nibble up as twice its
 * e2m1 value (VPSHUFB) and multiplies the activation's magnitude (made once
 * per row group) by 2w with the activation's sign, exactly (12*127*2 <
 * 32767; activations are in [-127, 127]); each 32-column block's 8 int32 lane sums take
 * one rescale by the activation scale times 2^(e-128). Its rows are whole
 * 16-byte blocks and the activations are zero past cols, so it has no tail.
 *
 * Decode is a read of the weights, and one core reads at its bound only with
 * several sequential streams in flight and a software prefetch ahead of each
 * (dev/readprobe.h). So every kernel walks a group of adjacent rows side by
 * side (ROWS_PER of them for each activation count: about as many as fit
 * their accumulators in the 16 vector registers, chosen per format by
 * measurement) and prefetches each row's bytes
 * PF_AHEAD ahead, once per cache line. A row's own sequence of operations is
 * the same whatever group it is in, so its output's bits are too.
 */
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/kernels.h"
#include "quant/mxfp4.h"

#define INLINE static inline __attribute__((always_inline))
/* Loops over a row's activations must unroll fully (constant trip counts)
 * so the accumulator arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 16")

static_assert(QUANT_NB == 4, "the kernel switches cover nj = 1..4");

/* Software prefetch distance ahead of each row stream, bytes (the read
 * probe's best distance on the Zen 3 measured). */
#define PF_AHEAD 1024
/* Most rows a kernel walks side by side. */
#define MAXR 8

INLINE void pf(const void *p)
{
    _mm_prefetch((const char *)p + PF_AHEAD, _MM_HINT_T0);
}

/* Rows walked side by side for NJ activations when the kernel's register
 * budget is R1 rows at NJ = 1. */
#define ROWS_PER(R1, NJ) ((R1) / (NJ) > 0 ? (R1) / (NJ) : 1)

/* Calls BODY(RR, r) on groups of RR rows from r0 to r1, then on the rows
 * left one at a time. */
#define ROW_GROUPS(RR, BODY)                                   \
    do {                                                       \
        int r = r0;                                            \
        for (; r + (RR) <= r1; r += (RR)) BODY(RR, r);         \
        for (; r < r1; r++) BODY(1, r);                        \
    } while (0)

static const uint8_t *row_ptr(const struct qtensor *W, int r)
{
    return (const uint8_t *)W->data + (size_t)r * quant_fmt_row_bytes(W->fmt, W->cols);
}

static float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* ------------------------------------------------------ f32 / bf16 / f16 */

INLINE __m256 load_w8(int fmt, const uint8_t *p, int c)
{
    if (fmt == QUANT_F32) return _mm256_loadu_ps((const float *)(p + 4 * (size_t)c));
    __m128i h = _mm_loadu_si128((const __m128i *)(p + 2 * (size_t)c));
    if (fmt == QUANT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE float scalar_w(int fmt, const uint8_t *p, int c)
{
    if (fmt == QUANT_F32) { float w; memcpy(&w, p + 4 * (size_t)c, 4); return w; }
    uint16_t h;
    memcpy(&h, p + 2 * (size_t)c, 2);
    return fmt == QUANT_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
}

/* Rows r .. r + R - 1 side by side. */
INLINE void float_group(int fmt, const struct qtensor *W, int r, int R, const float *const *x,
                        int j0, int NJ, float *Y)
{
    const int cols = W->cols, es = fmt == QUANT_F32 ? 4 : 2;
    const size_t rb = quant_fmt_row_bytes(fmt, cols);
    const uint8_t *p = row_ptr(W, r);
    __m256 acc0[MAXR][QUANT_NB], acc1[MAXR][QUANT_NB];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) acc0[i][j] = acc1[i][j] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= cols; c += 16) {
        if ((c * es) % 64 == 0)
            UNROLL
            for (int i = 0; i < R; i++) pf(p + i * rb + (size_t)es * c);
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 w0 = load_w8(fmt, p + i * rb, c), w1 = load_w8(fmt, p + i * rb, c + 8);
            UNROLL
            for (int j = 0; j < NJ; j++) {
                acc0[i][j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[j] + c), acc0[i][j]);
                acc1[i][j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[j] + c + 8), acc1[i][j]);
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) {
            float y = hsum8(_mm256_add_ps(acc0[i][j], acc1[i][j]));
            for (int t = c; t < cols; t++) y += scalar_w(fmt, p + i * rb, t) * x[j][t];
            Y[(size_t)(j0 + j) * W->rows + r + i] = y;
        }
}

INLINE void rows_float8(int fmt, const struct qtensor *W, int r0, int r1,
                        const struct quant_act *a, int j0, int NJ, float *Y)
{
    const float *x[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * W->cols;
#define G(RR, r) float_group(fmt, W, r, RR, x, j0, NJ, Y)
    ROW_GROUPS(ROWS_PER(4, NJ), G);
#undef G
}

#define NJ_SWITCH(call)                                   \
    switch (nj) {                                         \
    case 1: call(1); break;                               \
    case 2: call(2); break;                               \
    case 3: call(3); break;                               \
    default: call(4); break;                              \
    }

static void rows_f32(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_float8(QUANT_F32, W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}
static void rows_bf16(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_float8(QUANT_BF16, W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}
static void rows_f16(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_float8(QUANT_F16, W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}

/* ------------------------------------------------------------------ fp8b */

/* 8 e4m3 bytes -> 8 f32 of 2^-120 times the e4m3 values. Sign-extended to
 * 32 bits and shifted left 20, a byte's sign lands on bit 31 and its
 * exponent and mantissa on f32's lowest 4 exponent and highest 3 mantissa
 * bits, subnormals on f32 subnormals. */
INLINE __m256 fp8x8_to_f32_2m120(const uint8_t *p)
{
    __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32((int)0x87F00000u)));
}

/* Rows r .. r + R - 1 side by side, all in one 128-row scale block. Every
 * product is the e4m3 value x 2^-8 times the activation, made exactly: with
 * LIFT 0 as (w x 2^-120 x 2^112) x a, the weight brought up per row; with
 * LIFT 1 as (w x 2^-120) x (a x 2^112), the activation brought up once for
 * the group. Both are the same real number (powers of two are exact while
 * a x 2^112 stays finite, i.e. |a| < 2^16), so the sums' bits are too; a
 * group whose output is not finite is redone with LIFT 0 (fp8b_group_safe),
 * since an infinite a x 2^112 always leaves its row's output infinite or
 * NaN. */
INLINE void fp8b_group(const struct qtensor *W, int r, int R, const float *const *x, int j0, int NJ, float *Y,
                       int LIFT)
{
    const __m256 up = _mm256_set1_ps(0x1p112f);
    const int cols = W->cols, B = QUANT_FP8B_BLOCK, nbc = (cols + B - 1) / B;
    const size_t rb = quant_fmt_row_bytes(QUANT_FP8B, cols);
    const uint8_t *p = row_ptr(W, r);
    const float *s = W->scales + (size_t)(r / B) * nbc;
    __m256 acc[MAXR][QUANT_NB];
    float tail[MAXR][QUANT_NB];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) acc[i][j] = _mm256_setzero_ps(), tail[i][j] = 0.0f;
    for (int bc = 0; bc < nbc; bc++) {
        int c0 = bc * B, c1 = c0 + B < cols ? c0 + B : cols, c = c0;
        __m256 b0[MAXR][QUANT_NB], b1[MAXR][QUANT_NB];
        UNROLL
        for (int i = 0; i < R; i++)
            UNROLL
            for (int j = 0; j < NJ; j++) b0[i][j] = b1[i][j] = _mm256_setzero_ps();
        for (; c + 16 <= c1; c += 16) {
            if (c % 64 == 0)
                UNROLL
                for (int i = 0; i < R; i++) pf(p + i * rb + c);
            __m256 xl[QUANT_NB], xh[QUANT_NB];
            UNROLL
            for (int j = 0; j < NJ; j++) {
                xl[j] = _mm256_loadu_ps(x[j] + c), xh[j] = _mm256_loadu_ps(x[j] + c + 8);
                if (LIFT) xl[j] = _mm256_mul_ps(xl[j], up), xh[j] = _mm256_mul_ps(xh[j], up);
            }
            UNROLL
            for (int i = 0; i < R; i++) {
                __m256 wl = fp8x8_to_f32_2m120(p + i * rb + c), wh = fp8x8_to_f32_2m120(p + i * rb + c + 8);
                if (!LIFT) wl = _mm256_mul_ps(wl, up), wh = _mm256_mul_ps(wh, up);
                UNROLL
                for (int j = 0; j < NJ; j++) {
                    b0[i][j] = _mm256_fmadd_ps(wl, xl[j], b0[i][j]);
                    b1[i][j] = _mm256_fmadd_ps(wh, xh[j], b1[i][j]);
                }
            }
        }
        __m256 sv = _mm256_set1_ps(s[bc] * 256.0f);
        UNROLL
        for (int i = 0; i < R; i++) {
            const uint8_t *pi = p + i * rb;
            UNROLL
            for (int j = 0; j < NJ; j++) {
                acc[i][j] = _mm256_fmadd_ps(_mm256_add_ps(b0[i][j], b1[i][j]), sv, acc[i][j]);
                float t = 0.0f;
                for (int u = c; u < c1; u++) t += quant_fp8_e4m3_table[pi[u]] * x[j][u];
                tail[i][j] += t * s[bc];
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) Y[(size_t)(j0 + j) * W->rows + r + i] = hsum8(acc[i][j]) + tail[i][j];
}

INLINE void fp8b_group_safe(const struct qtensor *W, int r, int R, const float *const *x, int j0, int NJ, float *Y)
{
    if (R == 1) {
        fp8b_group(W, r, 1, x, j0, NJ, Y, 0);
        return;
    }
    fp8b_group(W, r, R, x, j0, NJ, Y, 1);
    int fin = 1;
    UNROLL
    for (int j = 0; j < NJ; j++)
        UNROLL
        for (int i = 0; i < R; i++) fin &= isfinite(Y[(size_t)(j0 + j) * W->rows + r + i]);
    if (!fin) fp8b_group(W, r, R, x, j0, NJ, Y, 0);
}

INLINE void fp8b_group_1by1(const struct qtensor *W, int r, int R, const float *const *x, int j0, int NJ, float *Y)
{
    for (int i = 0; i < R; i++) fp8b_group(W, r + i, 1, x, j0, NJ, Y, 0);
}

INLINE void rows_fp8b_nj(const struct qtensor *W, int r0, int r1,
                         const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int B = QUANT_FP8B_BLOCK;
    const float *x[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * W->cols;
    /* a group that would straddle scale blocks goes row by row */
#define G(RR, r) (RR == 1 || (r) / B == ((r) + RR - 1) / B ? fp8b_group_safe(W, r, RR, x, j0, NJ, Y) \
                                                        : fp8b_group_1by1(W, r, RR, x, j0, NJ, Y))
    ROW_GROUPS(ROWS_PER(4, NJ), G);
#undef G
}

static void rows_fp8b(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_fp8b_nj(W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}

/* ------------------------------------------------------------- q8 / q4* */

/* Sum of u8 x s8 over 32 bytes as 8 int32 lanes. */
INLINE __m256 dot32(__m256i u, __m256i s)
{
    __m256i p = _mm256_maddubs_epi16(u, s);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* Row chunk ch (32 columns) as the unsigned operand u, and for q8 the
 * weights sg for the sign (INT4: 1 for the q4 family, 0 for q8). */
INLINE __m256i int_chunk(const uint8_t *p, int cols, int ch, int INT4, __m256i *sg)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (INT4) {
        /* chunk ch of block k: lo nibbles of bytes (ch%2)*32.. for chunks
         * 0,1 of the block, hi nibbles for chunks 2,3 */
        int k = ch / 4, cc = ch % 4;
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + 64 * (size_t)k + 32 * (cc & 1)));
        return cc < 2 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    int n = cols - 32 * ch;
    if (n >= 32) {
        *sg = _mm256_loadu_si256((const __m256i *)(p + 32 * (size_t)ch));
    } else {
        uint8_t tmp[32] = { 0 };
        memcpy(tmp, p + 32 * (size_t)ch, (size_t)n);
        *sg = _mm256_loadu_si256((const __m256i *)tmp);
    }
    return _mm256_abs_epi8(*sg);
}

/* The group scales of chunks ch .. ch + 7 (s: the row's, G: 32, 64, 128). */
INLINE __m256 group_scales8(const float *s, int ch, int G)
{
    if (G == 32) return _mm256_loadu_ps(s + ch);
    if (G == 64) {
        __m128 v = _mm_loadu_ps(s + ch / 2);
        return _mm256_set_m128(_mm_unpackhi_ps(v, v), _mm_unpacklo_ps(v, v));
    }
    __m128 lo = _mm_set1_ps(s[ch * 32 / G]), hi = _mm_set1_ps(s[(ch + 4) * 32 / G]);
    return _mm256_set_m128(hi, lo);
}

/* Rows r .. r + R - 1 side by side. INT4: 1 for the q4 family (nibbles),
 * 0 for q8. G: group size, 0 = per row. With groups, chunks go 8 at a time
 * (their scale x activation products made as one vector), the rest one at
 * a time. */
INLINE void int_group(const struct qtensor *W, int r, int R, const struct quant_act *a, int j0, int NJ,
                      float *Y, int INT4, int G)
{
    const int cols = W->cols, nchunk = (cols + 31) / 32;
    const int ng = G ? (cols + G - 1) / G : 1;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    const int8_t *q[QUANT_NB];
    const float *xs[QUANT_NB], *xsum[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) {
        q[j] = a->q + (size_t)(j0 + j) * a->cols_pad;
        xs[j] = a->xs + (size_t)(j0 + j) * a->nblk;
        xsum[j] = a->xsum + (size_t)(j0 + j) * a->nblk;
    }
    const uint8_t *p = row_ptr(W, r);
    const float *s = G ? W->scales + (size_t)r * ng : W->scales + r;
    __m256 acc[MAXR][QUANT_NB];
    float corr[MAXR][QUANT_NB];
    _Alignas(32) float wx[MAXR][QUANT_NB][8], wsum[MAXR][QUANT_NB][8];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) acc[i][j] = _mm256_setzero_ps(), corr[i][j] = 0.0f;
    int ch = 0;
    if (G && INT4)
        for (; ch + 8 <= nchunk; ch += 8) {
            UNROLL
            for (int i = 0; i < R; i++) {
                /* 8 chunks are 128 bytes of nibbles and 8 x 32 / G scales */
                pf(p + i * rb + 16 * (size_t)ch);
                pf(p + i * rb + 16 * (size_t)ch + 64);
                if (ch % (16 * G / 32) == 0) pf(s + (size_t)i * ng + ch * 32 / G);
                __m256 wv = group_scales8(s + (size_t)i * ng, ch, G);
                UNROLL
                for (int j = 0; j < NJ; j++) {
                    _mm256_store_ps(wx[i][j], _mm256_mul_ps(wv, _mm256_loadu_ps(xs[j] + ch)));
                    _mm256_store_ps(wsum[i][j], _mm256_mul_ps(wv, _mm256_loadu_ps(xsum[j] + ch)));
                }
            }
            UNROLL
            for (int k = 0; k < 8; k++)
                UNROLL
                for (int i = 0; i < R; i++) {
                    __m256i sg, u = int_chunk(p + i * rb, cols, ch + k, INT4, &sg);
                    UNROLL
                    for (int j = 0; j < NJ; j++) {
                        __m256i xq = _mm256_loadu_si256((const __m256i *)(q[j] + 32 * (size_t)(ch + k)));
                        acc[i][j] = _mm256_fmadd_ps(dot32(u, xq), _mm256_broadcast_ss(&wx[i][j][k]), acc[i][j]);
                        corr[i][j] += wsum[i][j][k];
                    }
                }
        }
    for (; ch < nchunk; ch++) {
        /* one prefetch per line of each row: q4 reads 64 bytes per 4
         * chunks, q8 32 per chunk; and of each row's group scales */
        if (INT4 ? ch % 4 == 0 : ch % 2 == 0)
            UNROLL
            for (int i = 0; i < R; i++) pf(p + i * rb + (INT4 ? 16 : 32) * (size_t)ch);
        if (G && ch % (16 * G / 32) == 0)
            UNROLL
            for (int i = 0; i < R; i++) pf(s + (size_t)i * ng + ch * 32 / G);
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256i sg = _mm256_setzero_si256(), u = int_chunk(p + i * rb, cols, ch, INT4, &sg);
            float w = G ? s[(size_t)i * ng + ch * 32 / G] : 1.0f;
            UNROLL
            for (int j = 0; j < NJ; j++) {
                __m256i xq = _mm256_loadu_si256((const __m256i *)(q[j] + 32 * (size_t)ch));
                if (!INT4) xq = _mm256_sign_epi8(xq, sg);
                acc[i][j] = _mm256_fmadd_ps(dot32(u, xq), _mm256_set1_ps(w * xs[j][ch]), acc[i][j]);
                if (INT4 && G) corr[i][j] += w * xsum[j][ch];
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) {
            float dot = hsum8(acc[i][j]), y;
            if (!INT4) y = s[i] * dot;
            else if (G) y = dot - 8.0f * corr[i][j];
            else y = s[i] * (dot - 8.0f * a->xsum_all[j0 + j]);
            Y[(size_t)(j0 + j) * W->rows + r + i] = y;
        }
}

INLINE void rows_int_nj(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                        int j0, int NJ, float *Y, int INT4, int G)
{
    /* the q4 family at 4 rows: measured faster in cache than at 8 and no
     * slower from memory (bench/avx2-decode-results.md); q8 keeps 8 */
#define GR(RR, r) int_group(W, r, RR, a, j0, NJ, Y, INT4, G)
    ROW_GROUPS(ROWS_PER(INT4 ? 4 : 8, NJ), GR);
#undef GR
}

#define INT_KERNEL(name, INT4, G)                                                        \
    static void rows_##name(const struct qtensor *W, int r0, int r1,                     \
                            const struct quant_act *a, int j0, int nj, float *Y)         \
    {                                                                                    \
        switch (nj) {                                                                    \
        case 1: rows_int_nj(W, r0, r1, a, j0, 1, Y, INT4, G); break;                    \
        case 2: rows_int_nj(W, r0, r1, a, j0, 2, Y, INT4, G); break;                    \
        case 3: rows_int_nj(W, r0, r1, a, j0, 3, Y, INT4, G); break;                    \
        default: rows_int_nj(W, r0, r1, a, j0, 4, Y, INT4, G); break;                   \
        }                                                                                \
    }
INT_KERNEL(q8, 0, 0)
INT_KERNEL(q4, 1, 0)
INT_KERNEL(q4g32, 1, 32)
INT_KERNEL(q4g64, 1, 64)
INT_KERNEL(q4g128, 1, 128)

/* ------------------------------------------------------------------ mxfp4 */

/* 8 e8m0 bytes -> 8 x quant_e8m0_half, the same bits. */
INLINE __m256 e8m0_half8(const uint8_t *e)
{
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    __m256i one = _mm256_set1_epi32(1);
    __m256i nrm = _mm256_slli_epi32(_mm256_sub_epi32(v, one), 23);
    __m256i sub = _mm256_srlv_epi32(_mm256_set1_epi32(0x00400000), _mm256_sub_epi32(one, v));
    __m256i h = _mm256_blendv_epi8(nrm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v));
    h = _mm256_blendv_epi8(h, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(v, _mm256_set1_epi32(0xFF)));
    return _mm256_castsi256_ps(h);
}

/* Two 16-byte blocks of 32 codes -> twice their e2m1 values as int8, each
 * block's 32 in column order (low, high nibble of each byte). */
INLINE void mx_decode2(const uint8_t *p, __m256i lut, __m256i *w0, __m256i *w1)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    /* per 128-bit lane (one block each): its columns 0..15, then 16..31 */
    __m256i a = _mm256_shuffle_epi8(lut, _mm256_unpacklo_epi8(lo, hi));
    __m256i b = _mm256_shuffle_epi8(lut, _mm256_unpackhi_epi8(lo, hi));
    *w0 = _mm256_permute2x128_si256(a, b, 0x20);
    *w1 = _mm256_permute2x128_si256(a, b, 0x31);
}

/* Rows r .. r + R - 1 side by side. Blocks go 8 at a time (their scales
 * times the activation's made as one vector), the rest one at a time. */
INLINE void mxfp4_group(const struct qtensor *W, int r, int R, const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int nb = (W->cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK, BB = QUANT_MX_BLOCK / 2;
    const size_t rb = quant_fmt_row_bytes(QUANT_MXFP4, W->cols);
    const int8_t *q[QUANT_NB];
    const float *xs[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) {
        q[j] = a->q + (size_t)(j0 + j) * a->cols_pad;
        xs[j] = a->xs + (size_t)(j0 + j) * a->nblk;
    }
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i lut = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                         0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const uint8_t *p = row_ptr(W, r), *e = W->scales_e8m0 + (size_t)r * nb;
    __m256 acc[MAXR][QUANT_NB];
    _Alignas(32) float hx[MAXR][QUANT_NB][8];
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) acc[i][j] = _mm256_setzero_ps();
    int b = 0;
    for (; b + 8 <= nb; b += 8) {
        /* one prefetch per line of each row's blocks and of its scales */
        UNROLL
        for (int i = 0; i < R; i++) {
            pf(p + i * rb + (size_t)b * BB);
            pf(p + i * rb + (size_t)b * BB + 64);
            if (b % 64 == 0) pf(e + (size_t)i * nb + b);
            __m256 h = e8m0_half8(e + (size_t)i * nb + b);
            UNROLL
            for (int j = 0; j < NJ; j++) _mm256_store_ps(hx[i][j], _mm256_mul_ps(h, _mm256_loadu_ps(xs[j] + b)));
        }
        UNROLL
        for (int k = 0; k < 8; k += 2) {
            __m256i xq[2][QUANT_NB], ax[2][QUANT_NB];
            UNROLL
            for (int t = 0; t < 2; t++)
                UNROLL
                for (int j = 0; j < NJ; j++) {
                    xq[t][j] = _mm256_loadu_si256((const __m256i *)(q[j] + (size_t)(b + k + t) * QUANT_MX_BLOCK));
                    ax[t][j] = _mm256_abs_epi8(xq[t][j]);
                }
            UNROLL
            for (int i = 0; i < R; i++) {
                __m256i w[2];
                mx_decode2(p + i * rb + (size_t)(b + k) * BB, lut, &w[0], &w[1]);
                UNROLL
                for (int t = 0; t < 2; t++)
                    UNROLL
                    for (int j = 0; j < NJ; j++)
                        acc[i][j] = _mm256_fmadd_ps(dot32(ax[t][j], _mm256_sign_epi8(w[t], xq[t][j])),
                                                    _mm256_broadcast_ss(&hx[i][j][k + t]), acc[i][j]);
            }
        }
    }
    for (; b < nb; b++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + i * rb + (size_t)b * BB));
            __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
            /* elements in column order: low, high nibble of each byte */
            __m256i nib = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
            __m256i w2 = _mm256_shuffle_epi8(lut, nib);
            float h = quant_e8m0_half(e[(size_t)i * nb + b]);
            UNROLL
            for (int j = 0; j < NJ; j++) {
                __m256i xq = _mm256_loadu_si256((const __m256i *)(q[j] + (size_t)b * QUANT_MX_BLOCK));
                acc[i][j] = _mm256_fmadd_ps(dot32(_mm256_abs_epi8(xq), _mm256_sign_epi8(w2, xq)),
                                            _mm256_set1_ps(h * xs[j][b]), acc[i][j]);
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) Y[(size_t)(j0 + j) * W->rows + r + i] = hsum8(acc[i][j]);
}

INLINE void rows_mxfp4_nj(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                          int j0, int NJ, float *Y)
{
#define G(RR, r) mxfp4_group(W, r, RR, a, j0, NJ, Y)
    ROW_GROUPS(ROWS_PER(4, NJ), G);
#undef G
}

static void rows_mxfp4(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_mxfp4_nj(W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}

const struct quant_isa_table quant_isa_avx2 = {
    .k = {
        [QUANT_F32] = { rows_f32, 0 },
        [QUANT_BF16] = { rows_bf16, 0 },
        [QUANT_F16] = { rows_f16, 0 },
        [QUANT_Q8] = { rows_q8, 1 },
        [QUANT_Q4] = { rows_q4, 1 },
        [QUANT_Q4G32] = { rows_q4g32, 1 },
        [QUANT_Q4G64] = { rows_q4g64, 1 },
        [QUANT_Q4G128] = { rows_q4g128, 1 },
        [QUANT_FP8B] = { rows_fp8b, 0 },
        [QUANT_MXFP4] = { rows_mxfp4, 1 },
    },
    .act_prep = NULL,
};
