/* cuda_bench.c - the CUDA backend's speed against the GPU's own bound, all in
 * one run (`make CUDA=1 bench-cuda`; tools/cuda_device_check.sh runs it):
 *
 *  - the bound: a device-to-device copy of 1 GiB, bytes read + written per
 *    second;
 *  - weights: one decode product (n = 1, and n = 4) per stored format at
 *    DeepSeek-V3 shapes, bytes of the matrix (data + scales) per second and
 *    that as a fraction of the copy's rate (issue 19's target: >= 0.70);
 *  - kv_b's two per-head products of the absorbed decode (bf16, fp8b,
 *    q4g64), bytes of kv_b per second;
 *  - attention: kv_attend's contract on the GPU per KV tier at 32k and 128k
 *    positions (128 heads, r = 512, dr = 64), time and cache bytes per
 *    second, and the time against bf16's at the same length (the target:
 *    every quantized tier <= 1.0 at 32k and < 1.0 at 128k).
 *
 * Times are wall clock over `reps` launches queued back to back after a
 * warm-up (each kernel is long next to a launch), with a synchronize at
 * both ends. Prints a markdown table; with --out FILE also writes it there.
 *   cuda_bench [--reps N] [--quick] [--out FILE]
 * --quick: smaller matrices and 32k only (a smoke run). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv/cache.h"
#include "model/backend.h"
#include "quant/format.h"
#include "quant/half.h"
#include "quant/qtensor.h"

struct bench {
    struct backend_dev *dev;
    int reps;
    FILE *out;
    uint64_t rng;
    double copy_gbs;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t rnd(struct bench *b)
{
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    return (uint32_t)(b->rng >> 11);
}

static void emit(struct bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct bench *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (b->out) {
        va_start(ap, fmt);
        vfprintf(b->out, fmt, ap);
        va_end(ap);
        fflush(b->out);
    }
}

static int die(const char *what, const struct colibri_err *err)
{
    fprintf(stderr, "cuda_bench: %s: %s\n", what, err->msg);
    return 1;
}

static int bench_copy(struct bench *b)
{
    struct colibri_err err = { 0 };
    const size_t bytes = (size_t)1 << 30;
    void *src = backend_alloc(b->dev, bytes, &err), *dst = src ? backend_alloc(b->dev, bytes, &err) : NULL;
    if (!dst) return die("copy buffers", &err);
    for (int i = 0; i < 2; i++) backend_copy(b->dev, dst, src, bytes, &err);
    if (backend_sync(b->dev, &err)) return die("copy", &err);
    double t0 = now_s();
    for (int i = 0; i < b->reps; i++) backend_copy(b->dev, dst, src, bytes, &err);
    if (backend_sync(b->dev, &err)) return die("copy", &err);
    double dt = (now_s() - t0) / b->reps;
    b->copy_gbs = 2.0 * (double)bytes / dt / 1e9;
    emit(b, "\n## Bound: device-to-device copy\n\n1 GiB, %d reps: %.1f us each, **%.0f GB/s** (read + write)\n",
         b->reps, dt * 1e6, b->copy_gbs);
    backend_free(b->dev, src);
    backend_free(b->dev, dst);
    return 0;
}

/* A [rows, cols] matrix of format f with random codes (finite values). */
static int make_matrix(struct bench *b, int f, int rows, int cols, struct qtensor *W, void **mem, float **smem)
{
    size_t nd = quant_fmt_data_bytes(f, rows, cols), ns = quant_fmt_scale_count(f, rows, cols);
    uint8_t *d = malloc(nd);
    float *s = malloc((ns ? ns : 1) * sizeof *s);
    if (!d || !s) return -1;
    if (f == QUANT_F32 || f == QUANT_BF16 || f == QUANT_F16) {
        for (size_t i = 0; i < nd / (f == QUANT_F32 ? 4 : 2); i++) {
            float v = ((float)(rnd(b) % 2001) - 1000.0f) * 1e-3f;
            if (f == QUANT_F32) memcpy(d + 4 * i, &v, 4);
            else {
                uint16_t h = f == QUANT_BF16 ? quant_f32_to_bf16(v) : quant_f32_to_f16(v);
                memcpy(d + 2 * i, &h, 2);
            }
        }
    } else {
        for (size_t i = 0; i < nd; i++) {
            d[i] = (uint8_t)rnd(b);
            if (f == QUANT_FP8B && (d[i] & 0x7F) == 0x7F) d[i] ^= 1;
        }
    }
    for (size_t i = 0; i < ns; i++) s[i] = 0.01f;
    *mem = d;
    *smem = s;
    return quant_qtensor_wrap(f, rows, cols, d, nd, ns ? s : NULL, ns, W, NULL);
}

