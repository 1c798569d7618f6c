/* dev/attn_bench_dsa.c - dense vs DSA decode attention per KV tier
 * (dev/attn_bench_dsa.h). */
#include "dev/attn_bench_dsa.h"

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
#include "kv/index.h"

#define NVAR 3   /* dense, DSA with f32 keys, DSA with fp8 keys */

/* y[rows] = W[rows][cols] x, f32, rows split over threads. */
static void matvec(const float *W, int rows, int cols, const float *x, float *y, int nt)
{
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int i = 0; i < rows; i++) {
        const float *w = W + (size_t)i * cols;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < cols; j++) s += w[j] * x[j];
        y[i] = s;
    }
}

struct dsa_work {
    int nI, dI, K, ql, hid, nt;
    float *W, *x, *proj;        /* projections: [nI*dI + dI + nI][max(ql, hid)] */
    float *q, *w, *score;       /* [nI][dI], [nI], [T] */
    int32_t *pos;               /* [K] */
    struct kv_index_sel sel;
};

/* One DSA decode step on layer 0 of c: projections, scores, top-k, sparse attention. */
static int dsa_step(struct dsa_work *d, const struct kv_cache *c, int T, int H, const float *ql, const float *qr,
                    float scale, float *out, struct kv_scratch *s, struct colibri_err *err)
{
    int wide = d->ql > d->hid ? d->ql : d->hid;
    matvec(d->W, d->nI * d->dI, d->ql, d->x, d->proj, d->nt);
    matvec(d->W + (size_t)d->nI * d->dI * wide, d->dI + d->nI, d->hid, d->x, d->proj + d->nI * d->dI, d->nt);
    int rc = kv_index_scores(c, 0, T, d->nI, d->q, d->w, 1.0f / sqrtf((float)d->dI), d->score, d->nt, NULL, err);
    if (rc) return rc;
    int n = kv_index_topk(&d->sel, d->score, T, d->K, d->pos, err);
    if (n < 0) return n;
    return kv_attend_select(c, 0, d->pos, n, H, ql, qr, scale, out, s, err);
}

