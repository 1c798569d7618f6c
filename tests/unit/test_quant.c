/* test_quant.c - weight formats and their kernels: sizes, layouts written out
 * by hand, quantize/dequantize error bounds, and every format x every kernel
 * level available here against an independent double-precision reference
 * (dequantize with to_f32, dot in double), over odd shapes and batches. */
#include "check.h"
#include "model/linear.h"
#include "quant/bf16act.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/kernels.h"
#include "quant/qtensor.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_s ^= rng_s << 13; rng_s ^= rng_s >> 7; rng_s ^= rng_s << 17;
    return (uint32_t)(rng_s >> 16);
}
static float rndf(void) { return ((float)(rnd() % 2000001) - 1000000.0f) * 1e-6f; }

static float *rand_vec(size_t n, float amp)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = rndf() * amp;
    return v;
}

static const int ALL_FMTS[] = { QUANT_F32, QUANT_BF16, QUANT_F16, QUANT_Q8, QUANT_Q4,
                                QUANT_Q4G32, QUANT_Q4G64, QUANT_Q4G128, QUANT_FP8B, QUANT_MXFP4 };
#define NFMT ((int)(sizeof ALL_FMTS / sizeof ALL_FMTS[0]))

static int is_int4(int f) { return f == QUANT_Q4 || f == QUANT_Q4G32 || f == QUANT_Q4G64 || f == QUANT_Q4G128; }
static int group_of(int f, int cols)
{
    return f == QUANT_Q4G32 ? 32 : f == QUANT_Q4G64 ? 64 : f == QUANT_Q4G128 ? 128 : cols;
}

/* Sizes computed here from the table in format.h, by hand. */
static void test_sizes(void)
{
    int rows = 300, cols = 200;
    CHECK(quant_fmt_row_bytes(QUANT_F32, cols) == 800, "f32");
    CHECK(quant_fmt_row_bytes(QUANT_BF16, cols) == 400, "bf16");
    CHECK(quant_fmt_row_bytes(QUANT_F16, cols) == 400, "f16");
    CHECK(quant_fmt_row_bytes(QUANT_Q8, cols) == 200, "q8");
    CHECK(quant_fmt_row_bytes(QUANT_Q4, cols) == 128, "q4: 256 padded / 2");
    CHECK(quant_fmt_row_bytes(QUANT_Q4G32, 129) == 128, "q4g32 129 cols -> 256 padded");
    CHECK(quant_fmt_row_bytes(QUANT_Q4G64, 128) == 64, "q4g64 128");
    CHECK(quant_fmt_row_bytes(QUANT_FP8B, cols) == 200, "fp8b");
    CHECK(quant_fmt_scale_count(QUANT_F32, rows, cols) == 0, "f32 no scales");
    CHECK(quant_fmt_scale_count(QUANT_Q8, rows, cols) == 300, "q8");
    CHECK(quant_fmt_scale_count(QUANT_Q4, rows, cols) == 300, "q4");
    CHECK(quant_fmt_scale_count(QUANT_Q4G32, rows, cols) == 300 * 7, "q4g32: ceil(200/32)=7");
    CHECK(quant_fmt_scale_count(QUANT_Q4G64, rows, cols) == 300 * 4, "q4g64");
    CHECK(quant_fmt_scale_count(QUANT_Q4G128, rows, cols) == 300 * 2, "q4g128");
    CHECK(quant_fmt_scale_count(QUANT_FP8B, rows, cols) == 3 * 2, "fp8b: ceil(300/128) x ceil(200/128)");
    CHECK(quant_fmt_scale_count(QUANT_FP8B, 576, 7168) == 5 * 56, "kv_a_proj_with_mqa: 5 scale rows");
    CHECK(quant_fmt_data_bytes(QUANT_Q4G64, 3, 7168) == 3 * 3584, "data bytes");
    CHECK(quant_fmt_row_bytes(QUANT_MXFP4, cols) == 112, "mxfp4: 224 padded / 2");
    CHECK(quant_fmt_scale_count(QUANT_MXFP4, rows, cols) == 300 * 7, "mxfp4: one per 32");
    CHECK(quant_fmt_scale_bytes(QUANT_MXFP4, rows, cols) == 300 * 7, "mxfp4: e8m0 bytes");
    CHECK(quant_fmt_scale_bytes(QUANT_Q4G32, rows, cols) == 300 * 7 * 4, "q4g32: f32");
    CHECK(quant_fmt_data_bytes(QUANT_MXFP4, 2048, 7168) + quant_fmt_scale_bytes(QUANT_MXFP4, 2048, 7168) ==
          (size_t)2048 * 7168 * 17 / 32, "mxfp4: 4.25 bits per weight");
    for (int i = 0; i < NFMT; i++) {
        const char *nm = quant_fmt_name(ALL_FMTS[i]);
        CHECK(quant_fmt_from_name(nm) == ALL_FMTS[i], "name round trip %s", nm);
    }
    CHECK(quant_fmt_from_name("q3") == -1, "unknown name");
    CHECK(!quant_fmt_valid(QUANT_FMT_COUNT) && !quant_fmt_valid(-1), "valid ids");
}

/* The int4 layout written out independently, for every int4 format:
 * element c sits in block c/128, byte (c%128)%64, low nibble if c%128 < 64;
 * value nibble - 8, times its group's (or row's) scale. Random bytes cover
 * the extremes 0x0 and 0xF, forced in at known spots too; 200 columns end
 * in a partial block. */
