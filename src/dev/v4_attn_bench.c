/* dev/v4_attn_bench.c - V4 decode attention per layer kind, tier and
 * context on synthetic state (see v4_attn_bench.h). */
#include "dev/v4_attn_bench.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"
#include "base/util.h"
#include "dev/attn_bench.h"
#include "kv/cache.h"
#include "kv/codec.h"
#include "model/v4_kern.h"

enum { H = 64, D = 512, DR = 64, W = 128, HI = 64, DI = 128, TOPK = 512, R_CSA = 4, R_HCA = 128 };
enum { KIND_SLIDING, KIND_CSA, KIND_HCA, KINDS };
#define MAX_TIERS 10
#define MAX_ROUNDS 64
#define CSA_ROWS_MAX 65536

static const char *const KIND_NAME[KINDS] = { "sliding", "CSA", "HCA" };

/* One cell's synthetic state: window and entries in the tier, index keys. */
struct cell {
    int kind, ctx, n_ent, n_alloc;
    struct kv_codec *kc, *ic;
    uint8_t *win, *ent, *ikeys;
    double t[MAX_ROUNDS];
};

struct shared {
    float *q, *iq, *iw, *qrot, *score, *tile, sinks[H], inv[DR / 2];
    int32_t sel[TOPK];
    void *work, *ishared;
    size_t stride;
    int nt;
};

static void gauss_rows(const struct kv_codec *c, uint8_t *out, int n, uint64_t *rng, float *tmp)
{
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < c->dim; i++) tmp[i] = kv_attn_bench_gauss(rng);
        kv_codec_encode(c, tmp, out + (size_t)r * c->row_bytes);
    }
}

static void decode(const struct kv_codec *c, const uint8_t *enc, const int32_t *sel, int mod, int n, float *out, int nt)
{
    nt = (int64_t)n * c->dim >= 16384 ? nt : 1;
    BASE_PAR_FOR_N(nt, for (int t = 0; t < n; t++) kv_codec_decode(c, enc + (size_t)(sel ? sel[t] % mod : t) *
                                                                          c->row_bytes, out + (size_t)t * c->dim););
}