static int bench_matvec(struct bench *b, int quick)
{
    static const int fmts[] = { QUANT_BF16, QUANT_Q8, QUANT_Q4, QUANT_Q4G32, QUANT_Q4G64, QUANT_Q4G128, QUANT_FP8B,
                                QUANT_F32 };
    /* DeepSeek-V3: an MLP's gate/up [18432, 7168] and down [7168, 18432] */
    static const int shapes[][2] = { { 18432, 7168 }, { 7168, 18432 } };
    emit(b, "\n## Weights: decode product\n\n| format | shape | n | bytes | us | GB/s | / copy |\n"
            "|---|---|---|---|---|---|---|\n");
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (int si = 0; si < (quick ? 1 : 2); si++) {
            int f = fmts[fi], rows = shapes[si][0] / (quick ? 4 : 1), cols = shapes[si][1];
            struct qtensor W;
            void *mem = NULL;
            float *smem = NULL;
            struct colibri_err err = { 0 };
            if (make_matrix(b, f, rows, cols, &W, &mem, &smem)) {
                fprintf(stderr, "cuda_bench: host memory for %s\n", quant_fmt_name(f));
                return 1;
            }
            struct backend_wmat *dw = NULL;
            if (backend_wmat_upload(b->dev, &W, &dw, &err)) return die("weights", &err);
            float *x = malloc((size_t)4 * cols * sizeof *x);
            for (int i = 0; i < 4 * cols; i++) x[i] = ((float)(rnd(b) % 2001) - 1000.0f) * 1e-3f;
            float *dx = backend_alloc(b->dev, (size_t)4 * cols * 4, &err);
            float *dy = dx ? backend_alloc(b->dev, (size_t)4 * rows * 4, &err) : NULL;
            if (!dy || backend_upload(b->dev, dx, x, (size_t)4 * cols * 4, &err)) return die("activations", &err);
            for (int n = 1; n <= 4; n += 3) {
                for (int i = 0; i < 3; i++) backend_matmul(b->dev, dw, dx, n, dy, &err);
                if (backend_sync(b->dev, &err)) return die("matmul", &err);
                double t0 = now_s();
                for (int i = 0; i < b->reps; i++) backend_matmul(b->dev, dw, dx, n, dy, &err);
                if (backend_sync(b->dev, &err)) return die("matmul", &err);
                double dt = (now_s() - t0) / b->reps, gbs = (double)backend_wmat_bytes(dw) / dt / 1e9;
                emit(b, "| %s | %dx%d | %d | %.0f MB | %.1f | %.0f | %.2f |\n", quant_fmt_name(f), rows, cols, n,
                     (double)backend_wmat_bytes(dw) / 1e6, dt * 1e6, gbs, gbs / b->copy_gbs);
            }
            backend_free(b->dev, dx);
            backend_free(b->dev, dy);
            backend_wmat_free(b->dev, dw);
            quant_qtensor_free(&W);
            free(mem);
            free(smem);
            free(x);
        }
    return 0;
}

/* kv_b's two products of the absorbed decode at DeepSeek-V3's widths (128
 * heads, dn = dv = 128, dr = 64, r = 512): one token, both products. */
