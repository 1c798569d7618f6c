/* cuda_check.h - what the CUDA kernel tests share: the test data (weights in
 * every format, quantized or raw codes with nibble extremes and all-zero rows;
 * KV caches in every tier the GPU reads), the CPU references with the sum of
 * the absolute terms of each output, and the one comparison they all make:
 *
 *     |got - ref| <= rel * sum|terms|   (+ 1e-30; NaN is never within)
 *
 * Used by tests/unit/test_cuda_host.c (the CPU replay of the kernels, in
 * plain `make test`) and tests/cuda/test_cuda.c (the kernels on a GPU).
 * Header-only; include it from one .c file per test binary, after check.h. */
#ifndef COLIBRI_TEST_CUDA_CHECK_H
#define COLIBRI_TEST_CUDA_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/attend.h"
#include "kv/cache.h"
#include "quant/format.h"
#include "quant/qtensor.h"

/* Weights: both sides stay within 1e-5 sum|terms| of the exact product
 * (quant/qtensor.h), so they differ by at most twice that. */
#define CC_TOL_MATVEC 2e-5
/* Attention: relative to the head's largest sum_t p_t |x_t[i]| / sum_t p_t
 * (the output's own scale): f32 rounding of a few hundred terms in the
 * logits and of the rotation, far below any indexing error (O(1)). */
#define CC_TOL_ATTEND 1e-4
/* RoPE, SwiGLU: elementwise f32, a few roundings of each value's terms. */
#define CC_TOL_ELEM 1e-5
/* RMSNorm, relative to |y|: the f32 sum of d squares in two orders (random
 * rounding grows as sqrt(d) 2^-24, about 5e-6 at d = 7168; the worst case
 * d 2^-24 is 4e-4). */
#define CC_TOL_NORM 1e-4

struct cc_rng { uint64_t s; };

static inline uint32_t cc_rnd(struct cc_rng *g)
{
    g->s ^= g->s << 13;
    g->s ^= g->s >> 7;
    g->s ^= g->s << 17;
    return (uint32_t)(g->s >> 11);
}

/* uniform in [-a, a) */
static inline float cc_unif(struct cc_rng *g, float a) { return a * ((float)(cc_rnd(g) % 2000001u) / 1e6f - 1.0f); }

static inline float *cc_vec(struct cc_rng *g, size_t n, float a)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = cc_unif(g, a);
    return v;
}

static inline int cc_is_int4(int f) { return f == QUANT_Q4 || f == QUANT_Q4G32 || f == QUANT_Q4G64 || f == QUANT_Q4G128; }

/* A [rows, cols] matrix in format f. raw = 0: random weights quantized, row 1
 * (when rows > 2) all zero (scale 0). raw = 1 (scaled formats): random codes,
 * nibbles 0x0 and 0xF (-8 and +7) included, padding nibbles 0x8, every 7th
 * scale 0. *mem / *smem are what the caller frees after quant_qtensor_free. */
static inline void cc_tensor(struct cc_rng *g, int f, int rows, int cols, int raw, struct qtensor *W, void **mem,
                             float **smem)
{
    *mem = NULL;
    *smem = NULL;
    if (!raw || f == QUANT_F32 || f == QUANT_BF16 || f == QUANT_F16) {
        float *w = cc_vec(g, (size_t)rows * cols, 1.0f);
        if (rows > 2) memset(w + cols, 0, (size_t)cols * sizeof *w);
        quant_qtensor_from_f32(f, rows, cols, w, W, NULL);
        free(w);
        return;
    }
    size_t nd = quant_fmt_data_bytes(f, rows, cols), ns = quant_fmt_scale_count(f, rows, cols);
    size_t rb = quant_fmt_row_bytes(f, cols);
    uint8_t *d = malloc(nd);
    float *s = malloc(ns * sizeof *s);
    for (size_t i = 0; i < nd; i++) {
        d[i] = (uint8_t)cc_rnd(g);
        if (i % 13 == 0) d[i] = 0xF0;                                    /* nibble extremes: -8 / +7 */
        if (i % 17 == 0) d[i] = 0x0F;
        if (f == QUANT_FP8B && (d[i] & 0x7F) == 0x7F) d[i] ^= 1;       /* no NaN codes */
        if (f == QUANT_Q8 && d[i] == 0x80) d[i] = 0x81;                /* q8 codes are in [-127, 127] */
    }
    if (cc_is_int4(f))
        for (int r = 0; r < rows; r++)
            for (int c = cols; c < (int)(rb * 2); c++) {
                uint8_t *b = d + (size_t)r * rb + (c / 128) * 64 + (c % 128) % 64;
                *b = (c % 128) < 64 ? (uint8_t)((*b & 0xF0) | 8) : (uint8_t)((*b & 0x0F) | 0x80);
            }
    for (size_t i = 0; i < ns; i++) s[i] = (0.01f + (float)(cc_rnd(g) % 1000) * 1e-4f) * ((i % 7 == 3) ? 0.0f : 1.0f);
    quant_qtensor_wrap(f, rows, cols, d, nd, s, ns, W, NULL);
    *mem = d;
    *smem = s;
}

