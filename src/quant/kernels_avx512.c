/* quant/kernels_avx512.c - AVX-512 (F/BW/VL/DQ + VNNI) kernels.
 *
 * Float formats (f32, bf16, f16, fp8b) widen the weights to f32 and use FMA
 * against the f32 activations; fp8b widens e4m3 through f16 (sign-extend the
 * byte, shift left 7, clear bit 14: the f16 with the same exponent and
 * mantissa bits, worth 2^-8 of the e4m3 value; the 2^8 is folded into the
 * block scale). q8 / q4* multiply int8 activations (blocks of 32) with VPDPBUSD:
 * the unsigned operand is the stored weight plus an offset (q4 nibbles are
 * already q+8; q8 bytes are flipped to q+128), and the offset times the sum
 * of the activation block (quant_act.xsum) is subtracted at the end.
 *
 * Each row kernel handles nj (1..QUANT_NB) activations per weight load, so
 * prefill reads the weights once per QUANT_NB activations from cache and
 * once per batch from memory. Prefill (nj > 1) also tiles rows: float
 * formats 3 or 4 rows x nj over 1024-column blocks (activation slices stay
 * in L1), int8 formats 2 rows x nj. Matvec takes 4 rows per pass (the
 * float formats share each f32 activation load, the int8 ones each spread
 * activation scale, and 4 prefetched rows stream faster than one). No tile
 * changes the operations of any one output (kernels.h invariant).
 * Prefill of f32 / bf16 / f16 slices of QUANT_SLICE_MIN activations or more
 * goes through the slice kernels of gemm_float_avx512.c instead.
 */
#include <assert.h>
#include <immintrin.h>
#include <math.h>

#include "quant/gemm_float.h"
#include "quant/kernels.h"

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

