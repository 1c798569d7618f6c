/* quant/kernels_amx_avx512.c - the AMX level: q8 / q4 / q4gG prefill on
 * AMX-INT8 tiles (TDPBSSD), and a matvec with the same numerics on
 * VPDPBUSD. Other formats use the AVX-512 kernels (see AMX_ENTRY).
 *
 * Numerics of this level (its own, not those of the VPDPBUSD kernels): the
 * weights are taken as signed int8 (q8 bytes as stored, int4 nibbles minus
 * 8), multiplied by the int8 activations of each 32-column block exactly in
 * int32 (no offset to take out), and each output is one f32 chain over the
 * blocks b = 0, 1, .. of the row (up to the last block holding a column):
 *     q8, q4   y = s_row * (.. fma(float(isum_1), xs_1, fma(float(isum_0), xs_0, 0)))
 *     q4gG     y = .. fma(float(isum_1), s_g(1) * xs_1, fma(float(isum_0), s_g(0) * xs_0, 0))
 * with isum_b the block's exact dot product, xs_b its activation scale and
 * s_g(b) the weight group scale covering it. Matvec and prefill run that same
 * chain (one output per vector lane: 16 rows (q8, q4) or 8 (q4gG) in
 * matvec, 16 activations in prefill), so a batched column equals the matvec
 * bit for bit.
 *
 * Tiles: A = 16 weight rows x 32 columns (one activation block), signed
 * bytes; B = 8 rows of 4-byte groups x N activations (the activations' bytes
 * in groups of 4, which for one activation is just its contiguous bytes);
 * C = 16 rows x N int32. Only prefill runs on tiles (the matvec, below,
 * reads the weights faster on VPDPBUSD). Prefill (slice): the
 * row block's weights are unpacked once into a signed panel in the scratch,
 * N = 16 activations whose bytes and scales the driver packed once per call
 * (quant_act_tile16). Each block's C tile goes through memory into vectors
 * (store, load, convert, multiply-add): the per-block f32 step is what keeps
 * the chain above.
 *
 * The tile configuration is per thread: every kernel call loads its own and
 * releases the tiles before returning.
 */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "quant/kernels.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

static_assert(QUANT_ACT_BLOCK == 32, "a tile's K is one activation block");
static_assert(QUANT_TILE_NJ == 16, "a B tile holds 16 activations");

/* LDTILECFG's 64-byte operand (palette 1). */
struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static_assert(sizeof(struct tile_cfg) == 64, "LDTILECFG reads 64 bytes");

/* Tile numbers: macros, as the intrinsics paste them into the instruction. */
#define TA 0
#define TB 1
#define TC 2
#define TA2 3
#define TB2 4
#define TC2 5
#define TC3 6
#define TC4 7

/* The prefill configuration, tiles 0-2 and 3-5 alike: A 16 rows x 32 bytes
 * (one block of 16 weight rows), B 8 rows x 64 bytes (16 activations,
 * quant_act.qt), C 16 rows x 16 int32; tiles 6-7 two more C tiles. Static:
 * GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes, so
 * stores into a local configuration could be dropped as dead. */
static const struct tile_cfg tile_cfg_prefill __attribute__((aligned(64))) = {
    .palette = 1, .colsb = { 32, 64, 64, 32, 64, 64, 64, 64 }, .rows = { 16, 8, 16, 16, 8, 16, 16, 16 } };

static const uint8_t *row_ptr(const struct qtensor *W, int r)
{
    return (const uint8_t *)W->data + (size_t)r * quant_fmt_row_bytes(W->fmt, W->cols);
}

/* Unpacks 128-column int4 block k of rows [r, r + nr) into signed bytes:
 * element c < 64 of row i at lo[i * ostride + c], element 64 + c at
 * hi[i * ostride + c]; rows past nr are zero. */
