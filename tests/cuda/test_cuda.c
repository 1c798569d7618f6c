/* test_cuda.c - `make CUDA=1 test-cuda`: every CUDA kernel against its CPU
 * kernel on a GPU, within the tolerances of tests/unit/cuda_check.h (relative
 * to the sum of the absolute terms): the weight product in every format over
 * odd shapes, partial groups and blocks, nibble extremes, all-zero rows and
 * batches across CU_NB; kv_b's two per-head products of the absorbed
 * attention (W_UK^T q, W_UV o); RMSNorm, RoPE, SwiGLU; attention in every tier the GPU
 * reads, at widths of DeepSeek-V3 and odd ones, over context lengths that
 * leave partial tiles and ranges.
 *
 * Without a GPU (no driver, or no device) it says plainly that the CUDA tests
 * were NOT run and exits 77: skipped, never passed. */
#include "check.h"
#include "cuda_check.h"

#include "model/backend.h"
#include "model/norm.h"
#include "model/rope.h"

static struct backend_dev *dev;
/* --small: only the small cases (for runs under compute-sanitizer, which is
 * 10-100x slower) */
static int small;

static float *up(const void *src, size_t bytes)
{
    struct colibri_err err = { 0 };
    void *p = backend_alloc(dev, bytes, &err);
    CHECK(p != NULL, "alloc %zu: %s", bytes, err.msg);
    if (p && src) CHECK(backend_upload(dev, p, src, bytes, &err) == 0, "upload: %s", err.msg);
    return p;
}

static int down(void *dst, const void *dsrc, size_t bytes)
{
    struct colibri_err err = { 0 };
    int rc = backend_download(dev, dst, dsrc, bytes, &err);
    CHECK(rc == 0, "download (or a kernel before it): %s", err.msg);
    return rc;
}

static const int FMTS[] = { QUANT_F32, QUANT_BF16, QUANT_F16, QUANT_Q8, QUANT_Q4, QUANT_Q4G32, QUANT_Q4G64,
                            QUANT_Q4G128, QUANT_FP8B };

static void test_matmul(void)
{
    static const int shapes[][2] = { { 1, 1 }, { 3, 31 }, { 17, 100 }, { 33, 129 }, { 130, 200 }, { 129, 257 },
                                     { 5, 1000 }, { 40, 256 }, { 7, 1024 }, { 131, 384 }, { 300, 7168 },
                                     { 2048, 512 } };
    static const int batches[] = { 1, 3, 4, 6 };
    struct cc_rng g = { 0xc0ffeeull };
    double worst_all = 0;
    const size_t nshapes = small ? 6 : sizeof shapes / sizeof shapes[0];
    for (size_t fi = 0; fi < sizeof FMTS / sizeof FMTS[0]; fi++)
        for (size_t si = 0; si < nshapes; si++)
            for (int raw = 0; raw < 2; raw++) {
                int f = FMTS[fi], rows = shapes[si][0], cols = shapes[si][1];
                struct qtensor W;
                void *mem;
                float *smem;
                cc_tensor(&g, f, rows, cols, raw, &W, &mem, &smem);
                struct backend_wmat *dw = NULL;
                struct colibri_err err = { 0 };
                CHECK(backend_wmat_upload(dev, &W, &dw, &err) == 0, "upload %s: %s", quant_fmt_name(f), err.msg);
                for (size_t bi = 0; dw && bi < sizeof batches / sizeof batches[0]; bi++) {
                    int n = batches[bi];
                    float *X = cc_vec(&g, (size_t)n * cols, 3.0f);
                    if (cols > 40) memset(X, 0, 32 * sizeof *X);
                    float *Y = malloc((size_t)n * rows * sizeof *Y), *ref = malloc((size_t)n * rows * sizeof *ref);
                    double *mag = malloc((size_t)n * rows * sizeof *mag), worst = 0;
                    cc_ref_product(&W, X, n, ref, mag);
                    float *dX = up(X, (size_t)n * cols * sizeof *X), *dY = up(NULL, (size_t)n * rows * sizeof *Y);
                    CHECK(backend_matmul(dev, dw, dX, n, dY, &err) == 0, "matmul: %s", err.msg);
                    if (down(Y, dY, (size_t)n * rows * sizeof *Y) == 0) {
                        char what[96];
                        snprintf(what, sizeof what, "%s [%d,%d] n=%d%s", quant_fmt_name(f), rows, cols, n,
                                 raw ? " raw" : "");
                        int bad = cc_tol_check(Y, ref, mag, (size_t)n * rows, CC_TOL_MATVEC, what, &worst);
                        CHECK(bad == 0, "%s: %d outputs out of tolerance", what, bad);
                        if (worst > worst_all) worst_all = worst;
                    }
                    backend_free(dev, dX);
                    backend_free(dev, dY);
                    free(X);
                    free(Y);
                    free(ref);
                    free(mag);
                }
                backend_wmat_free(dev, dw);
                quant_qtensor_free(&W);
                free(mem);
                free(smem);
            }
    printf("     matmul: largest error %.3g of the tolerance (%g x sum|terms|)\n", worst_all, CC_TOL_MATVEC);
}