/* 16 weights of column c..c+15 (mask m selects valid lanes) as f32. */
INLINE __m512 load_w16(int fmt, const uint8_t *p, int c, __mmask16 m)
{
    if (fmt == QUANT_F32) return _mm512_maskz_loadu_ps(m, p + 4 * (size_t)c);
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
    __m512 acc0[4][QUANT_NB], acc1[4][QUANT_NB];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = row_ptr(W, r + i);
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
    const size_t esz = fmt == QUANT_F32 ? 4 : 2;
    int c = c0;
    for (; c + 32 <= c1; c += 32) {
        __m512 w[4];
        if (ahead) {
            UNROLL
            for (int i = 0; i < R; i++) {
                _mm_prefetch((const char *)p[i] + ahead + esz * (size_t)c, _MM_HINT_T0);
                if (esz == 4) _mm_prefetch((const char *)p[i] + ahead + esz * (size_t)c + 64, _MM_HINT_T0);
            }
        }
        UNROLL
        for (int i = 0; i < R; i++) w[i] = load_w16(fmt, p[i], c, 0xFFFF);
        UNROLL
        for (int j = 0; j < NJ; j++) {
            __m512 xv = _mm512_loadu_ps(x[j] + c);
            REG(xv);
            UNROLL
            for (int i = 0; i < R; i++) acc0[i][j] = _mm512_fmadd_ps(w[i], xv, acc0[i][j]);
        }
        UNROLL
        for (int i = 0; i < R; i++) w[i] = load_w16(fmt, p[i], c + 16, 0xFFFF);
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
            __m512 w0 = load_w16(fmt, p[i], c, m);
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

/* ------------------------------------------------------------------ fp8b */

/* 32 e4m3 bytes -> two vectors of f32 worth 2^-8 of the e4m3 values. */
INLINE void fp8x32_to_f32_2m8(__m256i b, __m512 *lo, __m512 *hi)
{
    __m512i h = _mm512_cvtepi8_epi16(b);
    h = _mm512_and_si512(_mm512_slli_epi16(h, 7), _mm512_set1_epi16((short)0xBF80));
    *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    *hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

/* One 32-column step of an fp8b row: widen, multiply into the block sums. */
INLINE void fp8_step(const uint8_t *p, const float *const *x, int c, __mmask32 m, int NJ,
                     __m512 *b0, __m512 *b1)
{
    __m512 wl, wh;
    fp8x32_to_f32_2m8(_mm256_maskz_loadu_epi8(m, p + c), &wl, &wh);
    UNROLL
    for (int j = 0; j < NJ; j++) {
        b0[j] = _mm512_fmadd_ps(wl, _mm512_maskz_loadu_ps((__mmask16)m, x[j] + c), b0[j]);
        b1[j] = _mm512_fmadd_ps(wh, _mm512_maskz_loadu_ps((__mmask16)(m >> 16), x[j] + c + 16), b1[j]);
    }
}

INLINE void rows_fp8b_nj(const struct qtensor *W, int r0, int r1,
                         const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int cols = W->cols, B = QUANT_FP8B_BLOCK;
    const int nbc = (cols + B - 1) / B, nfull = cols / B;
    const float *x[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * cols;
    for (int r = r0; r < r1; r++) {
        const uint8_t *p = row_ptr(W, r);
        const float *s = W->scales + (size_t)(r / B) * nbc;
        __m512 acc[QUANT_NB];
        UNROLL
        for (int j = 0; j < NJ; j++) acc[j] = _mm512_setzero_ps();
        for (int bc = 0; bc < nbc; bc++) {
            __m512 b0[QUANT_NB], b1[QUANT_NB];
            UNROLL
            for (int j = 0; j < NJ; j++) b0[j] = b1[j] = _mm512_setzero_ps();
            int c0 = bc * B;
            if (bc < nfull) {
                for (int c = c0; c < c0 + B; c += 32) fp8_step(p, x, c, 0xFFFFFFFFu, NJ, b0, b1);
            } else {
                for (int c = c0; c < cols; c += 32) {
                    int n = cols - c;
                    fp8_step(p, x, c, n >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << n) - 1), NJ, b0, b1);
                }
            }
            __m512 sv = _mm512_set1_ps(s[bc] * 256.0f);
            UNROLL
            for (int j = 0; j < NJ; j++) acc[j] = _mm512_fmadd_ps(_mm512_add_ps(b0[j], b1[j]), sv, acc[j]);
        }
        UNROLL
        for (int j = 0; j < NJ; j++) Y[(size_t)(j0 + j) * W->rows + r] = _mm512_reduce_add_ps(acc[j]);
    }
}

static void rows_fp8b(const struct qtensor *W, int r0, int r1,
                      const struct quant_act *a, int j0, int nj, float *Y)
{
    switch (nj) {
    case 1: rows_fp8b_nj(W, r0, r1, a, j0, 1, Y); break;
    case 2: rows_fp8b_nj(W, r0, r1, a, j0, 2, Y); break;
    case 3: rows_fp8b_nj(W, r0, r1, a, j0, 3, Y); break;
    default: rows_fp8b_nj(W, r0, r1, a, j0, 4, Y); break;
    }
}

/* ------------------------------------------------------------- q8 / q4* */

/* Weight scales of the 4 chunks of 128-block k, for group size G (0 = one
 * scale per row: handled by the caller). Groups past the row read as 0;
 * whole groups use plain loads (a streamed masked load is slower here). */
INLINE __m128 chunk_scales(const float *s, int k, int ng, int G)
{
    if (G == 32) {
        int v = ng - 4 * k;
        return v >= 4 ? _mm_loadu_ps(s + 4 * k) : _mm_maskz_loadu_ps((__mmask8)((1u << v) - 1), s + 4 * k);
    }
    if (G == 64) {
        int v = ng - 2 * k;
        __m128 w2 = v >= 2 ? _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(s + 2 * k))) : _mm_load_ss(s + 2 * k);
        return _mm_unpacklo_ps(w2, w2);
    }
    return _mm_set1_ps(s[k]);                           /* G == 128 */
}

/* Matvec prefetch. q8: INT_MV_PREFETCH bytes ahead of the current block in
 * each row (512: 7.9-10.6 GB/s for q4g64 streamed, 1024: 7.1-7.5, none:
 * 6.5-7.4; gemm-results-3.md). The int4 formats: the same block of the row
 * R rows on, i.e. one tile ahead. In cache a 4-row q4g64 tile runs at about
 * 22 GB/s, so 512 bytes ahead is some 25 ns, less than a memory latency, and
 * streamed the kernel ran near 1/(1/compute + 1/memory); a tile ahead (14 KiB,
 * about 0.7 us) gave q4g32/64/128 9.1-12.6 against 9.1-10.4 GB/s (16384 rows,
 * interleaved), while q8 (7 KiB rows, 28 KiB a tile) was slower that way. */
#define INT_MV_PREFETCH 512

