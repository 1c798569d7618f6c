/* quant/kernels_int8_avx512.c - the int8-activation formats (q8, q4, q4gG)
 * on AVX-512 VNNI with the block-exact numerics of kernels_int8.h: a matvec
 * (rows) and a prefill slice, both on VPDPBUSD. The amx level takes the
 * matvec from here.
 */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "quant/kernels_int8.h"
#include "quant/transpose_avx512.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

static_assert(QUANT_ACT_BLOCK == 32, "a block sum covers 32 columns");

static const uint8_t *row_ptr(const struct qtensor *W, int r)
{
    return (const uint8_t *)W->data + (size_t)r * quant_fmt_row_bytes(W->fmt, W->cols);
}

/* Matvec: the block sums from VPDPBUSD on the weights as stored, whose
 * lanes each sum 4 columns: a vector of one row holds two blocks (lanes
 * 0-7, 8-15), and a tree of unpacks and adds (reduce16) turns 16 such
 * vectors into two vectors of block sums, one lane per input vector. The
 * weights are unsigned (nibble = q + 8, q8 byte ^ 0x80 = q + 128), so the
 * offset times the activation block's integer sum comes off each sum,
 * exactly. (A tile matvec, A = 16 rows of weights and B one activation,
 * read int4 weights at 13 GB/s in cache against this kernel's ~30: each
 * tile load and store costs about a cycle per row, for 16 x 64 useful
 * bytes.)
 * Row-scale formats (q8, q4) take 16 rows per pass, one row per lane; the
 * group formats 8 rows per pass, one row per lane of a 256-bit chain, with
 * 8 groups' scales per window (bench/amx-decode-results.md, Sapphire
 * Rapids: streamed, q4g32 / q4g64 ran 16.7 / 16.4 GB/s that way against
 * 15.4 / 15.6 in 16-row passes; q4 15.1 against 16.2). */
/* Decode prefetch, chosen on the streamed matvec (65536 x 7168, 1 thread,
 * 3+ rounds interleaved, bench/amx-int8-results.md, amx-decode-results.md).
 * int4: the next pass's rows, a contiguous run of bytes, to L2 in address
 * order, as many lines per 128-column step as the pass has rows, so they
 * are fetched by the time this pass ends; the group formats the next
 * pass's scales (contiguous too) the same way, to L1. (8-row passes,
 * q4g64 / q4g32, one run: each row's block of the next pass to L1 and the
 * scales per row at each window 14.7 / 14.1 GB/s; the scales in address
 * order 15.1 / 15.3; the weights too, to L1 14.0 / 15.9, to L2 15.4 /
 * 16.3; in another run, two passes ahead 15.0 / 14.7.) Prefetching
 * instead each row's own block of the next pass (a stream per row)
 * streamed 16-row q4g32 / q4g64 at 12.4 / 13.9 GB/s. q8 (7 KiB rows)
 * MV_Q8_PREFETCH bytes ahead in its own rows, 15.4-15.8 GB/s against
 * 13.8-14.8 a tile ahead. Rows shorter than MV_Q8_INROW_MIN bytes (a V3
 * down projection's 2048 columns, V2-Lite's 2048 and 1408) take the int4
 * scheme instead: on Zen 5 (1 thread, 5 rounds interleaved, probe 32-33
 * GB/s; bench/avx512-kernels-results.md) 2048 columns streamed at 32.3
 * (29.8-33.6) GB/s that way against 26.1 (24.6-27.0) in their own rows
 * and 22.9 before the own-row streams ran on into the next pass; 7168
 * columns at 33.3 (31.5-34.0) in their own rows, 31.8 (30.3-34.5) in
 * address order. */
#define MV_Q8_PREFETCH 512
#define MV_Q8_INROW_MIN 4096

