/* quant/kernels_amx_avx512.c - the AMX level: q8 / q4 / q4gG products on
 * AMX-INT8 tiles (TDPBSSD). Float formats and fp8b use the AVX-512 kernels.
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
 * chain (one output per vector lane: 16 rows in matvec, 16 activations in
 * prefill), so a batched column equals the matvec bit for bit.
 *
 * Tiles: A = 16 weight rows x 32 columns (one activation block), signed
 * bytes; B = 8 rows of 4-byte groups x N activations (the activations' bytes
 * in groups of 4, which for one activation is just its contiguous bytes);
 * C = 16 rows x N int32. Matvec: N = 1, A straight from the weights (q8) or
 * from nibbles unpacked into a small buffer (int4). Prefill (slice): the
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

/* The configurations, tiles 0-2 and 3-5 alike (A, B, C). Matvec: A 16 rows
 * x 64 bytes (two blocks), B 16 rows x 8 bytes (a block pair,
 * quant_act.qp), C 16 rows x 2 int32, and two more C tiles (6, 7) so four
 * chunks are in flight. Prefill: A 16 rows x 32 bytes (one block), B 8 rows
 * x 64 bytes (16 activations, quant_act.qt), C 16 rows x 16 int32. Static:
 * GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes, so
 * stores into a local configuration could be dropped as dead. */
static const struct tile_cfg tile_cfg_matvec __attribute__((aligned(64))) = {
    .palette = 1, .colsb = { 64, 8, 8, 64, 8, 8, 8, 8 }, .rows = { 16, 16, 16, 16, 16, 16, 16, 16 } };
static const struct tile_cfg tile_cfg_prefill __attribute__((aligned(64))) = {
    .palette = 1, .colsb = { 32, 64, 64, 32, 64, 64 }, .rows = { 16, 8, 16, 16, 8, 16 } };

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

/* Matvec columns per unpacked int4 chunk: the tile loads read nibbles
 * unpacked a while before (a tile load right after the vector stores that
 * wrote its bytes waits for them). 16 rows x 1024 bytes fit L1. */
#define MV_CHUNK 1024

/* The A tile of 64-column chunk k for rows [r, r + nr): in the weights (q8,
 * a whole tile), else copied into buf zero-padded. */
INLINE const int8_t *q8_chunk(const struct qtensor *W, int r, int nr, int k, size_t rb, int8_t *buf,
                              size_t *stride)
{
    const int cols = W->cols;
    if (nr == 16 && 64 * (k + 1) <= cols) {
        *stride = rb;
        return (const int8_t *)row_ptr(W, r) + 64 * (size_t)k;
    }
    int n = cols - 64 * k < 64 ? cols - 64 * k : 64;
    memset(buf, 0, 16 * 64);
    for (int i = 0; i < nr; i++) memcpy(buf + 64 * i, row_ptr(W, r + i) + 64 * (size_t)k, (size_t)n);
    *stride = 64;
    return buf;
}

/* One block's f32 step for the 16 rows: acc = fma(float(isum), scale, acc);
 * sg holds the group scales of the chunk's groups from g0 on. */
INLINE __m512 mv_step(__m512 acc, __m512i isum, const float *xs, const float *sg, int g0, int b, int G)
{
    __m512 f = _mm512_set1_ps(xs[b]);
    if (G) f = _mm512_mul_ps(_mm512_load_ps(sg + 16 * (size_t)(group_of(b, G) - g0)), f);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), f, acc);
}

/* The two blocks of a stored C tile (16 rows x 2 int32) as two vectors of
 * the 16 rows, then their steps in block order (the second only when block
 * b + 1 holds a column). */
INLINE __m512 mv_pair(__m512 acc, const int32_t *c, const float *xs, const float *sg, int g0, int b,
                      int nb, int G)
{
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i v0 = _mm512_load_si512(c), v1 = _mm512_load_si512(c + 16);
    acc = mv_step(acc, _mm512_permutex2var_epi32(v0, ev, v1), xs, sg, g0, b, G);
    if (b + 1 < nb) acc = mv_step(acc, _mm512_permutex2var_epi32(v0, od, v1), xs, sg, g0, b + 1, G);
    return acc;
}

/* One activation (qp: its bytes in pair order, xs) times rows [r, r + nr),
 * nr <= 16, into y[nr]: one tile product per 64 columns (two blocks, the
 * pair order keeps their sums apart), chunks alternating between the two
 * tile sets so one chunk's product overlaps the other's store. */
