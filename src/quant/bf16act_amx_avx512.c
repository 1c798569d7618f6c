/* quant/bf16act_amx_avx512.c - the TDPBF16PS (AMX-BF16) kernel of
 * quant/bf16act.h.
 *
 * Operands: the weights are tile A, read in place (16 rows x 32 bf16 of the
 * row-major matrix, stride one row), so nothing is repacked per call; the
 * activations are tile B, rounded to bf16 and packed into TDPBF16PS's pair
 * order once per call and slice of tokens by quant_bf16act_amx_pack. The
 * accumulator tile C is then 16 weight rows x 16 tokens. (The weights as B
 * would need them repacked per call into pairs of rows; not tried.)
 *
 * An output's sequence (the same whatever the batch, its split, or the
 * output's position in a tile, since a C element depends only on its own A
 * row and B column): the columns go in chunks of QUANT_BF16ACT_AMX_CHUNK;
 * each chunk starts from a zeroed C and takes one TDPBF16PS per 32 columns
 * in order; the chunk sums are added in order in f32 (the first one stored
 * as is). Chunking keeps the f32 addition chain short (bf16act.h's bound).
 *
 * Blocking: 2 row tiles x 2 token tiles share each A and B tile load (4 C
 * tiles, 2 A, 2 B: the 8 tiles); columns go in blocks of BK so the block's
 * weights (32 rows) and the slice's packed activations stay in L1 while every
 * token tile of the slice passes over them; the chunk sums rest in `sums`
 * between blocks. Partial tiles (rows past the end, the last columns of a
 * row whose length is not a multiple of 32) are copied into a zero-padded
 * 16 x 32 buffer first, so no load reads past the matrix, and padding
 * weights can't be Inf/NaN (0 x Inf would spoil the output). */
#include <immintrin.h>
#include <string.h>

#include "quant/amx.h"
#include "quant/bf16act.h"

/* Columns per cache block: 32 rows x 256 bf16 = 16 KiB of weights, with a
 * 64-token slice's 32 KiB of activations, in a 48 KiB L1. */
#define BK 256
/* chunks never straddle a block, so their bounds are fixed multiples of CHUNK */
_Static_assert(BK % QUANT_BF16ACT_AMX_CHUNK == 0, "column blocks must hold whole chunks");

/* 1 KiB tiles: 16 rows x 64 bytes. */
#define TILE_ELEMS QUANT_BF16ACT_AMX_TILE_ELEMS
/* With one token tile (decode) the weights pass once, so the kernel waits
 * on memory: their lines are prefetched PF steps (of 32 columns) ahead
 * (decode 14.8 -> 15.8 GB/s of a 16.4 read probe, 32768 x 7168, 1 thread).
 * With more tokens the prefetches cost more than they save (n = 512:
 * about 900 -> 730 GFLOP/s), so they are skipped. */
#define PF 4


/* r[0..15] (16 dwords each) transposed in place: r[k] dword t = old r[t] dword k.
 * 32-bit then 64-bit interleaves transpose the 4 x 4 blocks inside each
 * 128-bit lane; two rounds of lane shuffles then transpose the 4 x 4 lanes. */
static inline void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    /* u[4g + c], lane L: dword c + 4L of rows 4g..4g+3 */
    for (int c = 0; c < 4; c++) {
        __m512i w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), w1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
        __m512i w2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
        __m512i w3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_i32x4(w0, w2, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(w0, w2, 0xDD);
        r[8 + c] = _mm512_shuffle_i32x4(w1, w3, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(w1, w3, 0xDD);
    }
}

void quant_bf16act_amx_pack(const float *X, int cols, int cols_pad, int nx, int nxp, uint16_t *panel)
{
    const int steps = cols_pad / 32;
    for (int tb = 0; tb < nxp / 16; tb++)
        for (int s = 0; s < steps; s++) {
            /* 32 columns of 16 tokens rounded as quant_bf16act_round_avx512
             * does (one VCVTNE2PS2BF16, zeros past cols): 16 column pairs each */
            int c = s * 32, m = cols - c < 32 ? cols - c : 32;
            __mmask16 m0 = (__mmask16)(m >= 16 ? 0xFFFF : (1u << m) - 1);
            __mmask16 m1 = (__mmask16)(m >= 32 ? 0xFFFF : m <= 16 ? 0 : (1u << (m - 16)) - 1);
            __m512i v[16];
            for (int t = 0; t < 16; t++) {
                int tok = tb * 16 + t;
                if (tok >= nx) {
                    v[t] = _mm512_setzero_si512();
                    continue;
                }
                const float *x = X + (size_t)tok * cols + c;
                __m512 lo = _mm512_maskz_loadu_ps(m0, x), hi = _mm512_maskz_loadu_ps(m1, x + 16);
                v[t] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            }
            /* B row k2 holds pair k2 of every token */
            transpose16(v);
            uint16_t *tile = panel + ((size_t)tb * steps + s) * TILE_ELEMS;
            for (int k2 = 0; k2 < 16; k2++) _mm512_store_si512(tile + 32 * k2, v[k2]);
        }
}