INLINE void reduce16(const __m512i *D, __m512i *SA, __m512i *SB)
{
    __m512i E[8], F[4], H[2];
    UNROLL
    for (int p = 0; p < 8; p++)     /* (a0+a2, b0+b2, a1+a3, b1+b3) per 128-bit lane */
        E[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(D[2 * p], D[2 * p + 1]),
                                _mm512_unpackhi_epi32(D[2 * p], D[2 * p + 1]));
    UNROLL
    for (int p = 0; p < 4; p++)     /* rows 4p .. 4p+3, one sum of 4 lanes each */
        F[p] = _mm512_add_epi32(_mm512_unpacklo_epi64(E[2 * p], E[2 * p + 1]),
                                _mm512_unpackhi_epi64(E[2 * p], E[2 * p + 1]));
    UNROLL
    for (int p = 0; p < 2; p++)     /* [A rows 8p..8p+3, B same, A 8p+4.., B 8p+4..] */
        H[p] = _mm512_add_epi32(_mm512_shuffle_i32x4(F[2 * p], F[2 * p + 1], 0x88),
                                _mm512_shuffle_i32x4(F[2 * p], F[2 * p + 1], 0xDD));
    *SA = _mm512_shuffle_i32x4(H[0], H[1], 0x88);
    *SB = _mm512_shuffle_i32x4(H[0], H[1], 0xDD);
}

/* One activation (q, xs, qs: its block integer sums) times rows
 * [r, r + nr), nr <= 16, of a row-scale format (q8, q4) into y[nr]: input
 * j of reduce16 is row j's low (then high) half of a 128-column block, so
 * lane j holds row j's chain. INROW: q8 prefetches in each row's stream,
 * not in address order (MV_Q8_INROW_MIN). */
INLINE void matvec_tile16(const struct qtensor *W, int r, int nr, const int8_t *q, const float *xs,
                          const int32_t *qs, float *y, int INT4, int INROW)
{
    const int cols = W->cols, nb = (cols + 31) / 32, nk = (cols + 127) / 128;
    const int ofs = INT4 ? 8 : 128;
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    /* the next pass's 16 rows in address order, as many lines a step as
     * this pass reads: 16 (int4) or 32 (q8) */
    /* row addresses from one row size (row_ptr per row was 2% of a decode) */
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    const uint8_t *base = (const uint8_t *)W->data;
    const uint8_t *next = r + 32 <= W->rows ? base + rb * (size_t)(r + 16) : NULL;
    const uint8_t *p[16], *pn[16];
    int use[16];
    for (int j = 0; j < 16; j++) {
        use[j] = j < nr;
        p[j] = base + rb * (size_t)(r + (use[j] ? j : 0));
        pn[j] = r + 16 + j < W->rows ? base + rb * (size_t)(r + 16 + j) : NULL;
    }
    __m512 acc = _mm512_setzero_ps();
    for (int k = 0; k < nk; k++) {
        const int n = cols - 128 * k;
        const __mmask64 mlo = n >= 64 ? ~0ull : (1ull << n) - 1;
        const __mmask64 mhi = n >= 128 ? ~0ull : n <= 64 ? 0 : (1ull << (n - 64)) - 1;
        const __m512i qlo = _mm512_loadu_si512(q + 128 * (size_t)k), qhi = _mm512_loadu_si512(q + 128 * (size_t)k + 64);
        __m512i D[16], S[4];
        UNROLL
        for (int j = 0; j < 16; j++) {
            __m512i u;
            if (INT4) {
                if (next) _mm_prefetch((const char *)next + 64 * (16 * (size_t)k + j), _MM_HINT_T1);
            } else if (INROW) {
                /* MV_Q8_PREFETCH bytes ahead in the row's stream, which
                 * runs on into the same lane's row of the next pass */
                UNROLL
                for (size_t l = 128 * (size_t)k + MV_Q8_PREFETCH; l < 128 * (size_t)k + MV_Q8_PREFETCH + 128; l += 64) {
                    if (l < rb) _mm_prefetch((const char *)p[j] + l, _MM_HINT_T0);
                    else if (pn[j]) _mm_prefetch((const char *)pn[j] + (l - rb), _MM_HINT_T0);
                }
            } else if (next) {
                _mm_prefetch((const char *)next + 128 * (16 * (size_t)k + j), _MM_HINT_T1);
                _mm_prefetch((const char *)next + 128 * (16 * (size_t)k + j) + 64, _MM_HINT_T1);
            }
            if (INT4) u = _mm512_and_si512(_mm512_loadu_si512(p[j] + 64 * (size_t)k), m4);
            else u = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mlo, p[j] + 128 * (size_t)k), flip);
            D[j] = use[j] ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, qlo) : _mm512_setzero_si512();
        }
        reduce16(D, &S[0], &S[1]);
        UNROLL
        for (int j = 0; j < 16; j++) {
            __m512i u;
            if (INT4) u = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(p[j] + 64 * (size_t)k), 4), m4);
            else u = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mhi, p[j] + 128 * (size_t)k + 64), flip);
            D[j] = use[j] ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, qhi) : _mm512_setzero_si512();
        }
        reduce16(D, &S[2], &S[3]);
        UNROLL
        for (int t = 0; t < 4; t++) {
            const int b = 4 * k + t;
            if (b >= nb) break;
            __m512i isum = _mm512_sub_epi32(S[t], _mm512_set1_epi32(ofs * qs[b]));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(xs[b]), acc);
        }
    }
    acc = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, W->scales + r), acc);
    _mm512_mask_storeu_ps(y, live, acc);
}

