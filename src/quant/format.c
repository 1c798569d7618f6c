/* quant/format.c - the format traits table and each format's reference
 * quantize (from_f32) and dequantize (to_f32). The layouts are documented in
 * format.h; this is the one file that enumerates formats. */
#include "quant/format.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/kernels.h"
#include "quant/mxfp4.h"
#include "quant/qtensor.h"

static_assert(QUANT_INT4_BLOCK % 2 == 0 && QUANT_INT4_BLOCK / 2 == 64,
              "int4 block: 128 nibbles in 64 bytes");
static_assert(QUANT_INT4_BLOCK % QUANT_ACT_BLOCK == 0,
              "int8 activation blocks tile an int4 block");
static_assert(QUANT_INT4_BLOCK % 32 == 0 && QUANT_INT4_BLOCK % 64 == 0,
              "every q4 group size divides the int4 block");
static_assert(sizeof(uint16_t) == 2 && sizeof(float) == 4, "element sizes");

static size_t row_bytes_of(const struct qtensor *W)
{
    return quant_fmt_row_bytes(W->fmt, W->cols);
}

/* ------------------------------------------------------------ dequantize */

static void f32_to_f32(const struct qtensor *W, int row, float *out)
{
    memcpy(out, (const uint8_t *)W->data + (size_t)row * row_bytes_of(W),
           (size_t)W->cols * sizeof(float));
}

/* The loops below are written for the vectorizer (omp simd over constant
 * scale runs, no table lookups): the absorbed decode dequantizes kv_b rows
 * per token with them (model/mla.c), so their speed is decode speed. Each
 * value is the same single product (or exact widening) as the scalar
 * definition in format.h; test_quant compares them code by code. */
static void bf16_to_f32(const struct qtensor *W, int row, float *out)
{
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * row_bytes_of(W);
#pragma omp simd
    for (int c = 0; c < W->cols; c++) {
        uint16_t h;
        memcpy(&h, p + 2 * (size_t)c, 2);
        out[c] = quant_bf16_to_f32(h);
    }
}

static void f16_to_f32(const struct qtensor *W, int row, float *out)
{
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * row_bytes_of(W);
    for (int c = 0; c < W->cols; c++) {
        uint16_t h;
        memcpy(&h, p + 2 * (size_t)c, 2);
        out[c] = quant_f16_to_f32(h);
    }
}

static void q8_to_f32(const struct qtensor *W, int row, float *out)
{
    const int8_t *p = (const int8_t *)W->data + (size_t)row * row_bytes_of(W);
    float s = W->scales[row];
#pragma omp simd
    for (int c = 0; c < W->cols; c++) out[c] = (float)p[c] * s;
}

/* Covers q4 and q4gG: the scale of column c comes from the format's
 * geometry. Every group size is a multiple of 32, so each 32 columns of a
 * 128-column block (one half of its low or high nibbles) share a scale. */
static void q4_to_f32(const struct qtensor *W, int row, float *out)
{
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * row_bytes_of(W);
    const struct quant_fmt_traits *t = quant_fmt_traits(W->fmt);
    int cols = W->cols, g = t->scale_kind == QUANT_SCALE_GROUP ? t->group_cols : cols;
    int ng = (cols + g - 1) / g;
    const float *s = W->scales + (size_t)row * ng;
    for (int c0 = 0; c0 < cols; c0 += 32) {
        int n = cols - c0 < 32 ? cols - c0 : 32, hi = c0 % QUANT_INT4_BLOCK >= QUANT_INT4_BLOCK / 2;
        const uint8_t *b = p + (size_t)(c0 / QUANT_INT4_BLOCK) * (QUANT_INT4_BLOCK / 2) +
                           c0 % (QUANT_INT4_BLOCK / 2);
        float sc = s[c0 / g];
        float *o = out + c0;
        if (n == 32 && hi) {
            /* constant trip counts: no loop set-up or remainder per 32 columns */
#pragma omp simd
            for (int k = 0; k < 32; k++) o[k] = (float)((b[k] >> 4) - 8) * sc;
        } else if (n == 32) {
#pragma omp simd
            for (int k = 0; k < 32; k++) o[k] = (float)((b[k] & 0xF) - 8) * sc;
        } else {
            for (int k = 0; k < n; k++) o[k] = (float)((hi ? b[k] >> 4 : b[k] & 0xF) - 8) * sc;
        }
    }
}