/* Where tile A for rows [r, r + 16) and columns [c, c + 32) loads from: the
 * matrix itself, or `pad` filled with the part inside it and zeros. */
static inline const uint16_t *a_source(const uint16_t *Wd, int rows, int cols, int r, int c, uint16_t *pad,
                                       size_t *stride)
{
    if (r + 16 <= rows && c + 32 <= cols) {
        *stride = (size_t)cols * 2;
        return Wd + (size_t)r * cols + c;
    }
    int w = cols - c < 32 ? cols - c : 32;
    for (int i = 0; i < 16; i++) {
        uint16_t *d = pad + i * 32;
        if (r + i < rows && w > 0) {
            memcpy(d, Wd + (size_t)(r + i) * cols + c, (size_t)w * 2);
            memset(d + w, 0, (size_t)(32 - w) * 2);
        } else {
            memset(d, 0, 64);
        }
    }
    *stride = 64;
    return pad;
}

/* sums[16 rows][ld] += (or = when first) the 16 x 16 floats of C at tmp. */
static inline void add_chunk(float *sums, int ld, const float *tmp, int first)
{
    for (int i = 0; i < 16; i++) {
        __m512 c = _mm512_load_ps(tmp + 16 * i);
        float *d = sums + (size_t)i * ld;
        _mm512_storeu_ps(d, first ? c : _mm512_add_ps(_mm512_loadu_ps(d), c));
    }
}

void quant_bf16act_amx_rows(const uint16_t *Wd, int rows, int cols, int r_begin, int r_end, const uint16_t *panel,
                            int cols_pad, int nx, int nxp, float *Y, float *sums)
{
    const int steps = cols_pad / 32, CH = QUANT_BF16ACT_AMX_CHUNK;
    _Alignas(64) uint16_t pad0[TILE_ELEMS], pad1[TILE_ELEMS];
    _Alignas(64) float tmp[4][256];
    quant_amx_config_full();
    for (int r = r_begin; r < r_end; r += 32) {
        /* sums[i][t]: row r + i (i < 32), token t (< nxp) */
        for (int c0 = 0; c0 < cols_pad; c0 += BK) {
            int c1 = c0 + BK < cols_pad ? c0 + BK : cols_pad;
            for (int tb = 0; tb < nxp; tb += 32) {
                int two = tb + 16 < nxp;        /* a second token tile holds tokens */
                const uint16_t *b0 = panel + (size_t)(tb / 16) * steps * TILE_ELEMS, *b1 = b0 + (size_t)steps * TILE_ELEMS;
                for (int k0 = c0; k0 < c1; k0 += CH) {
                    int k1 = k0 + CH < c1 ? k0 + CH : c1;
                    _tile_zero(0);
                    _tile_zero(1);
                    _tile_zero(2);
                    _tile_zero(3);
                    for (int c = k0; c < k1; c += 32) {
                        size_t sa0, sa1;
                        const uint16_t *a0 = a_source(Wd, rows, cols, r, c, pad0, &sa0);
                        const uint16_t *a1 = a_source(Wd, rows, cols, r + 16, c, pad1, &sa1);
                        if (nxp == 16 && c + PF * 32 < cols) {
                            const char *pf = (const char *)(Wd + (size_t)r * cols + c + PF * 32);
                            int nr = rows - r < 32 ? rows - r : 32;
                            for (int i = 0; i < nr; i++) _mm_prefetch(pf + (size_t)i * cols * 2, _MM_HINT_T0);
                        }
                        _tile_loadd(4, a0, sa0);
                        _tile_loadd(5, a1, sa1);
                        _tile_loadd(6, b0 + (size_t)(c / 32) * TILE_ELEMS, 64);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_dpbf16ps(2, 5, 6);
                        if (two) {
                            _tile_loadd(7, b1 + (size_t)(c / 32) * TILE_ELEMS, 64);
                            _tile_dpbf16ps(1, 4, 7);
                            _tile_dpbf16ps(3, 5, 7);
                        }
                    }
                    int first = k0 == 0;
                    _tile_stored(0, tmp[0], 64);
                    _tile_stored(2, tmp[2], 64);
                    add_chunk(sums + tb, nxp, tmp[0], first);
                    add_chunk(sums + (size_t)16 * nxp + tb, nxp, tmp[2], first);
                    if (two) {
                        _tile_stored(1, tmp[1], 64);
                        _tile_stored(3, tmp[3], 64);
                        add_chunk(sums + tb + 16, nxp, tmp[1], first);
                        add_chunk(sums + (size_t)16 * nxp + tb + 16, nxp, tmp[3], first);
                    }
                }
            }
        }
        int nr = r_end - r < 32 ? r_end - r : 32;
        for (int t = 0; t < nx; t++)
            for (int i = 0; i < nr; i++) Y[(size_t)t * rows + r + i] = sums[(size_t)i * nxp + t];
    }
    _tile_release();
}