/* The group formats' 8-row pass keeps its rows in the lane order
 * sig(e) = 2 (e % 4) + e / 4: the order in which a 4 x 4 transpose per
 * 128-bit lane leaves 8 rows' scales (scales8), so they need no permute.
 * Loading row sig(e) as input e puts the block sums in the same order; one
 * permute (SIG_INV_IDX) restores the rows at the end. */
#define SIG_INV_IDX _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0)
static inline int lane_row8(int e) { return 2 * (e % 4) + e / 4; }

/* Group scales g0 .. g0+7 (those < ng; the rest 0) of the 8 rows at s (row
 * i at s + i * ng; rows past nr read row 0's) into buf: group g0 + t at
 * buf + 16 (t % 4) + 8 (t / 4), 8 floats in the lane order sig. */
INLINE void scales8(const float *s, int ng, int g0, int nr, float *buf)
{
    const int v = ng - g0;
    const __mmask8 m0 = (__mmask8)(v >= 4 ? 0xF : (1u << v) - 1);
    const __mmask8 m1 = (__mmask8)(v >= 8 ? 0xF : v <= 4 ? 0 : (1u << (v - 4)) - 1);
    __m512 Z[4];
    UNROLL
    for (int p = 0; p < 4; p++) {
        /* Z[p], 128-bit lane L < 2: row 2p + L's groups g0 .. g0+3;
         * lane 2 + L: its groups g0+4 .. g0+7 */
        const float *s0 = s + (size_t)(2 * p < nr ? 2 * p : 0) * ng + g0;
        const float *s1 = s + (size_t)(2 * p + 1 < nr ? 2 * p + 1 : 0) * ng + g0;
        __m512 z = _mm512_castps128_ps512(_mm_maskz_loadu_ps(m0, s0));
        z = _mm512_insertf32x4(z, _mm_maskz_loadu_ps(m0, s1), 1);
        z = _mm512_insertf32x4(z, _mm_maskz_loadu_ps(m1, s0 + 4), 2);
        z = _mm512_insertf32x4(z, _mm_maskz_loadu_ps(m1, s1 + 4), 3);
        Z[p] = z;
    }
    /* transposed per 128-bit lane: vector t, element 4L + p = Z[p] lane L
     * element t (row sig(4L + p), group g0 + t, or g0 + 4 + t for L >= 2) */
    __m512 t0 = _mm512_unpacklo_ps(Z[0], Z[1]), t1 = _mm512_unpackhi_ps(Z[0], Z[1]);
    __m512 t2 = _mm512_unpacklo_ps(Z[2], Z[3]), t3 = _mm512_unpackhi_ps(Z[2], Z[3]);
    _mm512_store_ps(buf, _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2))));
    _mm512_store_ps(buf + 16, _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2))));
    _mm512_store_ps(buf + 32, _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3))));
    _mm512_store_ps(buf + 48, _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3))));
}

/* One activation times rows [r, r + nr), nr <= 8, of a group format (q4gG)
 * into y[nr]: input e of reduce16 is row sig(e)'s low half of a 128-column
 * block, input 8 + e its high half, so its two vectors hold
 * [block 4k | block 4k+2] and [4k+1 | 4k+3] of the 8 rows. */