static void test_int4_layout(void)
{
    static const int fmts[] = { QUANT_Q4, QUANT_Q4G32, QUANT_Q4G64, QUANT_Q4G128 };
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
        int fmt = fmts[fi], rows = 3, cols = 200;
        int g = fmt == QUANT_Q4 ? cols : quant_fmt_traits(fmt)->group_cols, ng = (cols + g - 1) / g;
        size_t rb = quant_fmt_row_bytes(fmt, cols);
        uint8_t *d = malloc(rows * rb);
        for (size_t i = 0; i < rows * rb; i++) d[i] = (uint8_t)rnd();
        d[0] = 0xF0;            /* row 0: col 0 -> -8, col 64 -> +7 */
        d[1] = 0x0F;            /* col 1 -> +7, col 65 -> -8 */
        float sc[3 * 7];
        for (int i = 0; i < rows * ng; i++) sc[i] = 0.5f + (float)i * 1.37f;
        struct qtensor W;
        CHECK(quant_qtensor_wrap(fmt, rows, cols, d, rows * rb, sc, rows * ng, &W, NULL) == 0, "wrap");
        float out[3 * 200];
        quant_dequant_rows(&W, 0, rows, out);
        int bad = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                uint8_t b = d[r * rb + (c / 128) * 64 + (c % 128) % 64];
                int nib = (c % 128) < 64 ? (b & 15) : (b >> 4);
                float want = (float)(nib - 8) * sc[r * ng + c / g];
                if (out[r * cols + c] != want) bad++;
            }
        CHECK(bad == 0, "%s: %d elements differ from the layout", quant_fmt_name(fmt), bad);
        CHECK(out[0] == -8 * sc[0] && out[64] == 7 * sc[64 / g] && out[1] == 7 * sc[0] &&
              out[65] == -8 * sc[65 / g], "%s: nibble extremes", quant_fmt_name(fmt));
        quant_qtensor_free(&W);
        free(d);
    }
}

/* q8 and bf16 rows against their one-line definitions (with a row length
 * that is no multiple of a vector). */
static void test_q8_bf16_layout(void)
{
    int rows = 2, cols = 37;
    int8_t q[2 * 37];
    uint16_t h[2 * 37];
    for (int i = 0; i < rows * cols; i++) { q[i] = (int8_t)rnd(); h[i] = (uint16_t)rnd(); }
    q[0] = -128; q[1] = 127;
    float sc[2] = { 0.0173f, 3.5f }, out[2 * 37];
    struct qtensor W;
    CHECK(quant_qtensor_wrap(QUANT_Q8, rows, cols, q, sizeof q, sc, 2, &W, NULL) == 0, "wrap q8");
    quant_dequant_rows(&W, 0, rows, out);
    int bad = 0;
    for (int i = 0; i < rows * cols; i++) bad += out[i] != (float)q[i] * sc[i / cols];
    CHECK(bad == 0, "q8: %d elements wrong", bad);
    CHECK(quant_qtensor_wrap(QUANT_BF16, rows, cols, h, sizeof h, NULL, 0, &W, NULL) == 0, "wrap bf16");
    quant_dequant_rows(&W, 0, rows, out);
    bad = 0;
    for (int i = 0; i < rows * cols; i++) {
        uint32_t u = (uint32_t)h[i] << 16, v;
        memcpy(&v, &out[i], 4);
        bad += u != v;
    }
    CHECK(bad == 0, "bf16: %d elements not the high half of their f32", bad);
}

static void test_fp8b_layout(void)
{
    int rows = 130, cols = 260;                       /* 2 x 3 blocks, partial both ways */
    uint8_t *d = malloc((size_t)rows * cols);
    for (int i = 0; i < rows * cols; i++) { d[i] = (uint8_t)rnd(); if ((d[i] & 0x7F) == 0x7F) d[i] = 0x42; }
    float sc[6] = { 1, 2, 3, 4, 5, 0.25f };
    struct qtensor W;
    CHECK(quant_qtensor_wrap(QUANT_FP8B, rows, cols, d, (size_t)rows * cols, sc, 6, &W, NULL) == 0, "wrap");
    float *out = malloc((size_t)rows * cols * sizeof *out);
    quant_dequant_rows(&W, 0, rows, out);
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            if (out[r * cols + c] != quant_fp8_e4m3_decode(d[r * cols + c]) * sc[(r / 128) * 3 + c / 128]) bad++;
    CHECK(bad == 0, "%d fp8b elements wrong", bad);
    /* a slice in the middle, like W_UK of one head */
    float slice[3 * 260];
    quant_dequant_rows(&W, 127, 3, slice);
    CHECK(memcmp(slice, out + 127 * cols, sizeof slice) == 0, "slice across a block row edge");
    /* every code once, NaN ones included, bit for bit against the table */
    for (int i = 0; i < 256; i++) d[i] = (uint8_t)i;
    CHECK(quant_qtensor_wrap(QUANT_FP8B, 1, 256, d, 256, sc, 2, &W, NULL) == 0, "wrap all codes");
    quant_dequant_rows(&W, 0, 1, out);
    bad = 0;
    for (int i = 0; i < 256; i++) {
        float want = quant_fp8_e4m3_decode((uint8_t)i) * sc[i / 128];
        bad += isnan(want) ? !isnan(out[i]) : memcmp(&want, &out[i], 4) != 0;
    }
    CHECK(bad == 0, "%d of the 256 codes decode differently from the table", bad);
    free(out);
    free(d);
}

/* Every level's row dequantizer gives the format's to_f32 bits, for every
 * format, on rows that end in a partial block; fp8b with every code (NaN
 * ones included) under ordinary, subnormal, huge, infinite and NaN block
 * scales, where a widening through 256 x scale would overflow. */
