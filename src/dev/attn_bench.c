/* dev/attn_bench.c - decode attention alone, per KV tier against f32 in the
 * same run (colibri bench --attn, build/bench/attn). */
#include "dev/attn_bench.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/util.h"
#include "kv/attend.h"
#include "kv/attn_kern.h"
#include "kv/cache.h"
#include "kv/codec.h"

#define MAXC KV_ATTN_BENCH_MAX_CTX
#define MAXH KV_ATTN_BENCH_MAX_HEADS

double kv_attn_bench_cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float kv_attn_bench_gauss(uint64_t *rng)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        *rng ^= *rng << 13; *rng ^= *rng >> 7; *rng ^= *rng << 17;
        u[k] = ((*rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    }
    return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

void kv_attn_bench_cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ') p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, n, "%s", p);
            }
            break;
        }
    fclose(f);
}

int kv_attn_bench(const struct kv_attn_bench_opts *o, FILE *table, FILE *progress, struct colibri_err *err)
{
    int threads = o->threads, r = o->r, dr = o->dr, nctx = o->n_ctx, nheads = o->n_heads;
    const int *ctx = o->ctx, *heads = o->heads;
    if (nctx < 1 || nctx > MAXC || nheads < 1 || nheads > MAXH)
        return base_err_set(err, COLIBRI_EINVAL, "attention bench: 1..%d contexts and 1..%d head counts", MAXC, MAXH);
    for (int k = 0; k < nctx; k++)
        if (ctx[k] < 1) return base_err_set(err, COLIBRI_EINVAL, "attention bench: context %d must be positive", ctx[k]);
    for (int k = 0; k < nheads; k++)
        if (heads[k] < 1) return base_err_set(err, COLIBRI_EINVAL, "attention bench: heads %d must be positive", heads[k]);
    int tlist[KV_TIER_COUNT], ntiers = 0, have_f32 = 0;
    if (!o->tiers) {
        for (int t = 0; t < KV_TIER_COUNT; t++) tlist[ntiers++] = t;
        have_f32 = 1;
    } else {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->tiers);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int t = kv_tier_from_name(tok);
            if (t < 0) return base_err_set(err, COLIBRI_EINVAL, "--tiers: unknown KV tier '%s'", tok);
            if (t == KV_TIER_F32) have_f32 = 1;
            if (ntiers < KV_TIER_COUNT) tlist[ntiers++] = t;
        }
    }
    if (!have_f32) {   /* f32 is the baseline of every ratio: run it first */
        memmove(tlist + 1, tlist, sizeof(int) * (ntiers < KV_TIER_COUNT ? ntiers : KV_TIER_COUNT - 1));
        tlist[0] = KV_TIER_F32;
        if (ntiers < KV_TIER_COUNT) ntiers++;
    }
    int maxT = 0, maxH = 0;
    for (int k = 0; k < nctx; k++) if (ctx[k] > maxT) maxT = ctx[k];
    for (int k = 0; k < nheads; k++) if (heads[k] > maxH) maxH = heads[k];
    if (threads > 0) omp_set_num_threads(threads);
    else threads = omp_get_max_threads();
    uint64_t rng = 88172645463325252ull;

    char cpu[256];
    kv_attn_bench_cpu_model(cpu, sizeof cpu);
    float *ql = malloc(sizeof(float) * maxH * r), *qr = malloc(sizeof(float) * maxH * (dr + 1));
    float *out = malloc(sizeof(float) * maxH * r), *lat = malloc(sizeof(float) * r);
    float *pe = malloc(sizeof(float) * (dr + 1));
    for (int i = 0; i < maxH * r; i++) ql[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < maxH * dr; i++) qr[i] = kv_attn_bench_gauss(&rng);
    enum { MAXV = 3 * KV_TIER_COUNT };
    double ms[MAXV][MAXH][MAXC];
    size_t rowb[MAXV];
    int vtier[MAXV], vint8[MAXV], nv = 0;   /* variants: a tier and a kv_int8_mode */
    struct kv_scratch *scs[3] = {0};
    for (int k = 0; k < 3; k++) {
        kv_scratch_new(threads, &scs[k], NULL);
        kv_scratch_set_int8(scs[k], k);
    }
    static const char *const mode_name[3] = {"", " (integer, 2-part query)", " (integer, int8 query)"};
    static const int mode_of_variant[3] = {KV_INT8_OFF, KV_INT8_QUERY16, KV_INT8_QUERY8};
    if (progress)
        fprintf(progress, "attn bench: %s, %d threads, kernels %s, r=%d dr=%d\n", cpu, threads,
                kv_kern_get()->name, r, dr);
    struct kv_cache *caches[KV_TIER_COUNT] = {0};
    for (int ti = 0; ti < ntiers; ti++) {
        struct colibri_err e = {0};
        if (kv_cache_new(tlist[ti], KV_ROPE_DEFAULT, 1, r, dr, maxT, &caches[ti], &e)) {
            for (int k = 0; k < ti; k++) kv_cache_free(caches[k]);
            for (int k = 0; k < 3; k++) kv_scratch_free(scs[k]);
            free(ql); free(qr); free(out); free(lat); free(pe);
            return base_err_set(err, e.code, "%s: %s", kv_tier_name(tlist[ti]), e.msg);
        }
        vtier[nv] = ti, vint8[nv] = 0, rowb[nv++] = kv_cache_row_bytes(caches[ti], 0);
        for (int k = 1; k < 3 && o->with_int8 && kv_attend_int8_applies(caches[ti]); k++) {
            if (k == 2 && tlist[ti] == KV_TIER_FP8) break;   /* fp8 has one integer form */
            vtier[nv] = ti, vint8[nv] = k, rowb[nv++] = kv_cache_row_bytes(caches[ti], 0);
        }
        for (int p = 0; p < maxT; p++) {
            for (int i = 0; i < r; i++) lat[i] = kv_attn_bench_gauss(&rng);
            for (int i = 0; i < dr; i++) pe[i] = kv_attn_bench_gauss(&rng);
            kv_cache_write(caches[ti], 0, p, lat, pe, NULL);
        }
    }
    /* Tiers take turns call by call, so a load change on a shared machine
     * hits every tier of a cell alike; each keeps its best time. */
    for (int hi = 0; hi < nheads; hi++)
        for (int ci = 0; ci < nctx; ci++) {
            const int H = heads[hi], T = ctx[ci];
            const float scale = 1.0f / sqrtf((float)(r + dr));
            double best[MAXV], t0 = base_now_sec();
            for (int v = 0; v < nv; v++) {
                best[v] = 1e30;
                kv_attend(caches[vtier[v]], 0, T, H, ql, qr, scale, out, scs[mode_of_variant[vint8[v]]], NULL);
            }
            int rounds = 0;
            while (rounds < 3 || base_now_sec() - t0 < o->min_time * nv) {
                for (int v = 0; v < nv; v++) {
                    double a = o->cpu_time ? kv_attn_bench_cpu_sec() : base_now_sec();
                    kv_attend(caches[vtier[v]], 0, T, H, ql, qr, scale, out, scs[mode_of_variant[vint8[v]]], NULL);
                    double d = (o->cpu_time ? kv_attn_bench_cpu_sec() : base_now_sec()) - a;
                    if (d < best[v]) best[v] = d;
                }
                rounds++;
            }
            for (int v = 0; v < nv && progress; v++)
                fprintf(progress, "  %-7s%-26s H=%3d T=%6d  %8.3f ms  x%.2f (%d rounds)\n",
                        kv_tier_name(tlist[vtier[v]]), mode_name[vint8[v]], H, T,
                        best[v] * 1e3, best[v] / best[0], rounds);
            for (int v = 0; v < nv; v++) ms[v][hi][ci] = best[v] * 1e3;
        }
    for (int ti = 0; ti < ntiers; ti++) kv_cache_free(caches[ti]);
    for (int k = 0; k < 3; k++) kv_scratch_free(scs[k]);

    /* the table */
    FILE *m = table;
    fprintf(m, "Machine: %s, %d threads (OpenMP), kv kernels: %s. r = %d, dr = %d, one layer, "
               "one token; %s, best of >= 3 calls and >= %.1f s per tier per cell, tiers "
               "interleaved call by call. Ratios are against f32 in the same run.\n\n", cpu, threads,
            kv_kern_get()->name, r, dr, o->cpu_time ? "process CPU time" : "wall-clock time", o->min_time);
    fprintf(m, "| tier | B/token/layer | bytes vs f32 |");
    for (int hi = 0; hi < nheads; hi++)
        for (int ci = 0; ci < nctx; ci++)
            if (ctx[ci] % 1024) fprintf(m, " H=%d T=%d ms (x f32) |", heads[hi], ctx[ci]);
            else fprintf(m, " H=%d T=%dk ms (x f32) |", heads[hi], ctx[ci] / 1024);
    fprintf(m, "\n|---|---|---|");
    for (int k = 0; k < nheads * nctx; k++) fprintf(m, "---|");
    fprintf(m, "\n");
    for (int v = 0; v < nv; v++) {
        fprintf(m, "| %s%s | %zu | %.3f |", kv_tier_name(tlist[vtier[v]]),
                tlist[vtier[v]] == KV_TIER_FP8 && vint8[v] ? " (integer, int16 query)" : mode_name[vint8[v]],
                rowb[v], (double)rowb[v] / rowb[0]);
        for (int hi = 0; hi < nheads; hi++)
            for (int ci = 0; ci < nctx; ci++)
                fprintf(m, " %.3f (%.2f) |", ms[v][hi][ci], ms[v][hi][ci] / ms[0][hi][ci]);
        fprintf(m, "\n");
    }
    free(ql); free(qr); free(out); free(lat); free(pe);
    return 0;
}