INLINE void matvec_tile8(const struct qtensor *W, int r, int nr, const int8_t *q, const float *xs,
                         const int32_t *qs, float *y, int G)
{
    const int cols = W->cols, nb = (cols + 31) / 32, nk = (cols + 127) / 128;
    const int ng = (cols + G - 1) / G;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __mmask8 live = (__mmask8)((1u << nr) - 1);
    const float *s = W->scales + (size_t)r * ng;
    /* the next pass's 8 rows and their scales, each in address order:
     * 8 lines of weights and 4096 / G bytes of scales a step */
    const int ahead = r + 16 <= W->rows;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    const uint8_t *base = (const uint8_t *)W->data;
    const uint8_t *next = ahead ? base + rb * (size_t)(r + 8) : NULL;
    const char *snext = ahead ? (const char *)(s + 8 * (size_t)ng) : NULL;
    const uint8_t *p[8];
    int use[8];
    for (int e = 0; e < 8; e++) {
        use[e] = lane_row8(e) < nr;
        p[e] = base + rb * (size_t)(r + (use[e] ? lane_row8(e) : 0));
    }
    float sgb[64] __attribute__((aligned(64)));
    __m256 acc = _mm256_setzero_ps();
    int gwin = -1;      /* first group held in sgb */
    for (int k = 0; k < nk; k++) {
        const __m512i qlo = _mm512_loadu_si512(q + 128 * (size_t)k), qhi = _mm512_loadu_si512(q + 128 * (size_t)k + 64);
        __m512i D[16], SA, SB;
        UNROLL
        for (int e = 0; e < 8; e++) {
            if (next) _mm_prefetch((const char *)next + 64 * (8 * (size_t)k + e), _MM_HINT_T1);
            __m512i v = _mm512_loadu_si512(p[e] + 64 * (size_t)k);
            D[e] = use[e] ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v, m4), qlo)
                          : _mm512_setzero_si512();
            D[8 + e] = use[e] ? _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                    _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), qhi)
                              : _mm512_setzero_si512();
        }
        if (snext) {
            UNROLL
            for (int l = 0; l < 4096 / G; l += 64)
                _mm_prefetch(snext + (size_t)k * (4096 / G) + l, _MM_HINT_T0);
        }
        reduce16(D, &SA, &SB);
        const __m256i S[4] = { _mm512_castsi512_si256(SA), _mm512_castsi512_si256(SB),
                               _mm512_extracti64x4_epi64(SA, 1), _mm512_extracti64x4_epi64(SB, 1) };
        UNROLL
        for (int t = 0; t < 4; t++) {
            const int b = 4 * k + t, g = quant_int8_group_of(b, G);
            if (b >= nb) break;
            if (gwin < 0 || g >= gwin + 8) {
                gwin = g;
                scales8(s, ng, gwin, nr, sgb);
            }
            const int w = g - gwin;
            __m256i isum = _mm256_sub_epi32(S[t], _mm256_set1_epi32(8 * qs[b]));
            __m256 f = _mm256_mul_ps(_mm256_load_ps(sgb + 16 * (w % 4) + 8 * (w / 4)), _mm256_set1_ps(xs[b]));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), f, acc);
        }
    }
    _mm256_mask_storeu_ps(y, live, _mm256_permutexvar_ps(SIG_INV_IDX, acc));
}

INLINE void rows_int8(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                     int j0, int nj, float *Y, int INT4, int G)
{
    const int R = G ? 8 : 16;
    /* q8: long rows prefetch in their own streams, short rows in address
     * order like int4 (see MV_Q8_PREFETCH) */
    const int inrow = quant_fmt_row_bytes(W->fmt, W->cols) >= MV_Q8_INROW_MIN;
    float y[16];
    for (int r = r0; r < r1; r += R) {
        int nr = r1 - r < R ? r1 - r : R;
        for (int j = j0; j < j0 + nj; j++) {
            const int8_t *q = a->q + (size_t)j * a->cols_pad;
            const float *xs = a->xs + (size_t)j * a->nblk;
            const int32_t *qs = a->qsum + (size_t)j * a->nblk;
            if (G) matvec_tile8(W, r, nr, q, xs, qs, y, G);
            else if (INT4) matvec_tile16(W, r, nr, q, xs, qs, y, 1, 0);
            else if (inrow) matvec_tile16(W, r, nr, q, xs, qs, y, 0, 1);
            else matvec_tile16(W, r, nr, q, xs, qs, y, 0, 0);
            memcpy(Y + (size_t)j * W->rows + r, y, (size_t)nr * sizeof(float));
        }
    }
}

