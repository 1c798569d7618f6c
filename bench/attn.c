/* bench/attn.c - decode attention alone, per KV tier against f32 in the same
 * run: one kv_attend() call = one token, one layer. DeepSeek-V3 dims by
 * default (r = 512 latent + dr = 64 RoPE), contexts 1k/4k/8k/32k, 16 and 128
 * heads, 2 threads. Rows are i.i.d. Gaussian (the time does not depend on the
 * values). Prints a markdown table; --out FILE also writes it there with the
 * machine's CPU model.
 *
 *   build/bench/attn [--threads N] [--tiers f32,tq4,...] [--ctx 1024,8192]
 *                    [--heads 16,128] [--r 512] [--dr 64] [--min-time S] [--out FILE]
 *                    [--no-int8] [--cpu-time]
 * --cpu-time times calls by process CPU time instead of the wall clock (use it
 * with --threads 1 on a machine shared with other work).
 * Tiers with an integer form (fp8, int8r, q4_0, tq*) are also timed with the
 * opt-in integer dot-product consumer (kv_scratch_set_int8), with the
 * two-part and the plain int8 query.
 */
#include <math.h>
#include <time.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "kv/attend.h"
#include "kv/attn_kern.h"
#include "kv/cache.h"
#include "kv/codec.h"

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s) s++;
    }
    return n;
}

/* Process CPU seconds: with one thread this leaves out the time the thread
 * spends preempted, which on a shared machine dominates wall-clock minima. */