static void test_dequant_levels(void)
{
    int rows = 130, cols = 300;     /* fp8b: 2 x 3 scale blocks */
    float *f = malloc(sizeof(float) * rows * cols), *want = malloc(sizeof(float) * rows * cols),
          *got = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++) f[i] = ((float)(rnd() % 20001) - 10000.0f) * 1e-4f;
    int levels = 0;
    for (size_t fi = 0; fi < sizeof ALL_FMTS / sizeof *ALL_FMTS; fi++) {
        struct qtensor W;
        CHECK(quant_qtensor_from_f32(ALL_FMTS[fi], rows, cols, f, &W, NULL) == 0, "quantize");
        if (W.fmt == QUANT_FP8B) {
            uint8_t *d = (uint8_t *)W.data;
            float *sc = (float *)W.scales;
            for (int i = 0; i < rows * cols; i++) d[i] = (uint8_t)(i * 7);
            const float odd[6] = { 0x1p-140f, 0x1p125f, INFINITY, NAN, -0.5f, 1e-3f };
            memcpy(sc, odd, sizeof odd);
        }
        for (int r = 0; r < rows; r++) quant_fmt_traits(W.fmt)->to_f32(&W, r, want + (size_t)r * cols);
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_available(isa)) continue;
            levels++;
            memset(got, 0xAB, sizeof(float) * rows * cols);
            CHECK(quant_dequant_rows_isa(&W, 0, rows, got, isa, NULL) == 0, "dequant at %s", quant_isa_name(isa));
            int bad = 0;
            for (int i = 0; i < rows * cols; i++)
                bad += isnan(want[i]) ? !isnan(got[i]) : memcmp(&want[i], &got[i], 4) != 0;
            CHECK(bad == 0, "%s at %s: %d of %d values differ from to_f32", quant_fmt_name(W.fmt),
                  quant_isa_name(isa), bad, rows * cols);
        }
        quant_qtensor_free(&W);
    }
    CHECK(levels > 0, "no level ran");
    free(f);
    free(want);
    free(got);
}

static void test_wrap_checks(void)
{
    uint8_t d[64 * 10] = { 0 };
    float s[20] = { 0 };
    struct qtensor W = { 0 };
    struct colibri_err e = { 0 };
    CHECK(quant_qtensor_wrap(QUANT_Q4G64, 10, 100, d, sizeof d, s, 10 * 2, &W, &e) == 0, "ok: %s", e.msg);
    CHECK(W.data == d && W.scales == s && !W.owned, "borrowed, not copied");
    quant_qtensor_free(&W);
    CHECK(W.data == NULL, "free clears");
    CHECK(quant_qtensor_wrap(QUANT_Q4G64, 10, 100, d, sizeof d - 1, s, 20, &W, &e) == COLIBRI_EINVAL, "short data");
    CHECK(strstr(e.msg, "640") != NULL, "message names the expected size: %s", e.msg);
    CHECK(quant_qtensor_wrap(QUANT_Q4G64, 10, 100, d, sizeof d, s, 10, &W, &e) == COLIBRI_EINVAL, "scales");
    CHECK(quant_qtensor_wrap(QUANT_Q4G64, 10, 100, d, sizeof d, NULL, 20, &W, &e) == COLIBRI_EINVAL, "NULL scales");
    CHECK(quant_qtensor_wrap(QUANT_BF16, 10, 32, d, 640, NULL, 0, &W, &e) == 0, "bf16 no scales");
    CHECK(quant_qtensor_wrap(QUANT_FMT_COUNT, 10, 32, d, 640, NULL, 0, &W, &e) == COLIBRI_EINVAL, "bad fmt");
    CHECK(quant_qtensor_wrap(QUANT_F32, 0, 32, d, 0, NULL, 0, &W, &e) == COLIBRI_EINVAL, "bad shape");
    quant_qtensor_free(NULL);
}

/* Quantize then dequantize: the per-element bound of each format. */
static void test_roundtrip_bounds(void)
{
    int rows = 131, cols = 203;
    float *w = rand_vec((size_t)rows * cols, 2.0f);
    for (int c = 0; c < cols; c++) w[5 * cols + c] = 0.0f;           /* an all-zero row */
    for (int c = 0; c < 40; c++) w[7 * cols + c] = 1e-3f * rndf();   /* a small group */
    w[9 * cols + 3] = 1e-6f;                                          /* f16 subnormal */
    float *out = malloc((size_t)rows * cols * sizeof *out);
    for (int i = 0; i < NFMT; i++) {
        int f = ALL_FMTS[i];
        struct qtensor W;
        CHECK(quant_qtensor_from_f32(f, rows, cols, w, &W, NULL) == 0, "quantize %s", quant_fmt_name(f));
        quant_dequant_rows(&W, 0, rows, out);
        int bad = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                double x = w[r * cols + c], y = out[r * cols + c], bound;
                if (f == QUANT_F32) bound = 0;
                else if (f == QUANT_BF16) bound = fabs(x) * 0x1p-8;
                else if (f == QUANT_F16) bound = fmax(fabs(x) * 0x1p-11, 0x1p-25);
                else if (f == QUANT_FP8B) {
                    double s = W.scales[(r / 128) * 2 + c / 128];
                    bound = fmax(fabs(x) * 0x1p-4, s * 0x1p-10) * 1.0001;
                } else if (f == QUANT_MXFP4) {
                    /* scale 2^(floor(log2 amax) - 2); half the e2m1 step at
                     * |x|/scale, or the excess over 6 that saturates */
                    double amax = 0;
                    for (int k = c / 32 * 32; k < c / 32 * 32 + 32 && k < cols; k++)
                        amax = fmax(amax, fabs(w[r * cols + k]));
                    double s = amax > 0 ? ldexp(1.0, ilogb(amax) - 2) : 0, v = s > 0 ? fabs(x) / s : 0;
                    bound = v > 6 ? (v - 6) * s : (v < 2 ? 0.25 : v < 4 ? 0.5 : 1.0) * s;
                    bound = bound * 1.0001 + 1e-30;
                } else {
                    /* scale = amax/qmax of the row or group, error <= s/2 */
                    int g = group_of(f, cols), qmax = f == QUANT_Q8 ? 127 : 7;
                    double amax = 0;
                    for (int k = c / g * g; k < c / g * g + g && k < cols; k++) amax = fmax(amax, fabs(w[r * cols + k]));
                    double s = amax / qmax;
                    bound = s / 2 * 1.0001 + 1e-12;
                }
                if (fabs(x - y) > bound && bad++ < 5)
                    CHECK(0, "%s (%d,%d): %.9g -> %.9g, bound %g", quant_fmt_name(f), r, c, x, y, bound);
                if (r == 5 && y != 0.0) bad++;
            }
        CHECK(bad == 0, "%s: %d elements out of bounds", quant_fmt_name(f), bad);
        quant_qtensor_free(&W);
    }
    free(out);
    free(w);
}

/* A tensor for kernel tests: quantized from random f32, or (raw = 1) random
 * bytes and scales wrapped as is, so every nibble / code value occurs,
 * the extremes included. The caller frees *mem and *smem when wrapped. */
