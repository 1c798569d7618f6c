/* quant/kernels_amx_avx512.c - the AMX level: q8 / q4 / q4gG prefill on
 * AMX-INT8 tiles (TDPBSSD) with the block-exact numerics of kernels_int8.h,
 * whose VPDPBUSD matvec it takes (so a batched column equals the matvec bit
 * for bit, and this level's bits are the avx512 level's). Other formats use
 * the AVX-512 kernels.
 *
 * Tiles: A = 16 weight rows x 32 columns (one activation block), signed
 * bytes (q8 bytes as stored, int4 nibbles minus 8); B = 8 rows of 4-byte
 * groups x N activations (the activations' bytes in groups of 4, which for
 * one activation is just its contiguous bytes); C = 16 rows x N int32, the
 * exact block sums. Only prefill runs on tiles (the VPDPBUSD matvec reads
 * the weights faster: a tile matvec, A = 16 rows of weights and B one
 * activation, read int4 weights at 13 GB/s in cache against its ~30, each
 * tile load and store costing about a cycle per row for 16 x 64 useful
 * bytes). Prefill (slice): the row block's int4 weights are unpacked once
 * into a signed panel in the scratch (q8 tiles of 16 whole rows load
 * straight from the weights), N = 16 activations whose bytes and scales
 * the driver packed once per call (quant_act_tile16). Each block's C tile
 * goes through memory into vectors (store, load, convert, multiply-add):
 * the per-block f32 step is what keeps the chain.
 *
 * The tile configuration is per thread: every kernel call loads its own and
 * releases the tiles before returning.
 */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "quant/kernels_int8.h"

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
    const size_t rbytes = quant_fmt_row_bytes(W->fmt, W->cols);
    const uint8_t *src = row_ptr(W, r) + 64 * (size_t)k;
    for (int i = 0; i < nr; i++) {
        __m512i v = _mm512_loadu_si512(src + rbytes * i);
        _mm512_storeu_si512(lo + ostride * i, _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
        _mm512_storeu_si512(hi + ostride * i,
                            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
    }
    for (int i = nr; i < 16; i++) {
        _mm512_storeu_si512(lo + ostride * i, _mm512_setzero_si512());
        _mm512_storeu_si512(hi + ostride * i, _mm512_setzero_si512());
    }
}


/* The products of blocks b and b + 1 (if < nb) of a 16-row panel tile
 * (pt, row stride cp) with a packed activation group (qt) into the C tiles
 * of `set` (0: TC, TC2; 1: TC3, TC4), and their stores into cb, cb + 256.
 * Two sets, so a pair's products need not wait for the previous pair's
 * stores (a tile store waits for its product; one set made every pair a
 * chain of product and store latencies: 480 against 650+ GFLOP/s). */
INLINE void amx_pair_issue(const int8_t *pt, size_t cp, const int8_t *qt, int b, int nb, int set)
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
    /* q8 rows are the A tiles' signed bytes already: whole 16-row tiles of
     * whole blocks load straight from the weights (row stride apart), which
     * spares the panel copy (a third of the time at 48 activations) */
    const int q8_direct = !INT4 && nr % 16 == 0 && cols % 32 == 0;
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
                int w = cp - 128 * k < 128 ? cp - 128 * k : 128;
                if (w == 128) {         /* whole blocks go straight into the panel */
                    unpack_int4_block(W, r0 + tr, n, k, pt + 128 * k, pt + 128 * k + 64, (size_t)cp);
                    continue;
                }
                unpack_int4_block(W, r0 + tr, n, k, ub, ub + 64, 128);
                for (int i = 0; i < 16; i++) memcpy(pt + (size_t)i * cp + 128 * k, ub + 128 * i, (size_t)w);
            }
        } else if (!q8_direct) {
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
            const int8_t *pt = q8_direct ? (const int8_t *)row_ptr(W, r0 + tr) : panel + (size_t)tr * cp;
            const size_t pstride = q8_direct ? quant_fmt_row_bytes(W->fmt, cols) : (size_t)cp;
            const float *s = G ? W->scales + (size_t)(r0 + tr) * ng : W->scales + r0 + tr;
            __m512 acc[16];
            UNROLL
            for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
            /* blocks in pairs, alternating between the two C tile sets:
             * pair p + 1's products are issued before pair p is stored and
             * its f32 steps run (in block order) */
            amx_pair_issue(pt, pstride, qt, 0, nb, 0);
            for (int b = 0; b < nb; b += 2) {
                const int set = b / 2 % 2;
                if (b + 2 < nb) amx_pair_issue(pt, pstride, qt, b + 2, nb, !set);
                amx_pair_store(cbuf, b, nb, set);
                for (int h = 0; h < 2 && b + h < nb; h++) {
                    const __m512 xv = _mm512_load_ps(xst + 16 * (size_t)(b + h));
                    const int gb = G ? quant_int8_group_of(b + h, G) : 0;
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

#define AMX_SLICE(name, INT4, G)                                                           \
    static void slice_##name(const struct qtensor *W, int r0, int r1,                      \
                             const struct quant_act *a, int j0, int nj, float *Y,          \
                             void *scratch)                                                \
    {                                                                                      \
        slice_amx(W, r0, r1, a, j0, nj, Y, scratch, INT4, G);                              \
    }
AMX_SLICE(q8, 0, 0)
AMX_SLICE(q4, 1, 0)
AMX_SLICE(q4g32, 1, 32)
AMX_SLICE(q4g64, 1, 64)
AMX_SLICE(q4g128, 1, 128)

/* Every int8-activation format. The group formats joined once their matvec
 * (8-row passes, prefetch in address order) streamed at least as fast as
 * the AVX-512 level's 4-row kernel: 65536 x 7168, 1 thread, medians of 10
 * rounds interleaved, q4g32 16.0 GB/s against 14.4, q4g64 15.6 against
 * 15.1 (read probe 15.9); before that (16-row passes, a prefetch stream per
 * row) 12.7 and 14.4, so they had kept the AVX-512 kernels. Prefill n = 512
 * on 2048 x 7168: q4g32 474, q4g64 456 GFLOP/s against 137 and 138
 * (bench/amx-decode-results.md). */
#define AMX_ENTRY(name)                                                                   \
    { .rows = quant_int8_rows_##name, .act_int8 = 1, .slice = slice_##name, .act_qsum = 1,   \
      .act_tile16 = 1 }
const struct quant_isa_table quant_isa_amx = {
    .k = {
        [QUANT_Q8] = AMX_ENTRY(q8),
        [QUANT_Q4] = AMX_ENTRY(q4),
        [QUANT_Q4G32] = AMX_ENTRY(q4g32),
        [QUANT_Q4G64] = AMX_ENTRY(q4g64),
        [QUANT_Q4G128] = AMX_ENTRY(q4g128),
    },
};
