/* test_kv.c - kv rotation and codecs: the rotation inverts, widths that are
 * not powers of two are refused, every rotated tier's distortion on Gaussian
 * rows sits within +-3% of its anchor in docs/kvquant.md, zero rows
 * decode to zero, non-finite input stays contained, and the fast (AVX-512)
 * row decoders and attention kernels give the same bits as the scalar ones. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv/attn_kern.h"
#include "kv/cache.h"
#include "kv/codec.h"
#include "kv/codec_impl.h"
#include "kv/rotate.h"

static uint64_t rng_state = 0x1234567887654321ull;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static float gauss(void)
{
    return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()));
}

static void test_rotation_inverse(void)
{
    const int ns[] = {16, 32, 64, 128, 256, 512, 1024};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        int n = ns[k];
        for (int blk = n; blk >= 16 && blk >= n / 4; blk /= 2) {
            struct kv_rot r;
            CHECK(kv_rot_init(&r, n, blk, 42 + n, NULL) == 0, "init n=%d", n);
            float x[1024], y[1024];
            double nx = 0, ny = 0;
            for (int i = 0; i < n; i++) x[i] = y[i] = gauss();
            kv_rot_apply(&r, y);
            int differs = 0;
            for (int i = 0; i < n; i++) {
                nx += (double)x[i] * x[i];
                ny += (double)y[i] * y[i];
                differs += fabsf(x[i] - y[i]) > 1e-3f;
            }
            CHECK(differs > n / 4, "rotation changes the vector (n=%d)", n);
            CHECK_NEAR(ny, nx, 1e-5);   /* orthonormal */
            kv_rot_inverse(&r, y);
            float maxerr = 0;
            for (int i = 0; i < n; i++) maxerr = fmaxf(maxerr, fabsf(x[i] - y[i]));
            CHECK(maxerr < 1e-6f * 4, "inverse(apply(x)) = x: n=%d blk=%d err %g", n, blk, maxerr);
            /* the normalized Hadamard part alone is its own inverse */
            memcpy(y, x, n * sizeof *x);
            kv_fwht(y, n);
            kv_fwht(y, n);
            maxerr = 0;
            for (int i = 0; i < n; i++) maxerr = fmaxf(maxerr, fabsf(x[i] - y[i] / n));
            CHECK(maxerr < 1e-6f * 4, "H H / n = I: n=%d err %g", n, maxerr);
            kv_rot_free(&r);
        }
    }
}

static void test_rotation_refuses_other_widths(void)
{
    struct colibri_err err = {0};
    struct kv_rot r;
    CHECK(kv_rot_init(&r, 48, 48, 1, &err) == COLIBRI_EUNSUPPORTED, "48 refused");
    CHECK(strstr(err.msg, "48") != NULL, "message names the width: %s", err.msg);
    for (int t = 0; t < KV_TIER_COUNT; t++) {
        struct kv_codec c;
        memset(&err, 0, sizeof err);
        int rc = kv_codec_init(&c, t, 96, 1, &err);
        int rotated = t == KV_TIER_INT8R || t == KV_TIER_Q4_0 || t == KV_TIER_TQ4 ||
                      t == KV_TIER_TQ3 || t == KV_TIER_TQ2 || t == KV_TIER_POLAR4 ||
                      t == KV_TIER_POLAR3;
        if (rotated) {
            CHECK(rc == COLIBRI_EUNSUPPORTED, "%s refuses width 96", kv_tier_name(t));
            CHECK(strstr(err.msg, "96") && strstr(err.msg, kv_tier_name(t)),
                  "message names tier and width: %s", err.msg);
            CHECK(kv_tier_row_bytes(t, 96) == 0, "row_bytes 0 for a refused width");
        } else {
            CHECK(rc == 0, "%s takes width 96", kv_tier_name(t));
            kv_codec_free(&c);
        }
    }
    struct kv_cache *kc = NULL;
    memset(&err, 0, sizeof err);
    CHECK(kv_cache_new(KV_TIER_TQ4, KV_ROPE_DEFAULT, 2, 512, 48, 8, &kc, &err) ==
          COLIBRI_EUNSUPPORTED, "rope width 48 refused with int8 rope");
    CHECK(strstr(err.msg, "48") && strstr(err.msg, "rope"), "message: %s", err.msg);
    CHECK(kc == NULL, "no cache on failure");
}