/* Prefill (slice): the row block's weights go once into a panel of
 * unsigned bytes in VPDPBUSD's operand order, 16 rows per vector: for row
 * group t (16 rows) and 4-column step s of the row (nb * 8 steps), 64 bytes
 * hold row i's columns 4s .. 4s+3 at 4i. One VPDPBUSD of such a vector with
 * one activation's 4 bytes broadcast adds those columns to 16 rows' block
 * sums, one row per lane, so a block's sums build up in a register with no
 * reduction and the chain's f32 step comes once per 8 products. Each block
 * sum starts at minus the offset times the activation block's integer sum
 * (the weights are unsigned, as in the matvec), so it ends exact. A tile is
 * SLICE_RG row groups x SLICE_NJ activations: 12 block sums and 12 chains
 * in registers, 3 weight vectors and 4 broadcasts per 12 products. */
#define SLICE_RG 3
#define SLICE_NJ 4
static_assert(SLICE_RG * 16 >= 48, "a slice call's rows fit the panel's row groups");

/* Packing reads 16 rows side by side, from memory for a prefill; a
 * prefetch this many bytes ahead in each row took the prefill (Zen 5,
 * 1 thread, 3 rounds interleaved) of 2048 x 7168 at n = 16 from 188-237 to
 * 333-389 GFLOP/s (q4g64) and 185-195 to 392-416 (q8), at n = 256 on
 * 4096 rows from 531-537 to 578-583 (q4g64); 1024 ahead did less, the
 * current line (a prefetch before the load) half as much. */
#define PACK_AHEAD 512

/* One row group of the panel: rows [r, r + n), n <= 16, rows past n zero,
 * as unsigned bytes (nibble = q + 8, q8 byte ^ 0x80 = q + 128) into
 * dst[ns][64], 64 columns (16 steps) at a time. */
INLINE void pack_row_group(const struct qtensor *W, int r, int n, uint8_t *dst, int ns, int INT4)
{
    const int cols = W->cols;
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    const uint8_t *rp = n > 0 ? row_ptr(W, r) : NULL;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    for (int m = 0; 16 * m < ns; m++) {
        __m512i V[16], T[16];
        /* the bytes this chunk reads in each row: 64 (q8) or, every other
         * chunk, the 64 of a 128-column int4 block */
        const size_t off = INT4 ? 64 * (size_t)(m / 2) : 64 * (size_t)m;
        for (int i = 0; i < 16; i++) {
            if (i >= n) {
                V[i] = _mm512_setzero_si512();
                continue;
            }
            const uint8_t *p = rp + (size_t)i * rb + off;
            if (!INT4 || m % 2 == 0) _mm_prefetch((const char *)p + PACK_AHEAD, _MM_HINT_T0);
            if (INT4) {      /* low nibbles, then high */
                __m512i v = _mm512_loadu_si512(p);
                V[i] = _mm512_and_si512(m % 2 ? _mm512_srli_epi16(v, 4) : v, m4);
            } else {
                int left = cols - 64 * m;
                __mmask64 mk = left >= 64 ? ~0ull : (1ull << left) - 1;
                V[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, p), flip);
            }
        }
        quant_transpose16x16_epi32(V, T);
        for (int s = 0; s < 16 && 16 * m + s < ns; s++)
            _mm512_store_si512(dst + (size_t)(16 * m + s) * 64, T[s]);
    }
}

static inline int32_t load_i32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Rows [r0, r1) (at most quant_slice_rows) x activations [j0, j0 + nj).
 * Scratch: the panel [SLICE_RG][ns][64], then the weight scales per row
 * group, [SLICE_RG][ng][16] (group formats) or [SLICE_RG][16], in lanes.
 * Activations past the end of a tile repeat the last one (computed, not
 * stored). */