/* Y[j * rows + r] by the CPU's scalar reference kernel, and mag[same] =
 * sum_c |w_rc x_jc| in double from the dequantized weights. */
static inline int cc_ref_product(const struct qtensor *W, const float *X, int n, float *Y, double *mag)
{
    int rc = quant_matmul_isa(W, X, n, Y, QUANT_ISA_SCALAR, NULL);
    float *wr = malloc((size_t)W->cols * sizeof *wr);
    for (int r = 0; r < W->rows; r++) {
        quant_dequant_rows(W, r, 1, wr);
        for (int j = 0; j < n; j++) {
            double m = 0;
            for (int c = 0; c < W->cols; c++) m += fabs((double)wr[c] * X[(size_t)j * W->cols + c]);
            mag[(size_t)j * W->rows + r] = m;
        }
    }
    free(wr);
    return rc;
}

/* The comparison: how many of got[0..n) are outside rel * mag[i] of ref[i]
 * (the first three are printed with `what`). *worst gets the largest
 * |got - ref| / (rel * mag + 1e-30) seen (NaN counts as infinite). */
static inline int cc_tol_check(const float *got, const float *ref, const double *mag, size_t n, double rel,
                               const char *what, double *worst)
{
    int bad = 0;
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = rel * mag[i] + 1e-30, d = fabs((double)got[i] - (double)ref[i]);
        double ratio = d == d ? d / tol : INFINITY;
        if (ratio > w) w = ratio;
        if (!(d <= tol)) {
            if (bad < 3)
                fprintf(stderr, "  %s [%zu]: %.9g vs %.9g (tol %.3g, sum|terms| %.6g)\n", what, i, got[i], ref[i], tol,
                        mag[i]);
            bad++;
        }
    }
    if (worst) *worst = w;
    return bad;
}

/* The absorbed decode's kv_b products as model/mla.c's attend_absorbed
 * computes them (kv_b rows dequantized to f32, f32 sums in its order), with
 * sum|terms| per output in double: qa[H][r] (+ qpe[H][dr], copied) from
 * q[H][dn+dr]; out[H][dv] from lat[H][r]. */
static inline void cc_ref_absorb(const struct qtensor *kvb, int H, int dn, int dv, int dr, const float *q,
                                 float *qa, float *qpe, double *mag_qa, const float *lat, float *out, double *mag_out)
{
    const int r = kvb->cols, dkv = dn + dv;
    float *w = malloc((size_t)dkv * r * sizeof *w);
    for (int h = 0; h < H; h++) {
        quant_dequant_rows(kvb, h * dkv, dkv, w);
        const float *qn = q + (size_t)h * (dn + dr);
        for (int j = 0; j < r; j++) {
            float a = 0.0f;
            double m = 0;
            for (int i = 0; i < dn; i++) {
                a += qn[i] * w[(size_t)i * r + j];
                m += fabs((double)qn[i] * w[(size_t)i * r + j]);
            }
            qa[(size_t)h * r + j] = a;
            mag_qa[(size_t)h * r + j] = m;
        }
        for (int e = 0; e < dr; e++) qpe[(size_t)h * dr + e] = qn[dn + e];
        for (int k = 0; k < dv; k++) {
            float a = 0.0f;
            double m = 0;
            for (int j = 0; j < r; j++) {
                a += w[(size_t)(dn + k) * r + j] * lat[(size_t)h * r + j];
                m += fabs((double)w[(size_t)(dn + k) * r + j] * lat[(size_t)h * r + j]);
            }
            out[(size_t)h * dv + k] = a;
            mag_out[(size_t)h * dv + k] = m;
        }
    }
    free(w);
}