/* R rows x NJ activations per pass. INT4: nibble layout (offset 8), else
 * q8 bytes (offset 128). G: group size, 0 for one scale per row. Each row's
 * unsigned operands are made once for the NJ activations. A chunk's
 * combined scale (row or group scale x activation block scale) is the
 * product of the two 4-chunk vectors, spread to the lanes: one 128-bit
 * multiply and two permutes per row and activation. (Until gemm-results-3
 * each factor was spread and the two 512-bit vectors multiplied, the same
 * product lane for lane, so the same bits, in 2 permutes per row, 2 per
 * activation and 2 multiplies per pair.) Every output's operations and bits
 * are those of the one-row, one-activation loop whatever R and NJ are.
 * Lanes: of a 128-element block, dlo covers elements 0..63 (int32 lanes 0-7:
 * chunk 0, lanes 8-15: chunk 1) and dhi elements 64..127 (chunks 2, 3);
 * idx_lo / idx_hi spread each chunk's scale to its lanes. */
INLINE void tile_int(const struct qtensor *W, int r, int R, const struct quant_act *a,
                     int j0, int NJ, float *Y, int INT4, int G)
{
    const int cols = W->cols, nb = a->cols_pad / QUANT_INT4_BLOCK;
    const int ng = G ? (cols + G - 1) / G : 1;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    const float ofs = INT4 ? 8.0f : 128.0f;
    const __m512i idx_lo = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i idx_hi = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    const int8_t *q[QUANT_NB];
    const float *xs[QUANT_NB], *xsum[QUANT_NB];
    UNROLL
    for (int j = 0; j < NJ; j++) {
        q[j] = a->q + (size_t)(j0 + j) * a->cols_pad;
        xs[j] = a->xs + (size_t)(j0 + j) * a->nblk;
        xsum[j] = a->xsum + (size_t)(j0 + j) * a->nblk;
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    const uint8_t *p[4];
    const float *s[4];
    __m512 acc[4][QUANT_NB];
    __m128 corr[4][QUANT_NB];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = row_ptr(W, r + i);
        s[i] = G ? W->scales + (size_t)(r + i) * ng : W->scales + r + i;
        UNROLL
        for (int j = 0; j < NJ; j++) { acc[i][j] = _mm512_setzero_ps(); corr[i][j] = _mm_setzero_ps(); }
    }
    for (int k = 0; k < nb; k++) {
        __m512i ulo[4], uhi[4];
        __m128 w4[4];
        int c = 128 * k, n = cols - c;
        __mmask64 mlo = n >= 64 ? ~0ull : (1ull << n) - 1;
        __mmask64 mhi = n >= 128 ? ~0ull : n <= 64 ? 0 : (1ull << (n - 64)) - 1;
        UNROLL
        for (int i = 0; i < R; i++) {
            if (NJ == 1 && INT4) {
                if (r + R + i < W->rows)    /* the same block of the next tile's row */
                    _mm_prefetch((const char *)p[i] + R * rb + 64 * (size_t)k, _MM_HINT_T0);
            } else if (NJ == 1) {
                _mm_prefetch((const char *)p[i] + 128 * (size_t)k + INT_MV_PREFETCH, _MM_HINT_T0);
            }
            if (INT4) {
                __m512i v = _mm512_loadu_si512(p[i] + 64 * (size_t)k);
                ulo[i] = _mm512_and_si512(v, m4);
                uhi[i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            } else {
                if (n >= 128) {
                    ulo[i] = _mm512_xor_si512(_mm512_loadu_si512(p[i] + c), flip);
                    uhi[i] = _mm512_xor_si512(_mm512_loadu_si512(p[i] + c + 64), flip);
                } else {
                    ulo[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mlo, p[i] + c), flip);
                    uhi[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mhi, p[i] + c + 64), flip);
                }
            }
            if (G) w4[i] = chunk_scales(s[i], k, ng, G);
        }
        UNROLL
        for (int j = 0; j < NJ; j++) {
            const int8_t *qj = q[j] + 128 * (size_t)k;
            __m128 x4 = _mm_loadu_ps(xs[j] + 4 * k);
            __m512 xlo, xhi;
            if (!G) {
                xlo = _mm512_permutexvar_ps(idx_lo, _mm512_castps128_ps512(x4));
                xhi = _mm512_permutexvar_ps(idx_hi, _mm512_castps128_ps512(x4));
            }
            UNROLL
            for (int i = 0; i < R; i++) {
                __m512i dlo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ulo[i], _mm512_loadu_si512(qj));
                __m512i dhi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), uhi[i], _mm512_loadu_si512(qj + 64));
                __m512 flo, fhi;
                if (!G) {
                    flo = xlo;
                    fhi = xhi;
                } else {
                    __m128 f4 = _mm_mul_ps(w4[i], x4);
                    flo = _mm512_permutexvar_ps(idx_lo, _mm512_castps128_ps512(f4));
                    fhi = _mm512_permutexvar_ps(idx_hi, _mm512_castps128_ps512(f4));
                }
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dlo), flo, acc[i][j]);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dhi), fhi, acc[i][j]);
            }
        }
    }
    /* The offset correction of the group formats: its own pass, in the order
     * of the blocks, so the main loop holds fewer registers. */
    for (int k = 0; G && k < nb; k++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m128 w4 = chunk_scales(s[i], k, ng, G);
            UNROLL
            for (int j = 0; j < NJ; j++) corr[i][j] = _mm_fmadd_ps(w4, _mm_loadu_ps(xsum[j] + 4 * k), corr[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < NJ; j++) {
            float dot = _mm512_reduce_add_ps(acc[i][j]), y;
            if (G) {
                __m128 c2 = _mm_add_ps(corr[i][j], _mm_movehl_ps(corr[i][j], corr[i][j]));
                float cs = _mm_cvtss_f32(_mm_add_ss(c2, _mm_movehdup_ps(c2)));
                y = dot - ofs * cs;
            } else {
                y = s[i][0] * (dot - ofs * a->xsum_all[j0 + j]);
            }
            Y[(size_t)(j0 + j) * W->rows + r + i] = y;
        }
}

/* matvec: 4 rows per pass, prefetched (see INT_MV_PREFETCH).
 * On the Ice Lake-SP guest of bench/gemm-results-3.md this streamed faster
 * than one row (q4g64 at 16384 rows: 7.9-10.6 against 6.2-7.2 GB/s, 3 rounds
 * interleaved) and in cache too (the activation scales are spread once for
 * 4 rows); on the Zen 4 of gemm-results-2.md multi-row passes without a
 * prefetch had streamed at half the rate of one row, not remeasured there.
 * Prefill: 2 rows x NJ activations, group formats included since their
 * offset correction runs in its own pass after the main loop (with it
 * inside, the 2-row tile ran out of registers and was slower than one
 * row). */
INLINE void rows_int_nj(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                        int j0, int NJ, float *Y, int INT4, int G)
{
    const int R = NJ > 1 ? 2 : 4;
    for (; r0 + R <= r1; r0 += R) tile_int(W, r0, R, a, j0, NJ, Y, INT4, G);
    for (; r0 < r1; r0++) tile_int(W, r0, 1, a, j0, NJ, Y, INT4, G);
}

#define INT_KERNEL(name, INT4, G)                                                    \
    static void rows_##name(const struct qtensor *W, int r0, int r1,                 \
                            const struct quant_act *a, int j0, int nj, float *Y)     \
    {                                                                                \
        switch (nj) {                                                                \
        case 1: rows_int_nj(W, r0, r1, a, j0, 1, Y, INT4, G); break;                \
        case 2: rows_int_nj(W, r0, r1, a, j0, 2, Y, INT4, G); break;                \
        case 3: rows_int_nj(W, r0, r1, a, j0, 3, Y, INT4, G); break;                \
        default: rows_int_nj(W, r0, r1, a, j0, 4, Y, INT4, G); break;               \
        }                                                                            \
    }