static void make_tensor(int f, int rows, int cols, int raw, struct qtensor *W, void **mem, void **smem)
{
    *mem = NULL;
    *smem = NULL;
    if (!raw || f == QUANT_F32 || f == QUANT_BF16 || f == QUANT_F16) {
        float *w = rand_vec((size_t)rows * cols, 1.0f);
        CHECK(quant_qtensor_from_f32(f, rows, cols, w, W, NULL) == 0, "make");
        free(w);
        return;
    }
    size_t nd = quant_fmt_data_bytes(f, rows, cols), ns = quant_fmt_scale_count(f, rows, cols);
    uint8_t *d = malloc(nd);
    float *s = malloc(ns * sizeof *s);
    for (size_t i = 0; i < nd; i++) {
        d[i] = (uint8_t)rnd();
        if (f == QUANT_FP8B && (d[i] & 0x7F) == 0x7F) d[i] ^= 1;    /* no NaN codes */
        if (f == QUANT_Q8 && d[i] == 0x80) d[i] = 0x81;               /* q8 codes are in [-127, 127] */
    }
    if (is_int4(f))                                                  /* padding nibbles = 0x8 */
        for (int r = 0; r < rows; r++)
            for (int c = cols; c < (int)(quant_fmt_row_bytes(f, cols) * 2); c++) {
                uint8_t *b = d + r * quant_fmt_row_bytes(f, cols) + (c / 128) * 64 + (c % 128) % 64;
                *b = (c % 128) < 64 ? (uint8_t)((*b & 0xF0) | 8) : (uint8_t)((*b & 0x0F) | 0x80);
            }
    for (size_t i = 0; i < ns; i++) s[i] = (0.01f + (float)(rnd() % 1000) * 1e-4f) * ((i % 7 == 3) ? 0.0f : 1.0f);
    if (quant_fmt_traits(f)->scale_e8m0)                            /* 2^-27 .. 2^0, no NaN */
        for (size_t i = 0; i < ns; i++) ((uint8_t *)s)[i] = (uint8_t)(100 + rnd() % 28);
    CHECK(quant_qtensor_wrap_raw(f, rows, cols, d, nd, s, quant_fmt_scale_bytes(f, rows, cols), W, NULL) == 0,
          "wrap raw");
    *mem = d;
    *smem = s;
}

/* Each output of each level against the double-precision reference, with the
 * bound the level documents (qtensor.h). */
static int check_product(const struct qtensor *W, const float *X, int n, const float *Y,
                         int int8_act, const char *what)
{
    int rows = W->rows, cols = W->cols, bad = 0;
    float *wr = malloc((size_t)cols * sizeof *wr);
    for (int r = 0; r < rows; r++) {
        quant_dequant_rows(W, r, 1, wr);
        for (int j = 0; j < n; j++) {
            const float *x = X + (size_t)j * cols;
            double ref = 0, mag = 0, actb = 0;
            for (int c = 0; c < cols; c++) {
                ref += (double)wr[c] * x[c];
                mag += fabs((double)wr[c] * x[c]);
            }
            if (int8_act) {
                /* activation rounding: half a step of each block */
                for (int b = 0; b * 32 < cols; b++) {
                    double amax = 0, sw = 0;
                    for (int c = b * 32; c < cols && c < b * 32 + 32; c++) {
                        amax = fmax(amax, fabs(x[c]));
                        sw += fabs(wr[c]);
                    }
                    actb += sw * amax / 254;
                }
                /* the offset (8 or 128 steps) is removed in f32: its rounding
                 * (mxfp4 has none: its weights are signed) */
                double ofs = W->fmt == QUANT_Q8 ? 128 : 8;
                for (int c = 0; c < cols && W->fmt != QUANT_MXFP4; c++)
                    mag += ofs * W->scales[quant_fmt_scale_index(W->fmt, rows, cols, r, c)] * fabs(x[c]);
            }
            double tol = 1e-5 * mag + actb * 1.001 + 1e-30;
            double got = Y[(size_t)j * rows + r];
            if (!(fabs(got - ref) <= tol) && bad++ < 3)
                CHECK(0, "%s r=%d j=%d: %.9g vs %.9g (tol %g, sum|terms| %g)", what, r, j, got, ref, tol, mag);
        }
    }
    free(wr);
    return bad;
}

static void test_kernels_vs_reference(void)
{
    static const int shapes[][2] = { { 1, 1 }, { 3, 31 }, { 17, 100 }, { 33, 129 }, { 130, 200 },
                                     { 129, 257 }, { 20, 640 }, { 5, 1000 }, { 300, 448 },
                                     { 37, 2100 } };     /* prefill column blocks of 1024 + a tail */
    static const int batches[] = { 1, 3, 17 };
    int levels = 0;
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_available(isa)) continue;
        levels++;
        for (int fi = 0; fi < NFMT; fi++) {
            int f = ALL_FMTS[fi];
            int int8_act = quant_isa_table(isa)->k[f].act_int8;
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                int rows = shapes[si][0], cols = shapes[si][1];
                for (int raw = 0; raw < 2; raw++) {
                    struct qtensor W;
                    void *mem, *smem;
                    make_tensor(f, rows, cols, raw, &W, &mem, &smem);
                    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
                        int n = batches[bi];
                        float *X = rand_vec((size_t)n * cols, 3.0f);
                        if (cols > 40) for (int c = 0; c < 32; c++) X[c] = 0.0f;   /* an all-zero block */
                        float *Y = malloc((size_t)n * rows * sizeof *Y);
                        for (size_t k = 0; k < (size_t)n * rows; k++) Y[k] = NAN;
                        char what[96];
                        snprintf(what, sizeof what, "%s/%s [%d,%d] n=%d%s", quant_isa_name(isa),
                                 quant_fmt_name(f), rows, cols, n, raw ? " raw" : "");
                        CHECK(quant_matmul_isa(&W, X, n, Y, isa, NULL) == 0, "%s", what);
                        int bad = check_product(&W, X, n, Y, int8_act, what);
                        CHECK(bad == 0, "%s: %d outputs out of tolerance", what, bad);
                        free(X);
                        free(Y);
                    }
                    quant_qtensor_free(&W);
                    free(mem);
                    free(smem);
                }
            }
        }
    }
    CHECK(levels >= 1 && quant_isa_available(QUANT_ISA_SCALAR), "scalar always available");
    CHECK(quant_isa_available(quant_isa_best()), "best is available");
    printf("     levels tested: %d (best %s)\n", levels, quant_isa_name(quant_isa_best()));
}