INLINE void unpack_int4_block(const struct qtensor *W, int r, int nr, int k, int8_t *lo, int8_t *hi,
                              size_t ostride)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    for (int i = 0; i < nr; i++) {
        __m512i v = _mm512_loadu_si512(row_ptr(W, r + i) + 64 * (size_t)k);
        _mm512_storeu_si512(lo + ostride * i, _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
        _mm512_storeu_si512(hi + ostride * i,
                            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
    }
    for (int i = nr; i < 16; i++) {
        _mm512_storeu_si512(lo + ostride * i, _mm512_setzero_si512());
        _mm512_storeu_si512(hi + ostride * i, _mm512_setzero_si512());
    }
}

/* The group scale index of 32-column block b. */
static inline int group_of(int b, int G)
{
    return G == 32 ? b : G == 64 ? b / 2 : b / 4;
}

/* Matvec: the same block sums from VPDPBUSD, whose lanes each sum 4
 * columns: a vector of one row holds two blocks (lanes 0-7, 8-15), and a
 * tree of unpacks and adds (reduce16) turns 16 such vectors into two
 * vectors of block sums, one lane per input vector. The weights are
 * unsigned (nibble = q + 8, q8 byte ^ 0x80 = q + 128), so the offset times
 * the activation block's integer sum comes off each sum, exactly. (A tile
 * matvec, A = 16 rows of weights and B one activation, read int4 weights at
 * 13 GB/s in cache against this kernel's ~30: each tile load and store
 * costs about a cycle per row, for 16 x 64 useful bytes.)
 * Row-scale formats (q8, q4) take 16 rows per pass, one row per lane; the
 * group formats 8 rows per pass, one row per lane of a 256-bit chain, with
 * 8 groups' scales per window (bench/amx-decode-results.md: streamed,
 * q4g32 / q4g64 ran 16.7 / 16.4 GB/s that way against 15.4 / 15.6 in
 * 16-row passes; q4 15.1 against 16.2). */
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
 * 13.8-14.8 a tile ahead. */
#define MV_Q8_PREFETCH 512

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
 * lane j holds row j's chain. */
INLINE void matvec_tile16(const struct qtensor *W, int r, int nr, const int8_t *q, const float *xs,
                          const int32_t *qs, float *y, int INT4)
{
    const int cols = W->cols, nb = (cols + 31) / 32, nk = (cols + 127) / 128;
    const int ofs = INT4 ? 8 : 128;
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    /* int4: the next pass's 16 rows in address order, 16 lines a step */
    const uint8_t *next = r + 32 <= W->rows ? row_ptr(W, r + 16) : NULL;
    const uint8_t *p[16];
    int use[16];
    for (int j = 0; j < 16; j++) {
        use[j] = j < nr;
        p[j] = row_ptr(W, r + (use[j] ? j : 0));
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
                u = _mm512_and_si512(_mm512_loadu_si512(p[j] + 64 * (size_t)k), m4);
            } else {
                _mm_prefetch((const char *)p[j] + 128 * (size_t)k + MV_Q8_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)p[j] + 128 * (size_t)k + MV_Q8_PREFETCH + 64, _MM_HINT_T0);
                u = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mlo, p[j] + 128 * (size_t)k), flip);
            }
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
    const uint8_t *next = ahead ? row_ptr(W, r + 8) : NULL;
    const char *snext = ahead ? (const char *)(s + 8 * (size_t)ng) : NULL;
    const uint8_t *p[8];
    int use[8];
    for (int e = 0; e < 8; e++) {
        use[e] = lane_row8(e) < nr;
        p[e] = row_ptr(W, r + (use[e] ? lane_row8(e) : 0));
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
            const int b = 4 * k + t, g = group_of(b, G);
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

INLINE void rows_amx(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                     int j0, int nj, float *Y, int INT4, int G)
{
    const int R = G ? 8 : 16;
    float y[16];
    for (int r = r0; r < r1; r += R) {
        int nr = r1 - r < R ? r1 - r : R;
        for (int j = j0; j < j0 + nj; j++) {
            const int8_t *q = a->q + (size_t)j * a->cols_pad;
            const float *xs = a->xs + (size_t)j * a->nblk;
            const int32_t *qs = a->qsum + (size_t)j * a->nblk;
            if (G) matvec_tile8(W, r, nr, q, xs, qs, y, G);
            else matvec_tile16(W, r, nr, q, xs, qs, y, INT4);
            memcpy(Y + (size_t)j * W->rows + r, y, (size_t)nr * sizeof(float));
        }
    }
}

/* The products of blocks b and b + 1 (if < nb) of a 16-row panel tile
 * (pt, row stride cp) with a packed activation group (qt) into the C tiles
 * of `set` (0: TC, TC2; 1: TC3, TC4), and their stores into cb, cb + 256.
 * Two sets, so a pair's products need not wait for the previous pair's
 * stores (a tile store waits for its product; one set made every pair a
 * chain of product and store latencies: 480 against 650+ GFLOP/s). */
INLINE void amx_pair_issue(const int8_t *pt, int cp, const int8_t *qt, int b, int nb, int set)
{
    const int two = b + 1 < nb;
    _tile_loadd(TA, pt + 32 * (size_t)b, cp);
    _tile_loadd(TB, qt + 512 * (size_t)b, 64);
    if (two) {
        _tile_loadd(TA2, pt + 32 * (size_t)(b + 1), cp);
        _tile_loadd(TB2, qt + 512 * (size_t)(b + 1), 64);
    }
    if (set == 0) {
        _tile_zero(TC);
        _tile_dpbssd(TC, TA, TB);
        if (two) {
            _tile_zero(TC2);
            _tile_dpbssd(TC2, TA2, TB2);
        }
    } else {
        _tile_zero(TC3);
        _tile_dpbssd(TC3, TA, TB);
        if (two) {
            _tile_zero(TC4);
            _tile_dpbssd(TC4, TA2, TB2);
        }
    }
}

INLINE void amx_pair_store(int32_t *cb, int b, int nb, int set)
{
    if (set == 0) {
        _tile_stored(TC, cb, 64);
        if (b + 1 < nb) _tile_stored(TC2, cb + 256, 64);
    } else {
        _tile_stored(TC3, cb, 64);
        if (b + 1 < nb) _tile_stored(TC4, cb + 256, 64);
    }
}

/* Prefill: rows [r0, r1) (at most quant_slice_rows) x activations
 * [j0, j0 + nj), j0 a multiple of QUANT_TILE_NJ. The rows' weights are
 * unpacked once into the signed panel [rows rounded to 16][nb * 32]. */
INLINE void slice_amx(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                      int j0, int nj, float *Y, void *scratch, int INT4, int G)
{
    const int cols = W->cols, nb = (cols + 31) / 32, cp = nb * 32;
    const int ng = G ? (cols + G - 1) / G : 1, nr = r1 - r0, nt = (nr + 15) / 16;
    int8_t *panel = scratch;
    float *out = (float *)(panel + (size_t)nt * 16 * cp);     /* [16 rows][16 activations] */
    int32_t *cbuf = (int32_t *)(out + 256);                   /* two C tiles */
    assert(j0 % QUANT_TILE_NJ == 0 && a->qt && nr <= quant_slice_rows(cols));
    assert((size_t)nt * 16 * cp + 256 * sizeof(float) + 512 * sizeof(int32_t) <= quant_slice_scratch_bytes(cols));
    for (int t = 0; t < nt; t++) {
        int tr = t * 16, n = nr - tr < 16 ? nr - tr : 16;
        int8_t *pt = panel + (size_t)tr * cp;
        if (INT4) {
            int8_t ub[16 * 128] __attribute__((aligned(64)));
            for (int k = 0; k < cp / 128 + (cp % 128 != 0); k++) {
                unpack_int4_block(W, r0 + tr, n, k, ub, ub + 64, 128);
                int w = cp - 128 * k < 128 ? cp - 128 * k : 128;
                for (int i = 0; i < 16; i++) memcpy(pt + (size_t)i * cp + 128 * k, ub + 128 * i, (size_t)w);
            }
        } else {
            for (int i = 0; i < 16; i++) {
                int8_t *d = pt + (size_t)i * cp;
                if (i < n) {
                    memcpy(d, row_ptr(W, r0 + tr + i), (size_t)cols);
                    memset(d + cols, 0, (size_t)(cp - cols));
                } else {
                    memset(d, 0, (size_t)cp);
                }
            }
        }
    }
    _tile_loadconfig(&tile_cfg_prefill);
    for (int j = j0; j < j0 + nj; j += QUANT_TILE_NJ) {
        const int g = j / QUANT_TILE_NJ, nact = j0 + nj - j < 16 ? j0 + nj - j : 16;
        const int8_t *qt = a->qt + (size_t)g * a->nblk * 512;
        const float *xst = a->xst + (size_t)g * a->nblk * 16;
        for (int t = 0; t < nt; t++) {
            const int tr = t * 16, n = nr - tr < 16 ? nr - tr : 16;
            const int8_t *pt = panel + (size_t)tr * cp;
            const float *s = G ? W->scales + (size_t)(r0 + tr) * ng : W->scales + r0 + tr;
            __m512 acc[16];
            UNROLL
            for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
            /* blocks in pairs, alternating between the two C tile sets:
             * pair p + 1's products are issued before pair p is stored and
             * its f32 steps run (in block order) */
            amx_pair_issue(pt, cp, qt, 0, nb, 0);
            for (int b = 0; b < nb; b += 2) {
                const int set = b / 2 % 2;
                if (b + 2 < nb) amx_pair_issue(pt, cp, qt, b + 2, nb, !set);
                amx_pair_store(cbuf, b, nb, set);
                for (int h = 0; h < 2 && b + h < nb; h++) {
                    const __m512 xv = _mm512_load_ps(xst + 16 * (size_t)(b + h));
                    const int gb = G ? group_of(b + h, G) : 0;
                    UNROLL
                    for (int i = 0; i < 16; i++) {
                        __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(cbuf + 256 * h + 16 * i));
                        __m512 f = G ? _mm512_mul_ps(_mm512_set1_ps(i < n ? s[(size_t)i * ng + gb] : 0.0f), xv) : xv;
                        acc[i] = _mm512_fmadd_ps(v, f, acc[i]);
                    }
                }
            }
            UNROLL
            for (int i = 0; i < 16; i++) {
                if (!G) acc[i] = _mm512_mul_ps(_mm512_set1_ps(i < n ? s[i] : 0.0f), acc[i]);
                _mm512_store_ps(out + 16 * i, acc[i]);
            }
            for (int u = 0; u < nact; u++)
                for (int i = 0; i < n; i++) Y[(size_t)(j + u) * W->rows + r0 + tr + i] = out[16 * i + u];
        }
    }
    _tile_release();
}