INLINE void slice_int8(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                       int j0, int nj, float *Y, void *scratch, int INT4, int G)
{
    const int cols = W->cols, nb = (cols + 31) / 32, ns = nb * 8, nr = r1 - r0;
    const int ng = G ? (cols + G - 1) / G : 1, ofs = INT4 ? 8 : 128;
    uint8_t *panel = scratch;
    float *sp = (float *)(panel + (size_t)SLICE_RG * ns * 64);
    assert(nr <= 16 * SLICE_RG && nr <= quant_slice_rows(cols));
    assert((size_t)SLICE_RG * ns * 64 + (size_t)SLICE_RG * ng * 16 * sizeof(float) <=
           quant_slice_scratch_bytes(cols));
    for (int t = 0; t < SLICE_RG; t++) {
        int n = nr - 16 * t;
        n = n < 0 ? 0 : n > 16 ? 16 : n;
        pack_row_group(W, r0 + 16 * t, n, panel + (size_t)t * ns * 64, ns, INT4);
        for (int g = 0; g < ng; g++)
            for (int i = 0; i < 16; i++)
                sp[((size_t)t * ng + g) * 16 + i] = i >= n ? 0.0f : W->scales[(size_t)(r0 + 16 * t + i) * (G ? ng : 1) + g];
    }
    for (int j = j0; j < j0 + nj; j += SLICE_NJ) {
        const int8_t *q[SLICE_NJ];
        const float *xs[SLICE_NJ];
        const int32_t *qs[SLICE_NJ];
        UNROLL
        for (int u = 0; u < SLICE_NJ; u++) {
            int ju = j + u < j0 + nj ? j + u : j0 + nj - 1;
            q[u] = a->q + (size_t)ju * a->cols_pad;
            xs[u] = a->xs + (size_t)ju * a->nblk;
            qs[u] = a->qsum + (size_t)ju * a->nblk;
        }
        __m512 F[SLICE_RG][SLICE_NJ];
        UNROLL
        for (int t = 0; t < SLICE_RG; t++)
            UNROLL
            for (int u = 0; u < SLICE_NJ; u++) F[t][u] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            __m512i I[SLICE_RG][SLICE_NJ];
            UNROLL
            for (int u = 0; u < SLICE_NJ; u++) {
                __m512i init = _mm512_set1_epi32(-ofs * qs[u][b]);
                UNROLL
                for (int t = 0; t < SLICE_RG; t++) I[t][u] = init;
            }
            const uint8_t *pb = panel + (size_t)b * 8 * 64;
            UNROLL
            for (int s = 0; s < 8; s++) {
                __m512i w[SLICE_RG];
                UNROLL
                for (int t = 0; t < SLICE_RG; t++) w[t] = _mm512_load_si512(pb + ((size_t)t * ns + s) * 64);
                UNROLL
                for (int u = 0; u < SLICE_NJ; u++) {
                    __m512i qb = _mm512_set1_epi32(load_i32(q[u] + 32 * (size_t)b + 4 * s));
                    UNROLL
                    for (int t = 0; t < SLICE_RG; t++) I[t][u] = _mm512_dpbusd_epi32(I[t][u], w[t], qb);
                }
            }
            const int gb = G ? quant_int8_group_of(b, G) : 0;
            UNROLL
            for (int u = 0; u < SLICE_NJ; u++) {
                __m512 xv = _mm512_set1_ps(xs[u][b]);
                UNROLL
                for (int t = 0; t < SLICE_RG; t++) {
                    __m512 f = G ? _mm512_mul_ps(_mm512_load_ps(sp + ((size_t)t * ng + gb) * 16), xv) : xv;
                    F[t][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[t][u]), f, F[t][u]);
                }
            }
        }
        UNROLL
        for (int u = 0; u < SLICE_NJ; u++) {
            if (j + u >= j0 + nj) break;
            UNROLL
            for (int t = 0; t < SLICE_RG; t++) {
                int n = nr - 16 * t;
                if (n <= 0) break;
                __mmask16 live = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
                __m512 y = G ? F[t][u] : _mm512_mul_ps(_mm512_load_ps(sp + (size_t)t * 16), F[t][u]);
                _mm512_mask_storeu_ps(Y + (size_t)(j + u) * W->rows + r0 + 16 * t, live, y);
            }
        }
    }
}

#define INT8_KERNEL(name, INT4, G)                                                         \
    void quant_int8_rows_##name(const struct qtensor *W, int r0, int r1,                   \
                                const struct quant_act *a, int j0, int nj, float *Y)       \
    {                                                                                      \
        rows_int8(W, r0, r1, a, j0, nj, Y, INT4, G);                                       \
    }                                                                                      \
    void quant_int8_slice_##name(const struct qtensor *W, int r0, int r1,                  \
                                 const struct quant_act *a, int j0, int nj, float *Y,      \
                                 void *scratch)                                            \
    {                                                                                      \
        slice_int8(W, r0, r1, a, j0, nj, Y, scratch, INT4, G);                             \
    }
INT8_KERNEL(q8, 0, 0)
INT8_KERNEL(q4, 1, 0)
INT8_KERNEL(q4g32, 1, 32)
INT8_KERNEL(q4g64, 1, 64)
INT8_KERNEL(q4g128, 1, 128)