/* matvec / matmul entry points agree with the forced best level, serially
 * and when called from inside an outer parallel region (one row slice of
 * work per thread, as a caller running experts in parallel would). */
static void test_entry_points_and_nesting(void)
{
    int rows = 300, cols = 1000, n = 4;
    float *w = rand_vec((size_t)rows * cols, 1.0f), *X = rand_vec((size_t)n * cols, 1.0f);
    float *Y0 = malloc((size_t)n * rows * sizeof *Y0), *Y1 = malloc((size_t)n * rows * sizeof *Y1);
    for (int fi = 0; fi < NFMT; fi++) {
        struct qtensor W;
        CHECK(quant_qtensor_from_f32(ALL_FMTS[fi], rows, cols, w, &W, NULL) == 0, "q");
        CHECK(quant_matmul_isa(&W, X, n, Y0, quant_isa_best(), NULL) == 0, "isa");
        CHECK(quant_matmul(&W, X, n, Y1, NULL, NULL) == 0, "matmul");
        CHECK(memcmp(Y0, Y1, (size_t)n * rows * sizeof *Y0) == 0, "%s matmul == best level", quant_fmt_name(W.fmt));
        memset(Y1, 0, (size_t)n * rows * sizeof *Y1);
        #pragma omp parallel for num_threads(2)
        for (int j = 0; j < n; j++) quant_matvec(&W, X + (size_t)j * cols, Y1 + (size_t)j * rows, NULL, NULL);
        /* matvec and matmul at one level give the same bits per output */
        CHECK(memcmp(Y0, Y1, (size_t)n * rows * sizeof *Y0) == 0, "%s matvec in parallel region", quant_fmt_name(W.fmt));
        /* the same at every level, one column at a time */
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_available(isa)) continue;
            CHECK(quant_matmul_isa(&W, X, n, Y0, isa, NULL) == 0, "isa");
            for (int j = 0; j < n; j++)
                CHECK(quant_matmul_isa(&W, X + (size_t)j * cols, 1, Y1 + (size_t)j * rows, isa, NULL) == 0, "1");
            CHECK(memcmp(Y0, Y1, (size_t)n * rows * sizeof *Y0) == 0, "%s/%s: batch of %d differs from one at a time",
                  quant_isa_name(isa), quant_fmt_name(W.fmt), n);
        }
        quant_qtensor_free(&W);
    }
    free(w); free(X); free(Y0); free(Y1);
}

/* Multiplies the n activations X at level isa in one batch (Y, filled with
 * NaN first) and one at a time (y: W->rows floats); returns how many
 * columns of the batch differ from their one-activation product. */
static int columns_unlike_matvec(const struct qtensor *W, const float *X, int n, int isa, float *Y, float *y)
{
    for (size_t k = 0; k < (size_t)n * W->rows; k++) Y[k] = NAN;
    CHECK(quant_matmul_isa(W, X, n, Y, isa, NULL) == 0, "matmul");
    int bad = 0;
    for (int j = 0; j < n; j++) {
        CHECK(quant_matmul_isa(W, X + (size_t)j * W->cols, 1, y, isa, NULL) == 0, "matvec");
        if (memcmp(y, Y + (size_t)j * W->rows, (size_t)W->rows * sizeof *y) != 0) bad++;
    }
    return bad;
}

/* Register tiles (rows x activations) and column blocks of the prefill
 * kernels: every column of a batch equals its own matvec bit for bit, at
 * every level, for a shape that is a multiple of no tile size (37 rows; 13
 * activations = 3 x 4 + 1; 2100 columns = 2 blocks of 1024 + 52, not a
 * multiple of 32), and for a batch of every tile width 1..4 alone. */
static void test_tiles_batch_invariant(void)
{
    int rows = 37, cols = 2100, n = 13;
    float *X = rand_vec((size_t)n * cols, 2.0f);
    float *Y = malloc((size_t)n * rows * sizeof *Y), *y = malloc((size_t)rows * sizeof *y);
    for (int fi = 0; fi < NFMT; fi++) {
        for (int raw = 0; raw < 2; raw++) {
            struct qtensor W;
            void *mem, *smem;
            make_tensor(ALL_FMTS[fi], rows, cols, raw, &W, &mem, &smem);
            for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
                if (!quant_isa_available(isa)) continue;
                for (int nb = 1; nb <= n; nb += nb < 4 ? 1 : n - 4) {
                    int bad = columns_unlike_matvec(&W, X, nb, isa, Y, y);
                    CHECK(bad == 0, "%s/%s%s n=%d: %d columns differ from their matvec", quant_isa_name(isa),
                          quant_fmt_name(W.fmt), raw ? " raw" : "", nb, bad);
                }
            }
            quant_qtensor_free(&W);
            free(mem);
            free(smem);
        }
    }
    free(X); free(Y); free(y);
}

/* x rounded to the nearest bf16, ties to even (finite x), as a float. */
static float bf16_nearest(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7FFFu + (u >> 16 & 1)) & 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* The opt-in bf16-activation product (bf16act.h): each output against the
 * double-precision product of the weights with the f32 activations, within
 * the documented bound; and, tighter, against the double product with the
 * activations rounded to bf16 here, within the accumulation's part of the
 * bound (d * 2^-24 * S: a dropped column or a misplaced pair, invisible
 * under the 2^-8 term, shows there); each column of a batch equal to its
 * own n = 1 call; other formats and bad batches refused by name. */