static int bench_absorb(struct bench *b)
{
    static const int fmts[] = { QUANT_BF16, QUANT_FP8B, QUANT_Q4G64 };
    const int H = 128, dn = 128, dv = 128, dr = 64, r = 512;
    emit(b, "\n## kv_b: absorbed query (W_UK^T q) and output (W_UV o), one token\n\n| format | bytes | us | GB/s | "
            "/ copy |\n|---|---|---|---|---|\n");
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
        struct qtensor W;
        void *mem = NULL;
        float *smem = NULL;
        struct colibri_err err = { 0 };
        if (make_matrix(b, fmts[fi], H * (dn + dv), r, &W, &mem, &smem)) return 1;
        struct backend_wmat *dw = NULL;
        if (backend_wmat_upload(b->dev, &W, &dw, &err)) return die("kv_b", &err);
        float *dq = backend_alloc(b->dev, (size_t)H * (dn + dr) * 4, &err);
        float *dqa = backend_alloc(b->dev, (size_t)H * r * 4, &err), *dqpe = backend_alloc(b->dev, (size_t)H * dr * 4, &err);
        float *dout = backend_alloc(b->dev, (size_t)H * dv * 4, &err);
        if (!dq || !dqa || !dqpe || !dout) return die("absorb buffers", &err);
        /* the buffers' contents do not change the time; zeros are finite */
        float *z = calloc((size_t)H * r, sizeof *z);
        backend_upload(b->dev, dq, z, (size_t)H * (dn + dr) * 4, &err);
        backend_upload(b->dev, dqa, z, (size_t)H * r * 4, &err);
        free(z);
        for (int i = 0; i < 3; i++) {
            backend_absorb_q(b->dev, dw, H, dn, dv, dr, dq, dqa, dqpe, &err);
            backend_absorb_out(b->dev, dw, H, dn, dv, dqa, dout, &err);
        }
        if (backend_sync(b->dev, &err)) return die("absorb", &err);
        double t0 = now_s();
        for (int i = 0; i < b->reps; i++) {
            backend_absorb_q(b->dev, dw, H, dn, dv, dr, dq, dqa, dqpe, &err);
            backend_absorb_out(b->dev, dw, H, dn, dv, dqa, dout, &err);
        }
        if (backend_sync(b->dev, &err)) return die("absorb", &err);
        double dt = (now_s() - t0) / b->reps, gbs = (double)backend_wmat_bytes(dw) / dt / 1e9;
        emit(b, "| %s | %.1f MB | %.1f | %.0f | %.2f |\n", quant_fmt_name(fmts[fi]), (double)backend_wmat_bytes(dw) / 1e6,
             dt * 1e6, gbs, gbs / b->copy_gbs);
        backend_free(b->dev, dq), backend_free(b->dev, dqa), backend_free(b->dev, dqpe), backend_free(b->dev, dout);
        backend_wmat_free(b->dev, dw);
        quant_qtensor_free(&W);
        free(mem);
        free(smem);
    }
    return 0;
}

/* A one-layer cache of T rows: 1024 random rows encoded, then repeated. */
static struct kv_cache *make_cache(struct bench *b, int tier, int r, int dr, int T)
{
    struct kv_cache *c = NULL;
    struct colibri_err err = { 0 };
    if (kv_cache_new(tier, KV_ROPE_DEFAULT, 1, r, dr, T, &c, &err)) {
        fprintf(stderr, "cuda_bench: cache %s: %s\n", kv_tier_name(tier), err.msg);
        return NULL;
    }
    float lat[4096], pe[256];
    const int base = T < 1024 ? T : 1024;
    for (int p = 0; p < base; p++) {
        for (int i = 0; i < r; i++) lat[i] = ((float)(rnd(b) % 2001) - 1000.0f) * 1e-3f;
        for (int i = 0; i < dr; i++) pe[i] = ((float)(rnd(b) % 2001) - 1000.0f) * 1e-3f;
        kv_cache_write(c, 0, p, lat, pe, NULL);
    }
    const size_t rb = c->layer[0].row_bytes;
    for (int p = base; p < T; p++) memcpy(c->layer[0].data + (size_t)p * rb, c->layer[0].data + (size_t)(p % base) * rb, rb);
    return c;
}