struct anchor { enum kv_tier t; double relmse; };

/* kvquant.md sec. 2 "Simulated tiers" / sec. 6, Gaussian rows, n = 512. */
static const struct anchor ANCHORS[] = {
    {KV_TIER_FP8, 6.9e-4},   {KV_TIER_INT8R, 5.5e-5}, {KV_TIER_Q4_0, 7.36e-3},
    {KV_TIER_TQ4, 9.46e-3},  {KV_TIER_TQ3, 3.43e-2},  {KV_TIER_TQ2, 0.117},
    {KV_TIER_POLAR4, 7.6e-3}, {KV_TIER_POLAR3, 0.0356},
};

static void test_relmse_anchors(void)
{
    enum { N = 1500, D = 512 };
    float *x = malloc(sizeof(float) * N * D);
    for (int i = 0; i < N * D; i++) x[i] = gauss();
    uint8_t buf[4096];
    float y[D];
    for (size_t a = 0; a < sizeof ANCHORS / sizeof *ANCHORS; a++) {
        struct kv_codec c;
        CHECK(kv_codec_init(&c, ANCHORS[a].t, D, KV_SEED_LATENT, NULL) == 0, "init");
        double num = 0, numc = 0, den = 0;
        for (int r = 0; r < N; r++) {
            const float *xr = x + (size_t)r * D;
            kv_codec_encode(&c, xr, buf);
            kv_codec_decode(&c, buf, y);
            for (int i = 0; i < D; i++) {
                double e = xr[i] - y[i] / kv_codec_gain(&c), ec = xr[i] - y[i];
                num += e * e;
                numc += ec * ec;
                den += (double)xr[i] * xr[i];
            }
        }
        double rel = num / den, anchor = ANCHORS[a].relmse;
        printf("  %-7s bytes/row %4zu  bpe %.3f  relMSE %.4g (anchor %.4g, %+.1f%%)  as decoded %.4g\n",
               kv_tier_name(c.tier), c.row_bytes, 8.0 * c.row_bytes / D, rel, anchor,
               100 * (rel / anchor - 1), numc / den);
        CHECK(fabs(rel / anchor - 1) <= 0.03, "%s relMSE %.4g vs anchor %.4g",
              kv_tier_name(c.tier), rel, anchor);
        kv_codec_free(&c);
    }
    free(x);
}

/* The RoPE default for quantized tiers is int8 (cache.h): at the same bytes it
 * must be the more accurate of the two one-byte precisions on RoPE-width rows. */
static void test_rope_default_is_most_accurate_byte_format(void)
{
    enum { N = 3000, D = 64 };
    double rel[KV_ROPE_COUNT] = {0};
    size_t bytes[KV_ROPE_COUNT] = {0};
    for (int p = 0; p < KV_ROPE_COUNT; p++) {
        struct kv_codec c;
        CHECK(kv_codec_init(&c, kv_rope_tier(p), D, KV_SEED_ROPE, NULL) == 0, "rope codec");
        double num = 0, den = 0;
        float x[D], y[D];
        uint8_t buf[512];
        rng_state = 99;
        for (int r = 0; r < N; r++) {
            for (int i = 0; i < D; i++) x[i] = gauss();
            kv_codec_encode(&c, x, buf);
            kv_codec_decode(&c, buf, y);
            for (int i = 0; i < D; i++) {
                num += (double)(x[i] - y[i]) * (x[i] - y[i]);
                den += (double)x[i] * x[i];
            }
        }
        rel[p] = num / den;
        bytes[p] = c.row_bytes;
        printf("  rope %-4s  %3zu B at dr=%d  relMSE %.3g\n", kv_rope_name(p), c.row_bytes, D, rel[p]);
        kv_codec_free(&c);
    }
    CHECK(bytes[KV_ROPE_INT8] == bytes[KV_ROPE_FP8], "int8 and fp8 RoPE rows have the same size");
    CHECK(rel[KV_ROPE_INT8] < rel[KV_ROPE_FP8] / 4, "int8 RoPE (%.3g) well below fp8 (%.3g)",
          rel[KV_ROPE_INT8], rel[KV_ROPE_FP8]);
    CHECK(kv_rope_default(KV_TIER_TQ4) == KV_ROPE_INT8 && kv_rope_default(KV_TIER_F32) == KV_ROPE_F32,
          "defaults");
}