static void test_bf16act(void)
{
    struct colibri_err err = { 0 };
    struct qtensor Q;
    float *w = rand_vec(7 * 100, 1.0f), *x = rand_vec(100, 1.0f), y[7];
    CHECK(quant_qtensor_from_f32(QUANT_Q8, 7, 100, w, &Q, NULL) == 0, "q8");
    CHECK(quant_matmul_bf16act(&Q, x, 1, y, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "q8"),
          "q8 weights refused by name: %s", err.msg);
    quant_qtensor_free(&Q);
    free(w); free(x);
    if (!quant_bf16act_available()) {
        struct qtensor B;
        float *w2 = rand_vec(4 * 64, 1.0f), *x2 = rand_vec(64, 1.0f), y2[4];
        CHECK(quant_qtensor_from_f32(QUANT_BF16, 4, 64, w2, &B, NULL) == 0, "bf16");
        CHECK(quant_matmul_bf16act(&B, x2, 1, y2, &err) == COLIBRI_EUNSUPPORTED, "no AVX-512 BF16: refused");
        printf("     bf16act kernel NOT tested: this CPU lacks AVX-512 BF16\n");
        quant_qtensor_free(&B);
        free(w2); free(x2);
        return;
    }
    /* Each kernel where this machine has it: VDPBF16PS, then TDPBF16PS
     * tiles. The shapes cover partial row tiles (16 and 32 rows), rows
     * whose length is not a multiple of 32 columns or of the 128-column
     * chunk, and batches within one token tile (13) and over several tiles
     * and slices (70). */
    static const enum quant_bf16act_kernel kernels[] = { QUANT_BF16ACT_VDPBF16PS, QUANT_BF16ACT_AMX };
    static const char *kname[] = { "vdpbf16ps", "amx" };
    static const int shapes[][3] = { { 1, 1, 13 }, { 5, 31, 13 }, { 33, 129, 70 }, { 17, 1000, 13 },
                                     { 37, 2100, 70 }, { 70, 256, 70 } };
    for (int ki = 0; ki < 2; ki++) {
        enum quant_bf16act_kernel kern = kernels[ki];
        if (!quant_bf16act_kernel_available(kern)) {
            struct qtensor B;
            float *w2 = rand_vec(4 * 64, 1.0f), *x2 = rand_vec(64, 1.0f), y2[4];
            CHECK(quant_qtensor_from_f32(QUANT_BF16, 4, 64, w2, &B, NULL) == 0, "bf16");
            CHECK(quant_matmul_bf16act_kernel(&B, x2, 1, y2, kern, &err) == COLIBRI_EUNSUPPORTED,
                  "kernel %s missing: refused", kname[ki]);
            printf("     bf16act %s kernel NOT tested: not available here (%s)\n", kname[ki], err.msg);
            quant_qtensor_free(&B);
            free(w2); free(x2);
            continue;
        }
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int rows = shapes[si][0], cols = shapes[si][1], n = shapes[si][2];
            /* bf16act.h: the f32 addition chain of each output per kernel */
            int depth = kern == QUANT_BF16ACT_AMX ? 128 + (cols + 127) / 128 : 2 * ((cols + 31) / 32) + 4;
            float *wf = rand_vec((size_t)rows * cols, 1.0f), *X = rand_vec((size_t)n * cols, 3.0f);
            float *Y = malloc((size_t)n * rows * sizeof *Y), *y1 = malloc((size_t)rows * sizeof *y1);
            float *Yb = malloc((size_t)n * rows * sizeof *Yb), *wr = malloc((size_t)cols * sizeof *wr);
            struct qtensor W;
            CHECK(quant_qtensor_from_f32(QUANT_BF16, rows, cols, wf, &W, NULL) == 0, "bf16");
            CHECK(quant_matmul_bf16act_kernel(&W, X, 0, Y, kern, &err) == COLIBRI_EINVAL, "n = 0 refused");
            CHECK(quant_matmul_bf16act_kernel(&W, X, n, Y, kern, &err) == 0, "product: %s", err.msg);
            int bad = 0, bad_acc = 0, differ = 0;
            for (int r = 0; r < rows; r++) {
                quant_dequant_rows(&W, r, 1, wr);
                for (int j = 0; j < n; j++) {
                    double ref = 0, mag = 0, refb = 0, magb = 0;
                    for (int c = 0; c < cols; c++) {
                        float xv = X[(size_t)j * cols + c], xr = bf16_nearest(xv);
                        ref += (double)wr[c] * xv;
                        mag += fabs((double)wr[c] * xv);
                        refb += (double)wr[c] * xr;
                        magb += fabs((double)wr[c] * xr);
                    }
                    double got = Y[(size_t)j * rows + r], tol = (0x1p-8 + depth * 0x1p-24) * mag + 1e-30;
                    if (!(fabs(got - ref) <= tol) && bad++ < 3)
                        CHECK(0, "bf16act %s [%d,%d] r=%d j=%d: %.9g vs %.9g (tol %g)", kname[ki], rows, cols, r, j,
                              got, ref, tol);
                    double tol_acc = depth * 0x1p-24 * magb + 1e-30;
                    if (!(fabs(got - refb) <= tol_acc) && bad_acc++ < 3)
                        CHECK(0, "bf16act %s [%d,%d] r=%d j=%d: %.9g vs %.9g with bf16 activations (tol %g)",
                              kname[ki], rows, cols, r, j, got, refb, tol_acc);
                }
            }
            for (int j = 0; j < n; j++) {
                CHECK(quant_matmul_bf16act_kernel(&W, X + (size_t)j * cols, 1, y1, kern, &err) == 0, "n = 1");
                if (memcmp(y1, Y + (size_t)j * rows, (size_t)rows * sizeof *y1) != 0) differ++;
            }
            CHECK(bad == 0, "bf16act %s [%d,%d]: %d outputs out of tolerance", kname[ki], rows, cols, bad);
            CHECK(bad_acc == 0, "bf16act %s [%d,%d]: %d outputs out of the accumulation's tolerance", kname[ki], rows,
                  cols, bad_acc);
            CHECK(differ == 0, "bf16act %s [%d,%d]: %d of %d columns differ from n = 1", kname[ki], rows, cols,
                  differ, n);
            /* the default runs AMX where it can, else VDPBF16PS */
            enum quant_bf16act_kernel best = quant_bf16act_kernel_available(QUANT_BF16ACT_AMX) ? QUANT_BF16ACT_AMX
                                                                                             : QUANT_BF16ACT_VDPBF16PS;
            if (kern == best) {
                CHECK(quant_matmul_bf16act(&W, X, n, Yb, &err) == 0, "default product");
                CHECK(memcmp(Yb, Y, (size_t)n * rows * sizeof *Y) == 0, "bf16act default = %s kernel", kname[ki]);
            }
            quant_qtensor_free(&W);
            free(wf); free(X); free(Y); free(Yb); free(y1); free(wr);
        }
    }
}