static int bench_attend(struct bench *b, int quick)
{
    static const int tiers[] = { KV_TIER_BF16, KV_TIER_F32, KV_TIER_FP8, KV_TIER_INT8R, KV_TIER_Q4_0, KV_TIER_TQ4 };
    static const int lens[] = { 32768, 131072 };
    const int r = 512, dr = 64, H = 128;
    emit(b, "\n## Attention: decode, %d heads, r = %d, dr = %d\n\n| tier | T | row bytes | us | cache GB/s | "
            "/ copy | time / bf16 |\n|---|---|---|---|---|---|---|\n", H, r, dr);
    struct colibri_err err = { 0 };
    float *q = malloc((size_t)H * (r + dr) * sizeof *q);
    for (int i = 0; i < H * (r + dr); i++) q[i] = ((float)(rnd(b) % 2001) - 1000.0f) * 1e-3f;
    float *dq = backend_alloc(b->dev, (size_t)H * (r + dr) * 4, &err);
    float *dout = dq ? backend_alloc(b->dev, (size_t)H * r * 4, &err) : NULL;
    if (!dout || backend_upload(b->dev, dq, q, (size_t)H * (r + dr) * 4, &err)) return die("queries", &err);
    for (int li = 0; li < (quick ? 1 : 2); li++) {
        double bf16_dt = 0;
        for (size_t ti = 0; ti < sizeof tiers / sizeof tiers[0]; ti++) {
            int T = lens[li];
            struct kv_cache *c = make_cache(b, tiers[ti], r, dr, T);
            if (!c) return 1;
            struct backend_kv *kv = NULL;
            if (backend_kv_upload(b->dev, c, 0, T, &kv, &err)) return die("kv upload", &err);
            const float scale = 1.0f / sqrtf((float)(r + dr));
            for (int i = 0; i < 2; i++) backend_attend(b->dev, kv, T, H, dq, dq + (size_t)H * r, scale, dout, &err);
            if (backend_sync(b->dev, &err)) return die("attend", &err);
            double t0 = now_s();
            for (int i = 0; i < b->reps; i++)
                backend_attend(b->dev, kv, T, H, dq, dq + (size_t)H * r, scale, dout, &err);
            if (backend_sync(b->dev, &err)) return die("attend", &err);
            double dt = (now_s() - t0) / b->reps, bytes = (double)T * c->layer[0].row_bytes;
            if (tiers[ti] == KV_TIER_BF16) bf16_dt = dt;
            emit(b, "| %s | %d | %zu | %.1f | %.0f | %.2f | %.2f |\n", kv_tier_name(tiers[ti]), T, c->layer[0].row_bytes,
                 dt * 1e6, bytes / dt / 1e9, bytes / dt / 1e9 / b->copy_gbs, dt / bf16_dt);
            backend_kv_free(b->dev, kv);
            kv_cache_free(c);
        }
    }
    backend_free(b->dev, dq);
    backend_free(b->dev, dout);
    free(q);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench b = { .reps = 20, .rng = 0x9e3779b97f4a7c15ull };
    const char *out = NULL;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) b.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "usage: cuda_bench [--reps N] [--quick] [--out FILE] (unknown: %s)\n", argv[i]);
            return 2;
        }
    }
    if (b.reps < 1) b.reps = 1;
    char why[256] = "";
    if (backend_device_count(why, sizeof why) == 0) {
        printf("cuda_bench NOT run: no GPU (%s)\n", why);
        return 77;
    }
    struct colibri_err err = { 0 };
    if (backend_open(0, &b.dev, &err)) return die("device 0", &err);
    if (out && !(b.out = fopen(out, "w"))) {
        fprintf(stderr, "cuda_bench: cannot write %s\n", out);
        return 1;
    }
    emit(&b, "# CUDA backend benchmark\n\ndevice: %s; %d reps per timing%s\n", backend_name(b.dev), b.reps,
         quick ? "; --quick" : "");
    int rc = bench_copy(&b);
    if (!rc) rc = bench_matvec(&b, quick);
    if (!rc) rc = bench_absorb(&b);
    if (!rc) rc = bench_attend(&b, quick);
    backend_close(b.dev);
    if (b.out) fclose(b.out);
    return rc;
}