static void test_tq_codebook(void)
{
    /* kvquant.md sec. 2 Lloyd-Max table: MSE and positive levels */
    static const double mse[5] = {0, 0.3634, 0.1175, 0.03455, 0.009501};
    static const double lv3[4] = {0.2451, 0.7560, 1.3439, 2.1519};
    for (int b = 1; b <= 4; b++) {
        float level[16], thr[15];
        double D;
        kv_lloyd_max_gauss(b, level, thr, &D);
        CHECK(fabs(D - mse[b]) < 5e-4 * mse[b] + 1e-5, "b=%d D %.6g vs %.6g", b, D, mse[b]);
        if (b == 3)
            for (int k = 0; k < 4; k++) CHECK_NEAR(level[4 + k], lv3[k], 2e-4);
    }
}

static void test_zero_and_nonfinite_rows(void)
{
    const int dims[] = {16, 32, 64, 128, 512};
    for (int t = 0; t < KV_TIER_COUNT; t++)
        for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
            int d = dims[k];
            struct kv_codec c;
            if (kv_codec_init(&c, t, d, 7, NULL)) continue;   /* q4_0 needs 32 */
            float x[512] = {0}, y[512];
            uint8_t buf[4096];
            kv_codec_encode(&c, x, buf);
            kv_codec_decode(&c, buf, y);
            int nz = 0;
            for (int i = 0; i < d; i++) nz += y[i] != 0.0f;
            kv_codec_decode_rot(&c, buf, y);
            for (int i = 0; i < d; i++) nz += y[i] != 0.0f;
            CHECK(nz == 0, "%s d=%d zero row decodes to zero", kv_tier_name(t), d);
            if (t != KV_TIER_F32 && t != KV_TIER_BF16) {
                for (int i = 0; i < d; i++) x[i] = gauss();
                x[3] = NAN;
                x[5] = INFINITY;
                kv_codec_encode(&c, x, buf);
                kv_codec_decode(&c, buf, y);
                int bad = 0;
                for (int i = 0; i < d; i++) bad += !isfinite(y[i]);
                CHECK(bad == 0, "%s d=%d NaN/inf input decodes finite", kv_tier_name(t), d);
            }
            kv_codec_free(&c);
        }
}

static void test_fast_decoders_bit_exact(void)
{
    const struct kv_kern *k = kv_kern_get();
    printf("  kernels: %s\n", k->name);
    const int dims[] = {16, 32, 64, 128, 512};
    enum { N = 9 };
    for (int t = 0; t < KV_TIER_COUNT; t++)
        for (size_t j = 0; j < sizeof dims / sizeof *dims; j++) {
            int d = dims[j];
            struct kv_codec c;
            if (kv_codec_init(&c, t, d, 9, NULL)) continue;
            size_t stride = c.row_bytes + 3;   /* rows need no alignment */
            uint8_t *rows = calloc(N, stride);
            float x[512], *a = malloc(sizeof(float) * N * d), *b = malloc(sizeof(float) * N * d);
            for (int r = 0; r < N; r++) {
                for (int i = 0; i < d; i++) x[i] = r == 4 ? 0.0f : gauss() * (1 + r);
                kv_codec_encode(&c, x, rows + r * stride);
            }
            kv_codec_decode_rows(&c, rows, stride, N, a, d);
            for (int r = 0; r < N; r++) kv_codec_decode_rot(&c, rows + r * stride, b + (size_t)r * d);
            CHECK(memcmp(a, b, sizeof(float) * N * d) == 0, "%s d=%d fast rows == decode_rot",
                  kv_tier_name(t), d);
            free(rows);
            free(a);
            free(b);
            kv_codec_free(&c);
        }
}