static void test_zero_rows(void)
{
    int rows = 4, cols = 300;
    float *w = calloc((size_t)rows * cols, sizeof *w), x[300], y[4];
    for (int c = 0; c < cols; c++) x[c] = rndf();
    for (int fi = 0; fi < NFMT; fi++) {
        struct qtensor W;
        CHECK(quant_qtensor_from_f32(ALL_FMTS[fi], rows, cols, w, &W, NULL) == 0, "q");
        for (size_t i = 0; i < quant_fmt_scale_count(W.fmt, rows, cols) && !quant_fmt_traits(W.fmt)->scale_e8m0; i++)
            CHECK(W.scales[i] == 0.0f, "scale 0");
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_available(isa)) continue;
            y[0] = y[1] = y[2] = y[3] = NAN;
            quant_matmul_isa(&W, x, 1, y, isa, NULL);
            CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == 0, "%s/%s zero rows give 0",
                  quant_isa_name(isa), quant_fmt_name(W.fmt));
        }
        quant_qtensor_free(&W);
    }
    free(w);
}

static void test_act_prep(void)
{
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = rndf() * 5;
    for (int i = 32; i < 64; i++) x[i] = 0;
    int8_t q[128];
    float xs[4], xsum[4];
    float all = quant_act_prep_ref(x, 100, 128, q, xs, xsum, NULL);
    double tot = 0;
    for (int b = 0; b < 4; b++) {
        int sum = 0;
        for (int c = b * 32; c < b * 32 + 32; c++) {
            sum += q[c];
            if (c >= 100) CHECK(q[c] == 0, "padding zero");
            else CHECK(fabs(q[c] * (double)xs[b] - x[c]) <= xs[b] * 0.5001, "act rounding %d", c);
        }
        CHECK(fabsf(xsum[b] - xs[b] * sum) <= 1e-6f * fabsf(xs[b] * sum), "xsum");
        tot += xsum[b];
    }
    CHECK(xs[1] == 0.0f, "zero block scale 0");
    CHECK(fabs(all - tot) <= 1e-5 * fabs(tot) + 1e-6, "total");
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        const struct quant_isa_table *t = quant_isa_table(isa);
        if (!t) continue;
        int8_t q2[128];
        float xs2[4], xsum2[4];
        int32_t qs2[4], qs_ref[4];
        t->act_prep(x, 100, 128, q2, xs2, xsum2, qs2);
        CHECK(memcmp(q, q2, sizeof q) == 0 && memcmp(xs, xs2, sizeof xs) == 0,
              "%s act_prep matches the reference", quant_isa_name(isa));
        /* the block sums it writes are those of its q */
        for (int b = 0; b < 4; b++) {
            qs_ref[b] = 0;
            for (int c = 32 * b; c < 32 * b + 32; c++) qs_ref[b] += q2[c];
        }
        CHECK(memcmp(qs2, qs_ref, sizeof qs2) == 0, "%s act_prep block sums", quant_isa_name(isa));
    }
}

/* convert == from_f32 of the dequantized source, bit for bit, across slab
 * edges (rows not a multiple of 128) and from every source format. */
/* model_linear with a tensor marked act_bf16 (the opt-in --bf16-act): the
 * bf16-activation product bit for bit, for one row and for a batch (so a
 * batched row equals the row alone); unmarked, the default product bit for
 * bit. */
static void test_model_linear_bf16act(void)
{
    if (!quant_bf16act_available()) {
        printf("     model_linear bf16act NOT tested: this CPU lacks AVX-512 BF16\n");
        return;
    }
    const int rows = 45, cols = 300, n = 7;
    float *wf = rand_vec((size_t)rows * cols, 1.0f), *X = rand_vec((size_t)n * cols, 2.0f);
    float *Y = malloc((size_t)n * rows * sizeof *Y), *want = malloc((size_t)n * rows * sizeof *want);
    float *y1 = malloc((size_t)rows * sizeof *y1);
    struct qtensor W;
    CHECK(quant_qtensor_from_f32(QUANT_BF16, rows, cols, wf, &W, NULL) == 0 && W.act_bf16 == 0, "bf16, unmarked");
    CHECK(model_linear(&W, X, n, Y, NULL, NULL) == 0, "model_linear");
    CHECK(quant_matmul(&W, X, n, want, NULL, NULL) == 0, "quant_matmul");
    CHECK(memcmp(Y, want, (size_t)n * rows * sizeof *Y) == 0, "unmarked: the default product");
    W.act_bf16 = 1;
    CHECK(model_linear(&W, X, n, Y, NULL, NULL) == 0, "model_linear");
    CHECK(quant_matmul_bf16act(&W, X, n, want, NULL) == 0, "bf16act product");
    CHECK(memcmp(Y, want, (size_t)n * rows * sizeof *Y) == 0, "marked: the bf16-activation product");
    int differ = 0;
    for (int j = 0; j < n; j++) {
        CHECK(model_linear(&W, X + (size_t)j * cols, 1, y1, NULL, NULL) == 0, "model_linear");
        differ += memcmp(y1, Y + (size_t)j * rows, (size_t)rows * sizeof *y1) != 0;
    }
    CHECK(differ == 0, "marked: %d of %d batched rows differ from the row alone", differ, n);
    CHECK(quant_matmul(&W, X, n, want, NULL, NULL) == 0, "quant_matmul");
    CHECK(memcmp(Y, want, (size_t)n * rows * sizeof *Y) != 0, "marked: not the default product");
    quant_qtensor_free(&W);
    free(wf); free(X); free(Y); free(want); free(y1);
}