INT_KERNEL(q8, 0, 0)
INT_KERNEL(q4, 1, 0)
INT_KERNEL(q4g32, 1, 32)
INT_KERNEL(q4g64, 1, 64)
INT_KERNEL(q4g128, 1, 128)

/* -------------------------------------------------- activation quantizer */

/* Bit-identical to quant_act_prep_ref: same f32 operations, lane-parallel. */
static float act_prep(const float *x, int cols, int cols_pad, int8_t *q, float *xs, float *xsum)
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
        total += xsum[b];
    }
    return total;
}

const struct quant_isa_table quant_isa_avx512 = {
    .k = {
        [QUANT_F32] = { rows_f32, 0, .slice = quant_slice_f32_avx512,
                         .act_pack = QUANT_SLICE_FLOAT_PACK },
        [QUANT_BF16] = { rows_bf16, 0, .slice = quant_slice_bf16_avx512,
                         .act_pack = QUANT_SLICE_FLOAT_PACK },
        [QUANT_F16] = { rows_f16, 0, .slice = quant_slice_f16_avx512,
                         .act_pack = QUANT_SLICE_FLOAT_PACK },
        [QUANT_Q8] = { rows_q8, 1 },
        [QUANT_Q4] = { rows_q4, 1 },
        [QUANT_Q4G32] = { rows_q4g32, 1 },
        [QUANT_Q4G64] = { rows_q4g64, 1 },
        [QUANT_Q4G128] = { rows_q4g128, 1 },
        [QUANT_FP8B] = { rows_fp8b, 0 },
    },
    .act_prep = act_prep,
};