static void test_kernels_match_scalar(void)
{
    const struct kv_kern *f = kv_kern_get(), *s = kv_kern_scalar();
    enum { DA = 96, DB = 32, NR = 21, HP = 48, H = 37 };
    float *qa = malloc(sizeof(float) * DA * HP), *qb = malloc(sizeof(float) * DB * HP);
    float *a = malloc(sizeof(float) * NR * DA), *b = malloc(sizeof(float) * NR * DB);
    float o1[NR * HP], o2[NR * HP];
    for (int i = 0; i < DA * HP; i++) qa[i] = gauss();
    for (int i = 0; i < DB * HP; i++) qb[i] = gauss();
    for (int i = 0; i < NR * DA; i++) a[i] = gauss();
    for (int i = 0; i < NR * DB; i++) b[i] = gauss();
    f->scores(qa, DA, qb, DB, HP, a, DA, b, DB, NR, 0.3f, o1, HP);
    s->scores(qa, DA, qb, DB, HP, a, DA, b, DB, NR, 0.3f, o2, HP);
    CHECK(memcmp(o1, o2, sizeof o1) == 0, "scores bit-exact");
    float m1[HP], m2[HP], s1[HP] = {0}, s2[HP] = {0};
    for (int h = 0; h < HP; h++) m1[h] = m2[h] = -INFINITY;
    f->colmax(o1, HP, HP, NR, m1);
    s->colmax(o2, HP, HP, NR, m2);
    CHECK(memcmp(m1, m2, sizeof m1) == 0, "colmax bit-exact");
    for (int i = 0; i < NR * HP; i++) o1[i] = o2[i] = (float)(-100 + 101 * urand());
    o1[5] = o2[5] = NAN;
    for (int h = 0; h < HP; h++) m1[h] = m2[h] = 0;
    f->expsum(o1, HP, m1, HP, NR, o1, s1);
    s->expsum(o2, HP, m2, HP, NR, o2, s2);
    CHECK(memcmp(o1, o2, sizeof o1) == 0 && memcmp(s1, s2, sizeof s1) == 0, "expsum bit-exact");
    float acc1[H * DA], acc2[H * DA];
    for (int i = 0; i < H * DA; i++) acc1[i] = acc2[i] = gauss();
    f->accum(o1, HP, H, a, DA, 16, DA, NR, acc1, DA);
    s->accum(o2, HP, H, a, DA, 16, DA, NR, acc2, DA);
    CHECK(memcmp(acc1, acc2, sizeof acc1) == 0, "accum bit-exact");
    /* kv_expf against libm */
    double worst = 0;
    for (int i = 0; i <= 100000; i++) {
        float xx = -87.0f * i / 100000;
        double e = kv_expf(xx), ref = exp((double)xx);
        worst = fmax(worst, fabs(e - ref) / ref);
    }
    CHECK(worst < 4e-7, "kv_expf rel err %g", worst);
    CHECK(kv_expf(-1000.0f) == 0.0f && kv_expf(0.0f) == 1.0f, "exp edge cases");
    free(qa);
    free(qb);
    free(a);
    free(b);
}

static void test_names(void)
{
    for (int t = 0; t < KV_TIER_COUNT; t++)
        CHECK(kv_tier_from_name(kv_tier_name(t)) == t, "tier name round trip %d", t);
    for (int p = 0; p < KV_ROPE_COUNT; p++)
        CHECK(kv_rope_from_name(kv_rope_name(p)) == p, "rope name round trip %d", p);
    CHECK(kv_tier_from_name("q5_k") == -1 && kv_rope_from_name("fp4") == -1, "unknown names");
}

int main(void)
{
    RUN_TEST(test_rotation_inverse);
    RUN_TEST(test_rotation_refuses_other_widths);
    RUN_TEST(test_tq_codebook);
    RUN_TEST(test_relmse_anchors);
    RUN_TEST(test_rope_default_is_most_accurate_byte_format);
    RUN_TEST(test_zero_and_nonfinite_rows);
    RUN_TEST(test_fast_decoders_bit_exact);
    RUN_TEST(test_kernels_match_scalar);
    RUN_TEST(test_names);
    return CHECK_SUMMARY();
}