/* One token through one layer of the cell's kind; 0 or an error. */
static int token(const struct cell *c, struct shared *s, struct colibri_err *err)
{
    const struct v4_rope rope = { DR, s->inv, 1.0f };
    const struct v4_attn a = { H, D, W, 1e-6f, s->sinks, NULL, rope };
    int pos = c->ctx - 1, n_sel = 0, rc;
    const int32_t *sel = NULL;
    if (c->kind == KIND_CSA) {
        const struct v4_indexer ix = { HI, DI, TOPK, R_CSA, rope };
        if ((rc = model_v4_index_scores_mt(&ix, pos, s->iq, s->iw, c->ic, c->ikeys, c->n_ent, s->qrot, s->score,
                                           s->ishared, s->work, s->stride, s->nt, err)) ||
            (rc = model_v4_indexer_select(&ix, pos, s->score, c->n_ent, s->sel, &n_sel, err)))
            return rc;
        for (int i = 0; i < n_sel; i++) s->sel[i] %= c->n_alloc;
        sel = s->sel;
    } else if (c->kind == KIND_HCA) {
        n_sel = c->n_ent;
    }
    const float *win = (const float *)c->win, *comp = (const float *)c->ent;
    if (c->kc->tier != KV_TIER_F32) {
        decode(c->kc, c->win, NULL, 1, W, s->tile, s->nt);
        if (n_sel) decode(c->kc, c->ent, sel, c->n_alloc, n_sel, s->tile + (size_t)W * D, s->nt);
        win = s->tile;
        comp = s->tile + (size_t)W * D;
        sel = NULL;
    }
    return model_v4_attn_query_mt(&a, pos, s->q, win, W, comp, sel, n_sel, s->tile + (size_t)(W + c->n_alloc) * D,
                                  s->work, s->stride, s->nt, err);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bytes per token of the compressed state at a layer count (the preset's
 * pattern: layers 0-2 and every even one after HCA, the odd ones from 3 CSA). */
static void bytes_table(FILE *f, const enum kv_tier *tiers, int nt, enum kv_tier itier)
{
    const struct { const char *name; int layers; } models[] = { { "V4-Flash", 43 }, { "V4-Pro", 61 } };
    fprintf(f, "\n| model | tier | CSA layers | HCA layers | bytes/token (entries + index keys) | window ring (fixed, "
               "all layers) | per token at 1M incl. window |\n|---|---|---|---|---|---|---|\n");
    for (int m = 0; m < 2; m++)
        for (int t = 0; t < nt; t++) {
            int L = models[m].layers, csa = 0, hca = 0;
            for (int l = 0; l < L; l++) (l >= 2 && (l - 2) % 2) ? csa++ : hca++;
            double rb = (double)kv_tier_row_bytes(tiers[t], D), ib = (double)kv_tier_row_bytes(itier, DI);
            double per = csa * (rb / R_CSA + ib / R_CSA) + hca * rb / R_HCA, ring = (double)L * 2 * W * rb;
            fprintf(f, "| %s | %s | %d | %d | %.1f | %.1f MiB | %.1f |\n", models[m].name, kv_tier_name(tiers[t]), csa,
                    hca, per, ring / 1048576.0, per + ring / 1048576.0);
        }
}

int model_v4_attn_bench(const struct v4_attn_bench_opts *o, FILE *table, FILE *progress, struct colibri_err *err)
{
    enum kv_tier tiers[MAX_TIERS];
    int n_tiers = 0, rc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", o->tiers ? o->tiers : "f32,bf16,fp8,int8r");
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && n_tiers < MAX_TIERS;
         tok = strtok_r(NULL, ",", &save)) {
        int t = kv_tier_from_name(tok);
        if (t < 0 || !kv_tier_row_bytes((enum kv_tier)t, D))
            return base_err_set(err, COLIBRI_EINVAL, "--attn-tiers: '%s' is not a KV tier for rows of %d", tok, D);
        tiers[n_tiers++] = (enum kv_tier)t;
    }
    int itier = o->index_tier ? kv_tier_from_name(o->index_tier) : KV_TIER_F32;
    if (itier != KV_TIER_F32 && itier != KV_TIER_FP8)
        return base_err_set(err, COLIBRI_EINVAL, "--kv-index: '%s' is not f32 or fp8", o->index_tier);
    int rounds = o->rounds < 1 ? 5 : o->rounds > MAX_ROUNDS ? MAX_ROUNDS : o->rounds;
    struct kv_codec kc[MAX_TIERS] = { 0 }, ic = { 0 };
    struct shared s = { 0 };
    s.nt = o->threads > 0 ? o->threads : omp_get_max_threads();
    int max_ent = 0;
    for (int c = 0; c < o->n_ctx; c++) max_ent = o->ctx[c] / R_HCA + 1 > max_ent ? o->ctx[c] / R_HCA + 1 : max_ent;
    int max_rows = W + (max_ent > CSA_ROWS_MAX ? max_ent : CSA_ROWS_MAX);
    s.stride = model_v4_attn_work_bytes(D, W + (max_ent > TOPK ? max_ent : TOPK));
    if (model_v4_index_work_bytes(HI, DI) > s.stride) s.stride = model_v4_index_work_bytes(HI, DI);
    s.stride = (s.stride + 63) & ~(size_t)63;
    int max_csa = 0;
    for (int c = 0; c < o->n_ctx; c++) max_csa = o->ctx[c] / R_CSA > max_csa ? o->ctx[c] / R_CSA : max_csa;
    s.q = malloc(sizeof(float) * H * D);
    s.iq = malloc(sizeof(float) * HI * DI);
    s.iw = malloc(sizeof(float) * HI);
    s.qrot = malloc(sizeof(float) * HI * DI);
    s.score = malloc(sizeof(float) * (size_t)(max_csa + 1));
    s.tile = malloc(sizeof(float) * ((size_t)max_rows + H) * D + sizeof(float) * (size_t)H * D);
    s.work = aligned_alloc(64, s.stride * (size_t)s.nt);
    s.ishared = aligned_alloc(64, (model_v4_index_shared_bytes(HI, DI) + 63) & ~(size_t)63);
    struct cell *cells = calloc((size_t)o->n_ctx * KINDS * n_tiers, sizeof *cells);
    float tmp[D];
    uint64_t rng = 0x5eed;
    if (!s.q || !s.iq || !s.iw || !s.qrot || !s.score || !s.tile || !s.work || !s.ishared || !cells) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "v4 attention bench: out of memory");
        goto out;
    }
    for (int i = 0; i < H * D; i++) s.q[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < HI * DI; i++) s.iq[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < HI; i++) s.iw[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < H; i++) s.sinks[i] = kv_attn_bench_gauss(&rng);
    for (int i = 0; i < DR / 2; i++) s.inv[i] = powf(160000.0f, -2.0f * i / DR);
    if ((rc = kv_codec_init(&ic, (enum kv_tier)itier, DI, KV_SEED_LATENT, err))) goto out;
    for (int t = 0; t < n_tiers; t++)
        if ((rc = kv_codec_init(&kc[t], tiers[t], D, KV_SEED_LATENT, err))) goto out;
    int nc = 0;
    for (int x = 0; x < o->n_ctx; x++)
        for (int k = 0; k < KINDS; k++)
            for (int t = 0; t < n_tiers; t++) {
                struct cell *c = &cells[nc++];
                c->kind = k, c->ctx = o->ctx[x], c->kc = &kc[t], c->ic = &ic;
                c->n_ent = k == KIND_CSA ? c->ctx / R_CSA : k == KIND_HCA ? c->ctx / R_HCA : 0;
                c->n_alloc = k == KIND_CSA && c->n_ent > CSA_ROWS_MAX ? CSA_ROWS_MAX : c->n_ent > 0 ? c->n_ent : 1;
                c->win = malloc(kc[t].row_bytes * W);
                c->ent = malloc(kc[t].row_bytes * (size_t)c->n_alloc);
                c->ikeys = k == KIND_CSA ? malloc(ic.row_bytes * (size_t)c->n_ent) : NULL;
                if (!c->win || !c->ent || (k == KIND_CSA && !c->ikeys)) {
                    rc = base_err_set(err, COLIBRI_ENOMEM, "v4 attention bench: state of %d positions", c->ctx);
                    goto out;
                }
                gauss_rows(&kc[t], c->win, W, &rng, tmp);
                gauss_rows(&kc[t], c->ent, c->n_alloc, &rng, tmp);
                if (c->ikeys) gauss_rows(&ic, c->ikeys, c->n_ent, &rng, tmp);
            }
    if (progress) fprintf(progress, "v4 attention: %d cells x %d rounds on %d threads\n", nc, rounds, s.nt);
    for (int r = 0; r < rounds && !rc; r++)
        for (int i = 0; i < nc && !rc; i++) {
            int reps = 0;
            double t0 = base_now_sec(), t = 0;
            do {
                rc = token(&cells[i], &s, err);
                reps++;
            } while (!rc && (t = base_now_sec() - t0) < o->min_time);
            cells[i].t[r] = t / reps;
        }
    if (rc) goto out;
    char cpu[128];
    kv_attn_bench_cpu_model(cpu, sizeof cpu);
    fprintf(table, "DeepSeek-V4 decode attention per token per layer (V4-Flash dims: %d heads x %d, window %d, CSA "
                   "1/%d top-%d with %d x %d index keys in %s, HCA 1/%d), %s, %d threads, median [min-max] of %d "
                   "rounds, ms; x win = the median over the sliding layer's in the same tier\n\n",
            H, D, W, R_CSA, TOPK, HI, DI, kv_tier_name((enum kv_tier)itier), R_HCA, cpu, s.nt, rounds);
    fprintf(table, "| context | kind | tier | rows attended | ms/token | x win |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < nc; i++) {
        struct cell *c = &cells[i];
        double v[MAX_ROUNDS], w[MAX_ROUNDS];
        memcpy(v, c->t, sizeof(double) * rounds);
        qsort(v, (size_t)rounds, sizeof *v, cmp_dbl);
        const struct cell *wc = &cells[i - (c->kind * n_tiers)];   /* the sliding cell of this context and tier */
        memcpy(w, wc->t, sizeof(double) * rounds);
        qsort(w, (size_t)rounds, sizeof *w, cmp_dbl);
        int rows = W + (c->kind == KIND_CSA ? (c->n_ent < TOPK ? c->n_ent : TOPK) : c->n_ent);
        fprintf(table, "| %d | %s | %s | %d | %.3f [%.3f-%.3f] | %.1f |\n", c->ctx, KIND_NAME[c->kind],
                kv_tier_name(c->kc->tier), rows, 1e3 * v[rounds / 2], 1e3 * v[0], 1e3 * v[rounds - 1],
                v[rounds / 2] / w[rounds / 2]);
    }
    bytes_table(table, tiers, n_tiers, (enum kv_tier)itier);
out:
    for (int i = 0; cells && i < o->n_ctx * KINDS * n_tiers; i++) free(cells[i].win), free(cells[i].ent), free(cells[i].ikeys);
    free(cells);
    for (int t = 0; t < n_tiers; t++) kv_codec_free(&kc[t]);
    kv_codec_free(&ic);
    free(s.q), free(s.iq), free(s.iw), free(s.qrot), free(s.score), free(s.tile), free(s.work), free(s.ishared);
    return rc;
}