static double cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static float gauss(void)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        u[k] = ((rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    }
    return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static void cpu_model(char *buf, size_t n)
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

#define MAXC 8
#define MAXH 4

int main(int argc, char **argv)
{
    int threads = 2, r = 512, dr = 64, with_int8 = 1, use_cpu = 0;
    double min_time = 0.4;
    const char *tiers = "f32,bf16,fp8,int8r,q4_0,tq4,tq3,tq2,polar4,polar3", *out_path = NULL;
    int ctx[MAXC] = {1024, 4096, 8192, 32768}, nctx = 4, heads[MAXH] = {16, 128}, nheads = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--threads") && v) threads = atoi(v), i++;
        else if (!strcmp(a, "--tiers") && v) tiers = v, i++;
        else if (!strcmp(a, "--ctx") && v) nctx = parse_list(v, ctx, MAXC), i++;
        else if (!strcmp(a, "--heads") && v) nheads = parse_list(v, heads, MAXH), i++;
        else if (!strcmp(a, "--r") && v) r = atoi(v), i++;
        else if (!strcmp(a, "--dr") && v) dr = atoi(v), i++;
        else if (!strcmp(a, "--min-time") && v) min_time = atof(v), i++;
        else if (!strcmp(a, "--out") && v) out_path = v, i++;
        else if (!strcmp(a, "--no-int8")) with_int8 = 0;
        else if (!strcmp(a, "--cpu-time")) use_cpu = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--tiers a,b] [--ctx n,m] [--heads n,m] "
                            "[--r R] [--dr DR] [--min-time S] [--out FILE]\n", argv[0]);
            return 2;
        }
    }
    int tlist[KV_TIER_COUNT], ntiers = 0, have_f32 = 0;
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", tiers);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            int t = kv_tier_from_name(tok);
            if (t < 0) { fprintf(stderr, "unknown tier %s\n", tok); return 2; }
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
    omp_set_num_threads(threads);

    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    float *ql = malloc(sizeof(float) * maxH * r), *qr = malloc(sizeof(float) * maxH * (dr + 1));
    float *out = malloc(sizeof(float) * maxH * r), *lat = malloc(sizeof(float) * r);
    float *pe = malloc(sizeof(float) * (dr + 1));
    for (int i = 0; i < maxH * r; i++) ql[i] = gauss();
    for (int i = 0; i < maxH * dr; i++) qr[i] = gauss();
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
    fprintf(stderr, "attn bench: %s, %d threads, kernels %s, r=%d dr=%d\n", cpu, threads,
            kv_kern_get()->name, r, dr);
    struct kv_cache *caches[KV_TIER_COUNT] = {0};
    for (int ti = 0; ti < ntiers; ti++) {
        struct colibri_err err = {0};
        if (kv_cache_new(tlist[ti], KV_ROPE_DEFAULT, 1, r, dr, maxT, &caches[ti], &err)) {
            fprintf(stderr, "%s: %s\n", kv_tier_name(tlist[ti]), err.msg);
            return 1;
        }
        vtier[nv] = ti, vint8[nv] = 0, rowb[nv++] = kv_cache_row_bytes(caches[ti]);
        for (int k = 1; k < 3 && with_int8 && kv_attend_int8_applies(caches[ti]); k++) {
            if (k == 2 && tlist[ti] == KV_TIER_FP8) break;   /* fp8 has one integer form */
            vtier[nv] = ti, vint8[nv] = k, rowb[nv++] = kv_cache_row_bytes(caches[ti]);
        }
        for (int p = 0; p < maxT; p++) {
            for (int i = 0; i < r; i++) lat[i] = gauss();
            for (int i = 0; i < dr; i++) pe[i] = gauss();
            kv_cache_write(caches[ti], 0, p, lat, pe, NULL);
        }
    }
    /* Tiers take turns call by call, so a load change on a shared machine
     * hits every tier of a cell alike; each keeps its best time. */
    for (int hi = 0; hi < nheads; hi++)
        for (int ci = 0; ci < nctx; ci++) {
            const int H = heads[hi], T = ctx[ci];
            const float scale = 1.0f / sqrtf((float)(r + dr));
            double best[MAXV], t0 = now_sec();
            for (int v = 0; v < nv; v++) {
                best[v] = 1e30;
                kv_attend(caches[vtier[v]], 0, T, H, ql, qr, scale, out, scs[mode_of_variant[vint8[v]]], NULL);
            }
            int rounds = 0;
            while (rounds < 3 || now_sec() - t0 < min_time * nv) {
                for (int v = 0; v < nv; v++) {
                    double a = use_cpu ? cpu_sec() : now_sec();
                    kv_attend(caches[vtier[v]], 0, T, H, ql, qr, scale, out, scs[mode_of_variant[vint8[v]]], NULL);
                    double d = (use_cpu ? cpu_sec() : now_sec()) - a;
                    if (d < best[v]) best[v] = d;
                }
                rounds++;
            }
            for (int v = 0; v < nv; v++) {
                ms[v][hi][ci] = best[v] * 1e3;
                fprintf(stderr, "  %-7s%-26s H=%3d T=%6d  %8.3f ms  x%.2f (%d rounds)\n",
                        kv_tier_name(tlist[vtier[v]]), mode_name[vint8[v]], H, T,
                        best[v] * 1e3, best[v] / best[0], rounds);
            }
        }
    for (int ti = 0; ti < ntiers; ti++) kv_cache_free(caches[ti]);
    for (int k = 0; k < 3; k++) kv_scratch_free(scs[k]);

    /* the table */
    char *tab = NULL;
    size_t tabn = 0;
    FILE *m = open_memstream(&tab, &tabn);
    fprintf(m, "Machine: %s, %d threads (OpenMP), kv kernels: %s. r = %d, dr = %d, one layer, "
               "one token; %s, best of >= 3 calls and >= %.1f s per tier per cell, tiers "
               "interleaved call by call. Ratios are against f32 in the same run.\n\n", cpu, threads,
            kv_kern_get()->name, r, dr, use_cpu ? "process CPU time" : "wall-clock time", min_time);
    fprintf(m, "| tier | B/token/layer | bytes vs f32 |");
    for (int hi = 0; hi < nheads; hi++)
        for (int ci = 0; ci < nctx; ci++) fprintf(m, " H=%d T=%dk ms (x f32) |", heads[hi], ctx[ci] / 1024);
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
    fclose(m);
    fputs(tab, stdout);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) { perror(out_path); return 1; }
        fputs(tab, f);
        fclose(f);
    }
    free(tab);
    free(ql); free(qr); free(out); free(lat); free(pe);
    return 0;
}