int kv_attn_bench_dsa(const struct kv_attn_bench_opts *o, const struct kv_attn_bench_dsa_opts *dd, FILE *table,
                      FILE *progress, struct colibri_err *err)
{
    const int r = o->r, dr = o->dr, nctx = o->n_ctx, H = o->heads[0];
    if (nctx < 1 || nctx > KV_ATTN_BENCH_MAX_CTX || o->n_heads < 1 || H < 1)
        return base_err_set(err, COLIBRI_EINVAL, "attention bench: 1..%d contexts and a positive head count",
                       KV_ATTN_BENCH_MAX_CTX);
    if (dd->topk < 1 || dd->n_heads < 1 || dd->head_dim < 1 || dd->head_dim > KV_INDEX_MAX_DIM || dd->q_lora < 1 ||
        dd->hidden < 1)
        return base_err_set(err, COLIBRI_EINVAL, "attention bench: DSA top-k %d, %d index heads of %d values", dd->topk,
                       dd->n_heads, dd->head_dim);
    int tlist[KV_TIER_COUNT], ntiers = 0;
    if (!o->tiers) {
        for (int t = 0; t < KV_TIER_COUNT; t++) tlist[ntiers++] = t;
    } else {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->tiers);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok && ntiers < KV_TIER_COUNT; tok = strtok_r(NULL, ",", &save)) {
            int t = kv_tier_from_name(tok);
            if (t < 0) return base_err_set(err, COLIBRI_EINVAL, "--tiers: unknown KV tier '%s'", tok);
            tlist[ntiers++] = t;
        }
    }
    int maxT = 0;
    for (int k = 0; k < nctx; k++) {
        if (o->ctx[k] < 1) return base_err_set(err, COLIBRI_EINVAL, "attention bench: context %d", o->ctx[k]);
        if (o->ctx[k] > maxT) maxT = o->ctx[k];
    }
    int threads = o->threads;
    if (threads > 0) omp_set_num_threads(threads);
    else threads = omp_get_max_threads();
    uint64_t rng = 88172645463325252ull;
    char cpu[256];
    kv_attn_bench_cpu_model(cpu, sizeof cpu);

    struct dsa_work d = { .nI = dd->n_heads, .dI = dd->head_dim, .K = dd->topk, .ql = dd->q_lora, .hid = dd->hidden,
                          .nt = threads };
    int wide = d.ql > d.hid ? d.ql : d.hid, prow = d.nI * d.dI + d.dI + d.nI;
    d.W = malloc(sizeof(float) * (size_t)prow * wide);
    d.x = malloc(sizeof(float) * (size_t)wide);
    d.proj = malloc(sizeof(float) * (size_t)prow);
    d.q = malloc(sizeof(float) * (size_t)d.nI * d.dI);
    d.w = malloc(sizeof(float) * (size_t)d.nI);
    d.score = malloc(sizeof(float) * (size_t)maxT);
    d.pos = malloc(sizeof(int32_t) * (size_t)d.K);
    float *ql = malloc(sizeof(float) * H * r), *qr = malloc(sizeof(float) * H * (dr + 1));
    float *out = malloc(sizeof(float) * H * r), *lat = malloc(sizeof(float) * r), *pe = malloc(sizeof(float) * (dr + 1));
    float *key = malloc(sizeof(float) * d.dI);
    struct kv_cache *caches[KV_TIER_COUNT][NVAR] = {{0}};
    struct kv_scratch *sc = NULL;
    double ms[KV_TIER_COUNT][NVAR][KV_ATTN_BENCH_MAX_CTX];
    size_t rowb[KV_TIER_COUNT][NVAR];
    int rc = 0;
    if (!d.W || !d.x || !d.proj || !d.q || !d.w || !d.score || !d.pos || !ql || !qr || !out || !lat || !pe || !key) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "attention bench: DSA buffers");
        goto done;
    }
    if ((rc = kv_index_sel_init(&d.sel, maxT, err)) || (rc = kv_scratch_new(threads, &sc, err))) goto done;
    for (size_t i = 0; i < (size_t)prow * wide; i++) d.W[i] = 0.01f * kv_attn_bench_gauss(&rng);
    for (int i = 0; i < wide; i++) d.x[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < d.nI * d.dI; i++) d.q[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < d.nI; i++) d.w[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < H * r; i++) ql[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < H * dr; i++) qr[i] = kv_attn_bench_gauss(&rng);
    if (progress)
        fprintf(progress, "attn bench (DSA top-%d, %d x %d index heads): %s, %d threads, r=%d dr=%d H=%d\n", d.K, d.nI,
                d.dI, cpu, threads, r, dr, H);
    for (int ti = 0; ti < ntiers; ti++)
        for (int v = 0; v < NVAR; v++) {
            struct kv_part_spec ks = { KV_PART_INDEX_KEY, d.dI, v == 2 ? KV_TIER_FP8 : KV_TIER_F32 };
            struct colibri_err e = {0};
            if (kv_cache_new_parts(tlist[ti], KV_ROPE_DEFAULT, 1, r, dr, &ks, v ? 1 : 0, maxT, &caches[ti][v], &e)) {
                rc = base_err_set(err, e.code, "%s: %s", kv_tier_name(tlist[ti]), e.msg);
                goto done;
            }
            rowb[ti][v] = kv_cache_row_bytes(caches[ti][v], 0);
            for (int p = 0; p < maxT; p++) {
                for (int i = 0; i < r; i++) lat[i] = kv_attn_bench_gauss(&rng);
                for (int i = 0; i < dr; i++) pe[i] = kv_attn_bench_gauss(&rng);
                kv_cache_write(caches[ti][v], 0, p, lat, pe, NULL);
                if (v) {
                    for (int i = 0; i < d.dI; i++) key[i] = kv_attn_bench_gauss(&rng);
                    kv_cache_write_part(caches[ti][v], 0, p, KV_PART_INDEX_KEY, key, NULL);
                }
            }
        }
    if ((rc = kv_scratch_reserve(sc, caches[0][1], H, err))) goto done;
    const float scale = 1.0f / sqrtf((float)(r + dr));
    for (int ci = 0; ci < nctx && !rc; ci++) {
        const int T = o->ctx[ci];
        for (int ti = 0; ti < ntiers && !rc; ti++) {
            double best[NVAR], t0 = base_now_sec();
            for (int v = 0; v < NVAR && !rc; v++) {
                best[v] = 1e30;
                rc = v ? dsa_step(&d, caches[ti][v], T, H, ql, qr, scale, out, sc, err)
                       : kv_attend(caches[ti][v], 0, T, H, ql, qr, scale, out, sc, err);
            }
            int rounds = 0;
            while (!rc && (rounds < 3 || base_now_sec() - t0 < o->min_time * NVAR)) {
                for (int v = 0; v < NVAR && !rc; v++) {
                    double a = o->cpu_time ? kv_attn_bench_cpu_sec() : base_now_sec();
                    rc = v ? dsa_step(&d, caches[ti][v], T, H, ql, qr, scale, out, sc, err)
                           : kv_attend(caches[ti][v], 0, T, H, ql, qr, scale, out, sc, err);
                    double e = (o->cpu_time ? kv_attn_bench_cpu_sec() : base_now_sec()) - a;
                    if (e < best[v]) best[v] = e;
                }
                rounds++;
            }
            for (int v = 0; v < NVAR; v++) ms[ti][v][ci] = best[v] * 1e3;
            if (progress && !rc)
                fprintf(progress, "  %-7s T=%7d  dense %9.3f ms  DSA(f32 keys) %8.3f ms (x%.1f)  DSA(fp8 keys) %8.3f ms "
                        "(x%.1f)  (%d rounds)\n", kv_tier_name(tlist[ti]), T, ms[ti][0][ci], ms[ti][1][ci],
                        ms[ti][0][ci] / ms[ti][1][ci], ms[ti][2][ci], ms[ti][0][ci] / ms[ti][2][ci], rounds);
        }
    }
    if (rc) goto done;
    fprintf(table, "Machine: %s, %d threads (OpenMP), kv kernels: %s. r = %d, dr = %d, H = %d; DSA: top-%d, %d index "
                   "heads x %d, projections from %d (q latent) and %d (hidden) as an f32 matvec; one layer, one token; "
                   "%s, best of >= 3 calls and >= %.1f s per variant per cell, variants interleaved call by call. "
                   "speedup = dense / DSA on the same tier.\n\n", cpu, threads, kv_kern_get()->name, r, dr, H, d.K, d.nI,
            d.dI, d.ql, d.hid, o->cpu_time ? "process CPU time" : "wall-clock time", o->min_time);
    fprintf(table, "| tier | B/token/layer dense | + f32 index key | + fp8 index key |");
    for (int ci = 0; ci < nctx; ci++) {
        int T = o->ctx[ci];
        char tn[32];
        if (T % 1024) snprintf(tn, sizeof tn, "%d", T);
        else snprintf(tn, sizeof tn, "%dk", T / 1024);
        fprintf(table, " T=%s dense ms | DSA f32 keys ms (speedup) | DSA fp8 keys ms (speedup) |", tn);
    }
    fprintf(table, "\n|---|---|---|---|");
    for (int ci = 0; ci < nctx; ci++) fprintf(table, "---|---|---|");
    fprintf(table, "\n");
    for (int ti = 0; ti < ntiers; ti++) {
        fprintf(table, "| %s | %zu | %zu | %zu |", kv_tier_name(tlist[ti]), rowb[ti][0], rowb[ti][1], rowb[ti][2]);
        for (int ci = 0; ci < nctx; ci++)
            fprintf(table, " %.3f | %.3f (%.1fx) | %.3f (%.1fx) |", ms[ti][0][ci], ms[ti][1][ci],
                    ms[ti][0][ci] / ms[ti][1][ci], ms[ti][2][ci], ms[ti][0][ci] / ms[ti][2][ci]);
        fprintf(table, "\n");
    }
done:
    for (int ti = 0; ti < KV_TIER_COUNT; ti++)
        for (int v = 0; v < NVAR; v++) kv_cache_free(caches[ti][v]);
    kv_scratch_free(sc);
    kv_index_sel_free(&d.sel);
    free(d.W); free(d.x); free(d.proj); free(d.q); free(d.w); free(d.score); free(d.pos);
    free(ql); free(qr); free(out); free(lat); free(pe); free(key);
    return rc;
}