INLINE void matvec_tile(const struct qtensor *W, int r, int nr, const int8_t *qp, const float *xs,
                        float *y, int INT4, int G)
{
    const int cols = W->cols, nb = (cols + 31) / 32, nk = (cols + 63) / 64;
    const int ng = G ? (cols + G - 1) / G : 1;
    const size_t rb = quant_fmt_row_bytes(W->fmt, cols);
    int8_t ubuf[16 * MV_CHUNK] __attribute__((aligned(64)));
    int8_t tbuf[4][16 * 64] __attribute__((aligned(64)));
    int32_t cbuf[4][32] __attribute__((aligned(64)));
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    const float *s = G ? W->scales + (size_t)r * ng : W->scales + r;
    /* the chunk's group scales, transposed: lane i of group g at
     * sg[16 (g - g0) + i] = s[i * ng + g] */
    float sg[16 * (MV_CHUNK / 32)] __attribute__((aligned(64)));
    const __m512i sidx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(ng));
    __m512 acc = _mm512_setzero_ps();
    for (int c0 = 0; c0 < nk * 64; c0 += MV_CHUNK) {
        const int k0 = c0 / 64, k1 = nk < k0 + MV_CHUNK / 64 ? nk : k0 + MV_CHUNK / 64;
        const int g0 = G ? group_of(2 * k0, G) : 0;
        for (int g = g0; G && g <= group_of((nb < 2 * k1 ? nb : 2 * k1) - 1, G); g++)
            _mm512_store_ps(sg + 16 * (size_t)(g - g0),
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live,
                                                     _mm512_add_epi32(sidx, _mm512_set1_epi32(g)), s, 4));
        /* int4: chunk k's 16 x 64 bytes at ubuf + 1024 (k - k0), contiguous */
        if (INT4)
            for (int k = c0 / 128; k < (64 * k1 + 127) / 128; k++)
                unpack_int4_block(W, r, nr, k, ubuf + 1024 * (2 * k - k0), ubuf + 1024 * (2 * k + 1 - k0), 64);
        for (int k = k0; k < k1; k += 4) {
            const int m = k1 - k < 4 ? k1 - k : 4;
            const int8_t *ap[4];
            size_t st[4];
            for (int u = 0; u < m; u++) {
                if (INT4) ap[u] = ubuf + 1024 * (size_t)(k + u - k0), st[u] = 64;
                else ap[u] = q8_chunk(W, r, nr, k + u, rb, tbuf[u], &st[u]);
            }
            /* four chunks in flight: A / B reloaded once their product read them */
            _tile_loadd(TA, ap[0], st[0]);
            _tile_loadd(TB, qp + 128 * (size_t)k, 8);
            _tile_zero(TC);
            _tile_dpbssd(TC, TA, TB);
            if (m > 1) {
                _tile_loadd(TA2, ap[1], st[1]);
                _tile_loadd(TB2, qp + 128 * (size_t)(k + 1), 8);
                _tile_zero(TC2);
                _tile_dpbssd(TC2, TA2, TB2);
            }
            if (m > 2) {
                _tile_loadd(TA, ap[2], st[2]);
                _tile_loadd(TB, qp + 128 * (size_t)(k + 2), 8);
                _tile_zero(TC3);
                _tile_dpbssd(TC3, TA, TB);
            }
            if (m > 3) {
                _tile_loadd(TA2, ap[3], st[3]);
                _tile_loadd(TB2, qp + 128 * (size_t)(k + 3), 8);
                _tile_zero(TC4);
                _tile_dpbssd(TC4, TA2, TB2);
            }
            _tile_stored(TC, cbuf[0], 8);
            if (m > 1) _tile_stored(TC2, cbuf[1], 8);
            if (m > 2) _tile_stored(TC3, cbuf[2], 8);
            if (m > 3) _tile_stored(TC4, cbuf[3], 8);
            for (int u = 0; u < m; u++) acc = mv_pair(acc, cbuf[u], xs, sg, g0, 2 * (k + u), nb, G);
        }
    }
    if (!G) acc = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, s), acc);
    _mm512_mask_storeu_ps(y, live, acc);
}

INLINE void rows_amx(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                     int j0, int nj, float *Y, int INT4, int G)
{
    float y[16];
    _tile_loadconfig(&tile_cfg_matvec);
    for (int r = r0; r < r1; r += 16) {
        int nr = r1 - r < 16 ? r1 - r : 16;
        for (int j = j0; j < j0 + nj; j++) {
            matvec_tile(W, r, nr, a->qp + (size_t)j * 2 * a->cols_pad, a->xs + (size_t)j * a->nblk, y, INT4, G);
            memcpy(Y + (size_t)j * W->rows + r, y, (size_t)nr * sizeof(float));
        }
    }
    _tile_release();
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
    int32_t *cbuf = (int32_t *)(out + 256);
    assert(j0 % QUANT_TILE_NJ == 0 && a->qt && nr <= quant_slice_rows(cols));
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
            for (int b = 0; b < nb; b++) {
                _tile_loadd(TA, pt + 32 * (size_t)b, cp);
                _tile_loadd(TB, qt + 512 * (size_t)b, 64);
                _tile_zero(TC);
                _tile_dpbssd(TC, TA, TB);
                _tile_stored(TC, cbuf, 64);
                const __m512 xv = _mm512_load_ps(xst + 16 * (size_t)b);
                const int gb = G ? group_of(b, G) : 0;
                UNROLL
                for (int i = 0; i < 16; i++) {
                    __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(cbuf + 16 * i));
                    __m512 f = G ? _mm512_mul_ps(_mm512_set1_ps(i < n ? s[(size_t)i * ng + gb] : 0.0f), xv) : xv;
                    acc[i] = _mm512_fmadd_ps(v, f, acc[i]);
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