/* kv_b's products of the absorbed decode against model/mla.c's loops. */
static void test_absorb(void)
{
    struct cc_rng g = { 0xab50ull };
    /* (H, dn, dv, dr, r): DeepSeek-V3 (128 heads); odd widths, r % 4 != 0 */
    static const int cases[][5] = { { 128, 128, 128, 64, 512 }, { 3, 16, 24, 8, 64 }, { 2, 5, 7, 0, 37 } };
    for (size_t fi = 0; fi < sizeof FMTS / sizeof FMTS[0]; fi++)
        for (int ci = small ? 1 : 0; ci < 3; ci++) {
            int f = FMTS[fi], H = cases[ci][0], dn = cases[ci][1], dv = cases[ci][2], dr = cases[ci][3], r = cases[ci][4];
            struct qtensor W;
            void *mem;
            float *smem;
            cc_tensor(&g, f, H * (dn + dv), r, ci == 1, &W, &mem, &smem);
            float *q = cc_vec(&g, (size_t)H * (dn + dr), 2.0f), *lat = cc_vec(&g, (size_t)H * r, 2.0f);
            float *qa = malloc((size_t)H * r * 4), *qa_ref = malloc((size_t)H * r * 4);
            float *qpe = malloc((size_t)H * (dr + 1) * 4), *qpe_ref = malloc((size_t)H * (dr + 1) * 4);
            float *out = malloc((size_t)H * dv * 4), *out_ref = malloc((size_t)H * dv * 4);
            double *mq = malloc((size_t)H * r * sizeof *mq), *mo = malloc((size_t)H * dv * sizeof *mo);
            cc_ref_absorb(&W, H, dn, dv, dr, q, qa_ref, qpe_ref, mq, lat, out_ref, mo);
            struct backend_wmat *dw = NULL;
            struct colibri_err err = { 0 };
            CHECK(backend_wmat_upload(dev, &W, &dw, &err) == 0, "upload: %s", err.msg);
            float *dq = up(q, (size_t)H * (dn + dr) * 4), *dlat = up(lat, (size_t)H * r * 4);
            float *dqa = up(NULL, (size_t)H * r * 4), *dqpe = dr ? up(NULL, (size_t)H * dr * 4) : NULL;
            float *dout = up(NULL, (size_t)H * dv * 4);
            char what[80];
            snprintf(what, sizeof what, "absorb %s H=%d dn=%d dv=%d r=%d", quant_fmt_name(f), H, dn, dv, r);
            if (dw) {
                CHECK(backend_absorb_q(dev, dw, H, dn, dv, dr, dq, dqa, dqpe, &err) == 0, "%s: %s", what, err.msg);
                CHECK(backend_absorb_out(dev, dw, H, dn, dv, dlat, dout, &err) == 0, "%s: %s", what, err.msg);
                if (!down(qa, dqa, (size_t)H * r * 4))
                    CHECK(cc_tol_check(qa, qa_ref, mq, (size_t)H * r, CC_TOL_MATVEC, what, NULL) == 0, "%s: W_UK", what);
                if (dr && !down(qpe, dqpe, (size_t)H * dr * 4))
                    CHECK(memcmp(qpe, qpe_ref, (size_t)H * dr * 4) == 0, "%s: RoPE query copied", what);
                if (!down(out, dout, (size_t)H * dv * 4))
                    CHECK(cc_tol_check(out, out_ref, mo, (size_t)H * dv, CC_TOL_MATVEC, what, NULL) == 0, "%s: W_UV", what);
                CHECK(backend_absorb_out(dev, dw, H + 1, dn, dv, dlat, dout, &err) == COLIBRI_EINVAL,
                      "a head count that does not match kv_b's rows is refused");
            }
            backend_wmat_free(dev, dw);
            backend_free(dev, dq), backend_free(dev, dlat), backend_free(dev, dqa), backend_free(dev, dqpe);
            backend_free(dev, dout);
            free(q), free(lat), free(qa), free(qa_ref), free(qpe), free(qpe_ref), free(out), free(out_ref), free(mq), free(mo);
            quant_qtensor_free(&W);
            free(mem);
            free(smem);
        }
}

