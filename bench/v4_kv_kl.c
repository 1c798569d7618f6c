/* bench/v4_kv_kl.c - the quality of DeepSeek-V4's KV tiers on a model
 * (a random-weight fixture has no tokenizer, so `colibri eval` cannot read
 * text into it): N random token ids (fixed seed) are prefilled once with
 * the f32 cache and once per tier, and every position's logits are
 * compared: mean and 99th-percentile KL(f32 || tier) in nats, top-1
 * agreement, largest |logit difference|; then the same tokens decoded one
 * at a time under the tier, against that tier's prefill (prefill = decode).
 *
 *   build/bench/v4_kv_kl DIR [N] [TIERS] [INDEX_TIER]
 *   e.g. build/bench/v4_kv_kl tests/oracle_v4/deepseek_v4_official 1024 bf16,fp8,int8r,q4_0 f32 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(colibri_model *m, const char *tier, const char *itier, const int32_t *tok, int n, float *out,
               int decode, struct colibri_err *err)
{
    struct colibri_session_opts so = { .n_ctx = n, .kv_tier = tier, .kv_index = itier };
    colibri_session *s = NULL;
    int rc = colibri_session_new(m, &so, &s, err), V = 0;
    struct colibri_model_info info;
    colibri_model_get_info(m, &info);
    V = info.vocab;
    if (rc) return rc;
    if (!decode) rc = colibri_session_prefill(s, tok, n, out, 1, err);
    for (int i = 0; decode && !rc && i < n; i++) rc = colibri_session_decode(s, tok[i], out + (size_t)i * V, err);
    colibri_session_free(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: v4_kv_kl DIR [N] [TIERS] [INDEX_TIER]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 1024;
    char tiers[256];
    snprintf(tiers, sizeof tiers, "%s", argc > 3 ? argv[3] : "bf16,fp8,int8r,q4_0,tq4,polar4");
    const char *itier = argc > 4 ? argv[4] : "f32";
    struct colibri_err err = { 0 };
    struct colibri_model_opts mo = { .n_threads = 0 };
    colibri_model *m = NULL;
    if (colibri_model_load(argv[1], &mo, &m, &err)) {
        fprintf(stderr, "v4_kv_kl: %s\n", err.msg);
        return 1;
    }
    struct colibri_model_info info;
    colibri_model_get_info(m, &info);
    const int V = info.vocab;
    int32_t *tok = malloc(sizeof *tok * (size_t)n);
    float *ref = malloc(sizeof *ref * (size_t)n * V), *lg = malloc(sizeof *lg * (size_t)n * V);
    float *dec = malloc(sizeof *dec * (size_t)n * V);
    double *kl = malloc(sizeof *kl * (size_t)n);
    uint64_t x = 0x1234567;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tok[i] = (int32_t)(x % (uint64_t)V);
    }
    if (run(m, "f32", "f32", tok, n, ref, 0, &err)) {
        fprintf(stderr, "v4_kv_kl: f32: %s\n", err.msg);
        return 1;
    }
    printf("%s, %d random tokens, index keys %s\n", argv[1], n, itier);
    for (char *save = NULL, *t = strtok_r(tiers, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (run(m, t, itier, tok, n, lg, 0, &err) || run(m, t, itier, tok, n, dec, 1, &err)) {
            fprintf(stderr, "v4_kv_kl: %s: %s\n", t, err.msg);
            return 1;
        }
        int top1 = 0;
        double mx = 0, sum = 0, dd = 0;
        for (int i = 0; i < n; i++) {
            const float *p = ref + (size_t)i * V, *q = lg + (size_t)i * V, *d = dec + (size_t)i * V;
            double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, k = 0;
            int ap = 0, aq = 0;
            for (int v = 0; v < V; v++) {
                if (p[v] > mp) mp = p[v], ap = v;
                if (q[v] > mq) mq = q[v], aq = v;
                mx = fmax(mx, fabs((double)p[v] - q[v]));
                dd = fmax(dd, fabs((double)q[v] - d[v]));
            }
            for (int v = 0; v < V; v++) zp += exp(p[v] - mp), zq += exp(q[v] - mq);
            for (int v = 0; v < V; v++) {
                double lp = p[v] - mp - log(zp), lq = q[v] - mq - log(zq);
                k += exp(lp) * (lp - lq);
            }
            kl[i] = k;
            sum += k;
            top1 += ap == aq;
        }
        qsort(kl, (size_t)n, sizeof *kl, cmp_dbl);
        printf("kv=%s top1=%.4f kl_mean=%.3g kl_p99=%.3g max_dlogit=%.3g decode_vs_prefill=%.3g\n", t,
               (double)top1 / n, sum / n, kl[(int)(0.99 * (n - 1))], mx, dd);
    }
    colibri_model_free(m);
    free(tok), free(ref), free(lg), free(dec), free(kl);
    return 0;
}