/* quant_fp8_e4m3_table[code] from the code's bits, without branches or
 * lookups (so the loop vectorizes): a normal e4m3 (exponent field E >= 1)
 * is the f32 with exponent field E + 120 and the same 3 mantissa bits. The
 * same bits for E = 0 read (1 + M/8) 2^-7, and the subnormal M 2^-9 is twice
 * that less 2^-6, exactly. 0x7F/0xFF are NaN. */
static inline float fp8_e4m3_bits_to_f32(uint8_t code)
{
    uint32_t m7 = code & 0x7Fu, nb = (m7 << 20) + (120u << 23);
    uint32_t sb = quant_f32_bits(2.0f * quant_bits_f32(nb) - 0x1p-6f);
    uint32_t sub = 0u - (uint32_t)(m7 < 8), nan = 0u - (uint32_t)(m7 == 0x7F);
    uint32_t bits = (sb & sub) | (nb & ~sub);
    bits = (0x7FC00000u & nan) | (bits & ~nan);
    return quant_bits_f32(bits | (code & 0x80u) << 24);
}

static void fp8b_to_f32(const struct qtensor *W, int row, float *out)
{
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * row_bytes_of(W);
    int nbc = (W->cols + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK;
    const float *s = W->scales + (size_t)(row / QUANT_FP8B_BLOCK) * nbc;
    for (int c0 = 0; c0 < W->cols; c0 += QUANT_FP8B_BLOCK) {
        int n = W->cols - c0 < QUANT_FP8B_BLOCK ? W->cols - c0 : QUANT_FP8B_BLOCK;
        float sc = s[c0 / QUANT_FP8B_BLOCK];
#pragma omp simd
        for (int k = 0; k < n; k++) out[c0 + k] = fp8_e4m3_bits_to_f32(p[c0 + k]) * sc;
    }
}

/* Byte j of a 16-byte block holds elements 2j (low nibble) and 2j+1. */
static void mxfp4_to_f32(const struct qtensor *W, int row, float *out)
{
    const uint8_t *p = (const uint8_t *)W->data + (size_t)row * row_bytes_of(W);
    int nb = (W->cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK;
    const uint8_t *e = W->scales_e8m0 + (size_t)row * nb;
    for (int b = 0; b < nb; b++) {
        float h = quant_e8m0_half(e[b]);
        const uint8_t *q = p + (size_t)b * (QUANT_MX_BLOCK / 2);
        float blk[QUANT_MX_BLOCK];
#pragma omp simd
        for (int k = 0; k < QUANT_MX_BLOCK / 2; k++) {
            blk[2 * k] = quant_e2m1_twice_f32[q[k] & 0xF] * h;
            blk[2 * k + 1] = quant_e2m1_twice_f32[q[k] >> 4] * h;
        }
        int n = W->cols - b * QUANT_MX_BLOCK < QUANT_MX_BLOCK ? W->cols - b * QUANT_MX_BLOCK : QUANT_MX_BLOCK;
        memcpy(out + (size_t)b * QUANT_MX_BLOCK, blk, (size_t)n * sizeof(float));
    }
}

/* -------------------------------------------------------------- quantize */

static float amax_of(const float *w, int n)
{
    float a = 0.0f;
    for (int i = 0; i < n; i++) a = fmaxf(a, fabsf(w[i]));
    return a;
}

static void f32_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    memcpy(data, w, (size_t)rows * cols * sizeof(float));
}

static void bf16_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    uint8_t *p = data;
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        uint16_t h = quant_f32_to_bf16(w[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

static void f16_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    uint8_t *p = data;
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        uint16_t h = quant_f32_to_f16(w[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* Symmetric: s = amax/qmax, q = round-to-nearest-even(w/s) in [-qmax, qmax]. */
static float sym_scale(const float *w, int n, int qmax)
{
    float a = amax_of(w, n);
    return a > 0.0f ? a / (float)qmax : 0.0f;
}

static int sym_code(float w, float s, int qmax)
{
    if (s == 0.0f) return 0;
    long q = lrintf(w / s);
    return (int)(q > qmax ? qmax : q < -qmax ? -qmax : q);
}

static void q8_from_f32(const float *w, int rows, int cols, void *data, void *scales_v)
{
    float *scales = scales_v;
    int8_t *p = data;
    for (int r = 0; r < rows; r++) {
        const float *wr = w + (size_t)r * cols;
        float s = sym_scale(wr, cols, 127);
        scales[r] = s;
        for (int c = 0; c < cols; c++) p[(size_t)r * cols + c] = (int8_t)sym_code(wr[c], s, 127);
    }
}

static void q4_pack_row(const float *wr, int cols, int g, uint8_t *p, float *s)
{
    size_t rb = quant_fmt_row_bytes(QUANT_Q4, cols);
    memset(p, 0x88, rb);                                /* padding = value 0 */
    for (int c0 = 0, gi = 0; c0 < cols; c0 += g, gi++) {
        int n = cols - c0 < g ? cols - c0 : g;
        float sc = sym_scale(wr + c0, n, 7);
        s[gi] = sc;
        for (int c = c0; c < c0 + n; c++) {
            uint8_t nib = (uint8_t)(sym_code(wr[c], sc, 7) + 8);
            uint8_t *b = p + (c / QUANT_INT4_BLOCK) * (QUANT_INT4_BLOCK / 2) + c % (QUANT_INT4_BLOCK / 2);
            if (c % QUANT_INT4_BLOCK < QUANT_INT4_BLOCK / 2) *b = (uint8_t)((*b & 0xF0) | nib);
            else *b = (uint8_t)((*b & 0x0F) | (nib << 4));
        }
    }
}

static void q4_from_f32_g(const float *w, int rows, int cols, uint8_t *data, float *scales, int g)
{
    size_t rb = quant_fmt_row_bytes(QUANT_Q4, cols);
    int ng = (cols + g - 1) / g;
    for (int r = 0; r < rows; r++)
        q4_pack_row(w + (size_t)r * cols, cols, g, data + r * rb, scales + (size_t)r * ng);
}

static void q4_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    q4_from_f32_g(w, rows, cols, data, scales, cols);
}
static void q4g32_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    q4_from_f32_g(w, rows, cols, data, scales, 32);
}
static void q4g64_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    q4_from_f32_g(w, rows, cols, data, scales, 64);
}
static void q4g128_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    q4_from_f32_g(w, rows, cols, data, scales, 128);
}

static void fp8b_from_f32(const float *w, int rows, int cols, void *data, void *scales_v)
{
    float *scales = scales_v;
    uint8_t *p = data;
    const int B = QUANT_FP8B_BLOCK;
    int nbc = (cols + B - 1) / B;
    for (int br = 0; br * B < rows; br++) {
        int r1 = (br + 1) * B < rows ? (br + 1) * B : rows;
        for (int bc = 0; bc < nbc; bc++) {
            int c0 = bc * B, c1 = c0 + B < cols ? c0 + B : cols;
            float a = 0.0f;
            for (int r = br * B; r < r1; r++) a = fmaxf(a, amax_of(w + (size_t)r * cols + c0, c1 - c0));
            float s = a >= QUANT_FP8_AMAX_MIN ? a / QUANT_FP8_E4M3_MAX : 0.0f;
            scales[(size_t)br * nbc + bc] = s;
            for (int r = br * B; r < r1; r++)
                for (int c = c0; c < c1; c++)
                    p[(size_t)r * cols + c] = s == 0.0f ? 0 : quant_fp8_e4m3_encode(w[(size_t)r * cols + c] / s);
        }
    }
}

/* OCP MX v1.0 block scale and round to nearest e2m1 (quant/mxfp4.h); the
 * padding of the last block is +0 codes. */
static void mxfp4_from_f32(const float *w, int rows, int cols, void *data, void *scales)
{
    uint8_t *p = data, *e = scales;
    size_t rb = quant_fmt_row_bytes(QUANT_MXFP4, cols);
    int nb = (cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK;
    for (int r = 0; r < rows; r++) {
        for (int b = 0; b < nb; b++) {
            int c0 = b * QUANT_MX_BLOCK, n = cols - c0 < QUANT_MX_BLOCK ? cols - c0 : QUANT_MX_BLOCK;
            uint8_t codes[QUANT_MX_BLOCK] = { 0 };
            e[(size_t)r * nb + b] = quant_mxfp4_encode_block(w + (size_t)r * cols + c0, n, codes);
            uint8_t *q = p + (size_t)r * rb + (size_t)b * (QUANT_MX_BLOCK / 2);
            for (int k = 0; k < QUANT_MX_BLOCK / 2; k++) q[k] = (uint8_t)(codes[2 * k] | codes[2 * k + 1] << 4);
        }
    }
}

/* ----------------------------------------------------------------- table */

static const struct quant_fmt_traits FMT[QUANT_FMT_COUNT] = {
    [QUANT_F32] = { .name = "f32", .bits = 32, .row_align = 1, .scale_kind = QUANT_SCALE_NONE,
                    .to_f32 = f32_to_f32, .from_f32 = f32_from_f32 },
    [QUANT_BF16] = { .name = "bf16", .bits = 16, .row_align = 1, .scale_kind = QUANT_SCALE_NONE,
                     .to_f32 = bf16_to_f32, .from_f32 = bf16_from_f32 },
    [QUANT_F16] = { .name = "f16", .bits = 16, .row_align = 1, .scale_kind = QUANT_SCALE_NONE,
                    .to_f32 = f16_to_f32, .from_f32 = f16_from_f32 },
    [QUANT_Q8] = { .name = "q8", .int8_act = 1, .bits = 8, .row_align = 1, .scale_kind = QUANT_SCALE_ROW,
                   .to_f32 = q8_to_f32, .from_f32 = q8_from_f32 },
    [QUANT_Q4] = { .name = "q4", .int8_act = 1, .bits = 4, .row_align = QUANT_INT4_BLOCK,
                   .scale_kind = QUANT_SCALE_ROW, .to_f32 = q4_to_f32, .from_f32 = q4_from_f32 },
    [QUANT_Q4G32] = { .name = "q4g32", .int8_act = 1, .bits = 4, .row_align = QUANT_INT4_BLOCK,
                      .scale_kind = QUANT_SCALE_GROUP, .group_cols = 32,
                      .to_f32 = q4_to_f32, .from_f32 = q4g32_from_f32 },
    [QUANT_Q4G64] = { .name = "q4g64", .int8_act = 1, .bits = 4, .row_align = QUANT_INT4_BLOCK,
                      .scale_kind = QUANT_SCALE_GROUP, .group_cols = 64,
                      .to_f32 = q4_to_f32, .from_f32 = q4g64_from_f32 },
    [QUANT_Q4G128] = { .name = "q4g128", .int8_act = 1, .bits = 4, .row_align = QUANT_INT4_BLOCK,
                       .scale_kind = QUANT_SCALE_GROUP, .group_cols = 128,
                       .to_f32 = q4_to_f32, .from_f32 = q4g128_from_f32 },
    [QUANT_FP8B] = { .name = "fp8b", .bits = 8, .row_align = 1, .scale_kind = QUANT_SCALE_BLOCK2D,
                     .group_cols = QUANT_FP8B_BLOCK, .group_rows = QUANT_FP8B_BLOCK,
                     .to_f32 = fp8b_to_f32, .from_f32 = fp8b_from_f32 },
    [QUANT_MXFP4] = { .name = "mxfp4", .int8_act = 1, .bits = 4, .row_align = QUANT_MX_BLOCK,
                      .scale_kind = QUANT_SCALE_GROUP, .group_cols = QUANT_MX_BLOCK, .scale_e8m0 = 1,
                      .to_f32 = mxfp4_to_f32, .from_f32 = mxfp4_from_f32 },
};

int quant_fmt_valid(int fmt)
{
    return fmt >= 0 && fmt < QUANT_FMT_COUNT && FMT[fmt].name != NULL;
}

const struct quant_fmt_traits *quant_fmt_traits(enum quant_fmt fmt)
{
    return &FMT[fmt];
}

const char *quant_fmt_name(enum quant_fmt fmt)
{
    return quant_fmt_valid(fmt) ? FMT[fmt].name : "?";
}

static const char *name_at(int f) { return FMT[f].name; }

size_t quant_fmt_names(char *buf, size_t n, const char *sep)
{
    return base_join_names(buf, n, sep, QUANT_FMT_COUNT, name_at);
}

int quant_fmt_from_name(const char *name)
{
    for (int f = 0; f < QUANT_FMT_COUNT; f++)
        if (FMT[f].name && strcmp(FMT[f].name, name) == 0) return f;
    return -1;
}

size_t quant_fmt_row_bytes(enum quant_fmt fmt, int cols)
{
    size_t a = (size_t)FMT[fmt].row_align;
    size_t padded = ((size_t)cols + a - 1) / a * a;
    return padded * (size_t)FMT[fmt].bits / 8;
}

size_t quant_fmt_data_bytes(enum quant_fmt fmt, int rows, int cols)
{
    return (size_t)rows * quant_fmt_row_bytes(fmt, cols);
}

size_t quant_fmt_scale_count(enum quant_fmt fmt, int rows, int cols)
{
    const struct quant_fmt_traits *t = &FMT[fmt];
    size_t gc = t->group_cols > 0 ? (size_t)t->group_cols : 1;
    size_t gr = t->group_rows > 0 ? (size_t)t->group_rows : 1;
    switch (t->scale_kind) {
    case QUANT_SCALE_NONE: return 0;
    case QUANT_SCALE_ROW: return (size_t)rows;
    case QUANT_SCALE_GROUP: return (size_t)rows * (((size_t)cols + gc - 1) / gc);
    case QUANT_SCALE_BLOCK2D: return (((size_t)rows + gr - 1) / gr) * (((size_t)cols + gc - 1) / gc);
    }
    return 0;
}

size_t quant_fmt_scale_size(enum quant_fmt fmt)
{
    return FMT[fmt].scale_e8m0 ? 1 : sizeof(float);
}

size_t quant_fmt_scale_bytes(enum quant_fmt fmt, int rows, int cols)
{
    return quant_fmt_scale_count(fmt, rows, cols) * quant_fmt_scale_size(fmt);
}

size_t quant_fmt_scale_index(enum quant_fmt fmt, int rows, int cols, int row, int col)
{
    const struct quant_fmt_traits *t = &FMT[fmt];
    switch (t->scale_kind) {
    case QUANT_SCALE_NONE: return 0;
    case QUANT_SCALE_ROW: return (size_t)row;
    case QUANT_SCALE_GROUP:
        return (size_t)row * (size_t)((cols + t->group_cols - 1) / t->group_cols) + (size_t)(col / t->group_cols);
    case QUANT_SCALE_BLOCK2D:
        return (size_t)(row / t->group_rows) * (size_t)((cols + t->group_cols - 1) / t->group_cols)
             + (size_t)(col / t->group_cols);
    }
    return 0;
}