static void test_elementwise(void)
{
    struct cc_rng g = { 0xe1eull };
    struct colibri_err err = { 0 };
    const int n = 5, d = 7168 + 3;
    /* RMSNorm, in place and not */
    float *x = cc_vec(&g, (size_t)n * d, 4.0f), *w = cc_vec(&g, d, 2.0f), *y = malloc((size_t)n * d * sizeof *y);
    float *ref = malloc((size_t)n * d * sizeof *ref);
    double *mag = malloc((size_t)n * d * sizeof *mag);
    memset(x + d, 0, (size_t)d * sizeof *x);   /* an all-zero row: eps alone */
    model_rmsnorm(ref, x, w, n, d, 1e-6f);
    for (size_t i = 0; i < (size_t)n * d; i++) mag[i] = fabs(ref[i]);
    float *dx = up(x, (size_t)n * d * 4), *dw = up(w, (size_t)d * 4), *dy = up(NULL, (size_t)n * d * 4);
    CHECK(backend_rmsnorm(dev, dy, dx, dw, n, d, 1e-6f, &err) == 0, "rmsnorm: %s", err.msg);
    CHECK(backend_rmsnorm(dev, dx, dx, dw, n, d, 1e-6f, &err) == 0, "rmsnorm in place: %s", err.msg);
    if (!down(y, dy, (size_t)n * d * 4))
        CHECK(cc_tol_check(y, ref, mag, (size_t)n * d, CC_TOL_NORM, "rmsnorm", NULL) == 0, "rmsnorm");
    if (!down(y, dx, (size_t)n * d * 4))
        CHECK(cc_tol_check(y, ref, mag, (size_t)n * d, CC_TOL_NORM, "rmsnorm in place", NULL) == 0, "in place");
    backend_free(dev, dx);
    backend_free(dev, dw);
    backend_free(dev, dy);

    /* RoPE: 128 heads of a 192-wide query with the 64 RoPE values last, at
     * positions up to 160k (large angles) */
    struct model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    const int dr = 64, H = 128, ld = 192;
    for (int i = 0; i < dr / 2; i++) cfg.inv_freq[i] = powf(10000.0f, -2.0f * i / dr) * (i % 3 ? 1.0f : 0.25f);
    cfg.rope_attention_factor = 1.3f;
    float *q = cc_vec(&g, (size_t)H * ld, 2.0f), *qref = malloc((size_t)H * ld * sizeof *qref);
    int32_t *pos = malloc((size_t)H * sizeof *pos);
    double *qmag = malloc((size_t)H * ld * sizeof *qmag);
    memcpy(qref, q, (size_t)H * ld * sizeof *q);
    for (int h = 0; h < H; h++) {
        pos[h] = h * 1259 + (h % 2) * 3;
        model_rope_apply(qref + (size_t)h * ld + (ld - dr), dr, pos[h], &cfg);
        for (int i = 0; i < ld; i++) {
            /* |x0 cs| + |x1 sn|: the two terms of each rotated value */
            int j = i - (ld - dr);
            float a = q[(size_t)h * ld + i], b = j >= 0 ? q[(size_t)h * ld + (ld - dr) + (j ^ 1)] : 0.0f;
            qmag[(size_t)h * ld + i] = (fabs(a) + fabs(b)) * (j >= 0 ? cfg.rope_attention_factor : 1.0);
        }
    }
    float *dq = up(q, (size_t)H * ld * 4), *dfreq = up(cfg.inv_freq, (size_t)dr / 2 * 4);
    int32_t *dpos = (int32_t *)up(pos, (size_t)H * 4);
    CHECK(backend_rope(dev, dq + (ld - dr), H, dr, ld, dpos, dfreq, cfg.rope_attention_factor, &err) == 0, "rope: %s",
          err.msg);
    float *qgot = malloc((size_t)H * ld * sizeof *qgot);
    if (!down(qgot, dq, (size_t)H * ld * 4))
        CHECK(cc_tol_check(qgot, qref, qmag, (size_t)H * ld, CC_TOL_ELEM, "rope", NULL) == 0, "rope");
    backend_free(dev, dq);
    backend_free(dev, dfreq);
    backend_free(dev, dpos);

    /* SwiGLU: silu(g) * u, g over a wide range (expf overflow at -100) */
    const size_t m = 18432 * 3 + 1;
    float *gv = cc_vec(&g, m, 20.0f), *u = cc_vec(&g, m, 3.0f), *gref = malloc(m * sizeof *gref), *got = malloc(m * 4);
    double *gmag = malloc(m * sizeof *gmag);
    gv[0] = -100.0f;
    gv[1] = 0.0f;
    for (size_t i = 0; i < m; i++) {
        gref[i] = gv[i] / (1.0f + expf(-gv[i])) * u[i];   /* model/mlp.c's silu(g) * u */
        gmag[i] = fabs(gref[i]);
    }
    float *dg = up(gv, m * 4), *du = up(u, m * 4);
    CHECK(backend_swiglu(dev, dg, du, m, &err) == 0, "swiglu: %s", err.msg);
    if (!down(got, dg, m * 4)) CHECK(cc_tol_check(got, gref, gmag, m, CC_TOL_ELEM, "swiglu", NULL) == 0, "swiglu");
    backend_free(dev, dg);
    backend_free(dev, du);
    free(x), free(w), free(y), free(ref), free(mag), free(q), free(qref), free(pos), free(qmag), free(qgot);
    free(gv), free(u), free(gref), free(got), free(gmag);
}