/* Tiers the GPU attention reads, and the widths each is tested at. */
static const int cc_kv_tiers[] = { KV_TIER_F32, KV_TIER_BF16, KV_TIER_FP8, KV_TIER_INT8R, KV_TIER_Q4_0,
                                   KV_TIER_TQ4, KV_TIER_TQ3, KV_TIER_TQ2 };
#define CC_N_KV_TIERS ((int)(sizeof cc_kv_tiers / sizeof cc_kv_tiers[0]))

/* A one-layer cache of tier t with T random rows (latent ~ N-ish(0, 1),
 * row 2 all zero when T > 3); NULL if the tier cannot take r / dr. */
static inline struct kv_cache *cc_cache(struct cc_rng *g, int t, int r, int dr, int T)
{
    struct kv_cache *c = NULL;
    if (kv_cache_new((enum kv_tier)t, KV_ROPE_DEFAULT, 1, r, dr, T, &c, NULL)) return NULL;
    float *lat = malloc((size_t)r * sizeof *lat), *pe = malloc((size_t)(dr ? dr : 1) * sizeof *pe);
    for (int p = 0; p < T; p++) {
        for (int i = 0; i < r; i++) lat[i] = p == 2 && T > 3 ? 0.0f : cc_unif(g, 1.5f);
        for (int i = 0; i < dr; i++) pe[i] = cc_unif(g, 1.5f);
        kv_cache_write(c, 0, p, lat, dr ? pe : NULL, NULL);
    }
    free(lat);
    free(pe);
    return c;
}

/* The CPU's kv_attend as the reference, and each head's scale for the
 * tolerance: mag[h * r + i] = max_i' sum_t p_t |x_t[i']| / sum_t p_t, with p
 * from the decoded rows in double. */
static inline int cc_ref_attend(const struct kv_cache *c, int T, int H, const float *q_lat, const float *q_rope,
                                float scale, float *out, double *mag)
{
    const int r = c->r, dr = c->dr;
    struct kv_scratch *s = NULL;
    int rc = kv_scratch_new(1, &s, NULL);
    if (!rc) rc = kv_attend(c, 0, T, H, q_lat, q_rope, scale, out, s, NULL);
    kv_scratch_free(s);
    float *lat = malloc((size_t)T * r * sizeof *lat), *pe = malloc((size_t)T * (dr ? dr : 1) * sizeof *pe);
    double *lg = malloc((size_t)T * sizeof *lg), *col = malloc((size_t)r * sizeof *col);
    kv_cache_read(c, 0, 0, T, lat, dr ? pe : NULL, NULL);
    for (int h = 0; h < H; h++) {
        double m = -INFINITY, sum = 0, best = 0;
        for (int t = 0; t < T; t++) {
            double a = 0;
            for (int i = 0; i < r; i++) a += (double)q_lat[(size_t)h * r + i] * lat[(size_t)t * r + i];
            for (int i = 0; i < dr; i++) a += (double)q_rope[(size_t)h * dr + i] * pe[(size_t)t * dr + i];
            lg[t] = a * scale;
            if (lg[t] > m) m = lg[t];
        }
        for (int i = 0; i < r; i++) col[i] = 0;
        for (int t = 0; t < T; t++) {
            double p = exp(lg[t] - m);
            sum += p;
            for (int i = 0; i < r; i++) col[i] += p * fabs(lat[(size_t)t * r + i]);
        }
        for (int i = 0; i < r; i++) best = fmax(best, col[i] / sum);
        for (int i = 0; i < r; i++) mag[(size_t)h * r + i] = best;
    }
    free(lat);
    free(pe);
    free(lg);
    free(col);
    return rc;
}

#endif