static void test_convert(void)
{
    int rows = 300, cols = 130;
    float *w = rand_vec((size_t)rows * cols, 1.0f), *d = malloc((size_t)rows * cols * sizeof *d);
    for (int si = 0; si < NFMT; si++) {
        struct qtensor S;
        CHECK(quant_qtensor_from_f32(ALL_FMTS[si], rows, cols, w, &S, NULL) == 0, "src");
        quant_dequant_rows(&S, 0, rows, d);
        for (int di = 0; di < NFMT; di++) {
            struct qtensor A, B;
            CHECK(quant_qtensor_convert(&S, ALL_FMTS[di], &A, NULL) == 0, "convert");
            CHECK(quant_qtensor_from_f32(ALL_FMTS[di], rows, cols, d, &B, NULL) == 0, "direct");
            CHECK(quant_qtensor_bytes(&A) == quant_qtensor_bytes(&B), "bytes");
            size_t ns = quant_fmt_scale_bytes(A.fmt, rows, cols);
            CHECK(memcmp(A.data, B.data, quant_fmt_data_bytes(A.fmt, rows, cols)) == 0 &&
                  (ns == 0 || memcmp(A.scales, B.scales, ns) == 0),
                  "%s -> %s differs from quantizing the dequantized source",
                  quant_fmt_name(S.fmt), quant_fmt_name(A.fmt));
            quant_qtensor_free(&A);
            quant_qtensor_free(&B);
        }
        quant_qtensor_free(&S);
    }
    CHECK(quant_qtensor_bytes(&(struct qtensor){ .fmt = QUANT_Q4G64, .rows = 2, .cols = 100 }) == 2 * 64 + 2 * 2 * 4,
          "q4g64 [2,100]: 2 rows of 64 bytes + 4 scales");
    free(w);
    free(d);
}

/* Batches larger than one activation slice (qtensor.h): every output
 * written, each equal to the matvec of its column, at every level. */
static void test_batch_slices(void)
{
    int rows = 9, cols = 7100, n = 1200;     /* slices: 288 f32 or 1168 int8 activations */
    float *w = rand_vec((size_t)rows * cols, 1.0f), *X = rand_vec((size_t)n * cols, 1.0f);
    float *Y = malloc((size_t)n * rows * sizeof *Y), y[9];
    static const int fmts[] = { QUANT_F32, QUANT_Q4G64, QUANT_FP8B, QUANT_Q8, QUANT_MXFP4 };
    for (int fi = 0; fi < 5; fi++) {
        struct qtensor W;
        CHECK(quant_qtensor_from_f32(fmts[fi], rows, cols, w, &W, NULL) == 0, "q");
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_available(isa)) continue;
            int bad = columns_unlike_matvec(&W, X, n, isa, Y, y);
            CHECK(bad == 0, "%s/%s: %d of %d batch columns differ from matvec", quant_isa_name(isa),
                  quant_fmt_name(W.fmt), bad, n);
        }
        quant_qtensor_free(&W);
    }
    free(w); free(X); free(Y);
}

/* The slice kernels (kernels.h quant_slice_fn) of the float formats and of
 * the AMX level's int8 formats: every column of a batch equals its matvec
 * bit for bit, at every level, over several row blocks of quant_slice_rows
 * (the last one partial), a batch that is no multiple of the activation
 * groups (8 lanes, 16 per tile), and both a one-chunk and a two-chunk
 * column tail (cols % 32 = 12, 20). */
static void test_slice_kernels_batch_invariant(void)
{
    static const int fmts[] = { QUANT_F32, QUANT_BF16, QUANT_F16, QUANT_FP8B,
                                QUANT_Q8, QUANT_Q4, QUANT_Q4G32, QUANT_Q4G64, QUANT_Q4G128, QUANT_MXFP4 };
    const int nfmts = (int)(sizeof fmts / sizeof fmts[0]);
    static const int colss[] = { 300, 1044 };
    for (size_t ci = 0; ci < sizeof colss / sizeof colss[0]; ci++) {
        int cols = colss[ci], rows = 2 * quant_slice_rows(cols) + 11, n = 21;
        float *w = rand_vec((size_t)rows * cols, 1.0f), *X = rand_vec((size_t)n * cols, 2.0f);
        float *Y = malloc((size_t)n * rows * sizeof *Y), *y = malloc((size_t)rows * sizeof *y);
        for (int fi = 0; fi < nfmts; fi++) {
            struct qtensor W;
            CHECK(quant_qtensor_from_f32(fmts[fi], rows, cols, w, &W, NULL) == 0, "q");
            for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
                if (!quant_isa_available(isa)) continue;
                int bad = columns_unlike_matvec(&W, X, n, isa, Y, y);
                CHECK(bad == 0, "%s/%s [%d,%d] n=%d: %d columns differ from their matvec", quant_isa_name(isa),
                      quant_fmt_name(W.fmt), rows, cols, n, bad);
            }
            quant_qtensor_free(&W);
        }
        free(w); free(X); free(Y); free(y);
    }
}

int main(void)
{
    RUN_TEST(test_sizes);
    RUN_TEST(test_int4_layout);
    RUN_TEST(test_q8_bf16_layout);
    RUN_TEST(test_dequant_levels);
    RUN_TEST(test_fp8b_layout);
    RUN_TEST(test_wrap_checks);
    RUN_TEST(test_roundtrip_bounds);
    RUN_TEST(test_act_prep);
    RUN_TEST(test_zero_rows);
    RUN_TEST(test_kernels_vs_reference);
    RUN_TEST(test_entry_points_and_nesting);
    RUN_TEST(test_tiles_batch_invariant);
    RUN_TEST(test_bf16act);
    RUN_TEST(test_model_linear_bf16act);
    RUN_TEST(test_convert);
    RUN_TEST(test_batch_slices);
    RUN_TEST(test_slice_kernels_batch_invariant);
    return CHECK_SUMMARY();
}