static void test_attend(void)
{
    /* (r, dr, T, H): DeepSeek-V3's widths and head count; odd heads; a long
     * context (several ranges per group); T = 1 */
    static const int cases[][4] = { { 64, 16, 37, 17 }, { 128, 0, 70, 5 }, { 64, 16, 600, 20 }, { 512, 64, 1, 128 },
                                    { 512, 64, 300, 128 }, { 512, 64, 5000, 16 }, { 256, 32, 2049, 3 } };
    struct cc_rng g = { 0xa77e0dull };
    double worst_all = 0;
    const size_t ncases = small ? 4 : sizeof cases / sizeof cases[0];
    for (int ti = 0; ti < CC_N_KV_TIERS; ti++)
        for (size_t ci = 0; ci < ncases; ci++) {
            int t = cc_kv_tiers[ti], r = cases[ci][0], dr = cases[ci][1], T = cases[ci][2], H = cases[ci][3];
            struct kv_cache *c = cc_cache(&g, t, r, dr, T);
            CHECK(c != NULL, "cache %s r=%d dr=%d", kv_tier_name(t), r, dr);
            if (!c) continue;
            float *ql = cc_vec(&g, (size_t)H * r, 1.0f), *qp = cc_vec(&g, (size_t)H * (dr ? dr : 1), 1.0f);
            float *out = malloc((size_t)H * r * sizeof *out), *ref = malloc((size_t)H * r * sizeof *ref);
            double *mag = malloc((size_t)H * r * sizeof *mag), worst = 0;
            float scale = 2.0f / sqrtf((float)(r + dr));
            CHECK(cc_ref_attend(c, T, H, ql, dr ? qp : NULL, scale, ref, mag) == 0, "reference");
            struct backend_kv *kv = NULL;
            struct colibri_err err = { 0 };
            CHECK(backend_kv_upload(dev, c, 0, T, &kv, &err) == 0, "kv upload %s: %s", kv_tier_name(t), err.msg);
            float *dql = up(ql, (size_t)H * r * 4), *dqp = dr ? up(qp, (size_t)H * dr * 4) : NULL;
            float *dout = up(NULL, (size_t)H * r * 4);
            if (kv) CHECK(backend_attend(dev, kv, T, H, dql, dqp, scale, dout, &err) == 0, "attend: %s", err.msg);
            if (kv && !down(out, dout, (size_t)H * r * 4)) {
                char what[80];
                snprintf(what, sizeof what, "attend %s r=%d dr=%d T=%d H=%d", kv_tier_name(t), r, dr, T, H);
                int bad = cc_tol_check(out, ref, mag, (size_t)H * r, CC_TOL_ATTEND, what, &worst);
                CHECK(bad == 0, "%s: %d outputs out of tolerance", what, bad);
                if (worst > worst_all) worst_all = worst;
            }
            backend_kv_free(dev, kv);
            backend_free(dev, dql);
            backend_free(dev, dqp);
            backend_free(dev, dout);
            free(ql), free(qp), free(out), free(ref), free(mag);
            kv_cache_free(c);
        }
    printf("     attention: largest error %.3g of the tolerance (%g x the head's sum|terms|)\n", worst_all,
           CC_TOL_ATTEND);
}