#define AMX_KERNEL(name, INT4, G)                                                          \
    static void rows_##name(const struct qtensor *W, int r0, int r1,                       \
                            const struct quant_act *a, int j0, int nj, float *Y)           \
    {                                                                                      \
        rows_amx(W, r0, r1, a, j0, nj, Y, INT4, G);                                        \
    }                                                                                      \
    static void slice_##name(const struct qtensor *W, int r0, int r1,                      \
                             const struct quant_act *a, int j0, int nj, float *Y,          \
                             void *scratch)                                                \
    {                                                                                      \
        slice_amx(W, r0, r1, a, j0, nj, Y, scratch, INT4, G);                              \
    }
AMX_KERNEL(q8, 0, 0)
AMX_KERNEL(q4, 1, 0)
AMX_KERNEL(q4g32, 1, 32)
AMX_KERNEL(q4g64, 1, 64)
AMX_KERNEL(q4g128, 1, 128)

/* Every int8-activation format. The group formats joined once their matvec
 * (8-row passes, prefetch in address order) streamed at least as fast as
 * the AVX-512 level's 4-row kernel: 65536 x 7168, 1 thread, medians of 10
 * rounds interleaved, q4g32 16.0 GB/s against 14.4, q4g64 15.6 against
 * 15.1 (read probe 15.9); before that (16-row passes, a prefetch stream per
 * row) 12.7 and 14.4, so they had kept the AVX-512 kernels. Prefill n = 512
 * on 2048 x 7168: q4g32 474, q4g64 456 GFLOP/s against 137 and 138
 * (bench/amx-decode-results.md). */
#define AMX_ENTRY(name) { .rows = rows_##name, .act_int8 = 1, .slice = slice_##name, .act_tile16 = 1 }
const struct quant_isa_table quant_isa_amx = {
    .k = {
        [QUANT_Q8] = AMX_ENTRY(q8),
        [QUANT_Q4] = AMX_ENTRY(q4),
        [QUANT_Q4G32] = AMX_ENTRY(q4g32),
        [QUANT_Q4G64] = AMX_ENTRY(q4g64),
        [QUANT_Q4G128] = AMX_ENTRY(q4g128),
    },
};