static void test_refusals(void)
{
    struct kv_cache *c = NULL;
    struct backend_kv *kv = NULL;
    struct colibri_err err = { 0 };
    CHECK(kv_cache_new(KV_TIER_POLAR4, KV_ROPE_DEFAULT, 1, 64, 16, 4, &c, NULL) == 0, "polar4 cache");
    CHECK(backend_kv_upload(dev, c, 0, 4, &kv, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "polar4"),
          "polar4 refused by name: %s", err.msg);
    CHECK(backend_kv_upload(dev, c, 0, 5, &kv, &err) == COLIBRI_EINVAL, "more rows than the cache holds");
    kv_cache_free(c);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = 1;
        else {
            fprintf(stderr, "usage: test_cuda [--small] (unknown: %s)\n", argv[i]);
            return 2;
        }
    }
    char why[256] = "";
    if (backend_device_count(why, sizeof why) == 0) {
        printf("CUDA tests NOT run: no GPU (%s). This is a skip, not a pass.\n", why);
        return 77;
    }
    struct colibri_err err = { 0 };
    if (backend_open(0, &dev, &err)) {
        printf("FAIL opening device 0: %s\n", err.msg);
        return 1;
    }
    printf("device: %s%s\n", backend_name(dev), small ? " (--small: small cases only)" : "");
    RUN_TEST(test_matmul);
    RUN_TEST(test_absorb);
    RUN_TEST(test_elementwise);
    RUN_TEST(test_attend);
    RUN_TEST(test_refusals);
    backend_close(dev);
    return CHECK_SUMMARY();
}
