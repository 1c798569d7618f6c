/* test_glm53_parts.c - GLM-5.3's KDA layer (model/kda.h) against
 * transformers 5.18.0 (fixture tests/parts/glm53/kda.safetensors by
 * tools/oracle_glm53_parts.py; its NOTES.md says how much each feature moves
 * the output), with the bounded and the unbounded forget gate: each stage
 * from the stored input of that stage (convolution, gates, chunked core and
 * its final state, recurrent core, gated norm), the chunked and recurrent
 * forms against each other at every row, and the whole layer from x, once
 * stateless and once in transformers' cache pieces (a prefill, a multi-row
 * continuation, then one row at a time through the recurrent form). And
 * the pooled DSA selection (model/pool_index.h, fixture pool_index.safetensors)
 * with and without the tail rule and two pool sizes: pool keys, pool scores
 * and each row's selected positions (exactly), from the stored keys and
 * from x itself (LayerNorm'd wk, the gate projection, wq_b, weights_proj).
 *
 * Tolerance: |a - b| <= TOL * max(1, |b|), TOL 1e-5 (f32 against torch's f32
 * in another summation order) for each stage; 3e-5 for the whole layer, whose
 * gated RMSNorm divides the core's ~1e-6 differences by the rows' RMS (the
 * layer lands within ~1e-5). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "io/safetensors.h"
#include "model/kda.h"
#include "model/pool_index.h"

#define FIX "tests/parts/glm53/kda.safetensors"
#define TOL 1e-5
#define LAYER_TOL 3e-5

static float *f32(const struct st_set *s, const char *tag, const char *name, int64_t numel)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", tag, name);
    const struct st_tensor *t = st_find(s, full);
    CHECK(t && t->dtype == ST_F32 && t->numel == numel, "tensor %s: missing or not F32 x %lld", full,
          (long long)numel);
    if (!t || t->dtype != ST_F32 || t->numel != numel) return NULL;
    float *p = malloc(sizeof(float) * (size_t)numel);
    memcpy(p, t->data, sizeof(float) * (size_t)numel);
    return p;
}

static const char *meta(const struct st_set *s, const char *key)
{
    const char *v = st_tensor_meta(s, &s->tensors[0], key);
    CHECK(v != NULL, "metadata %s missing", key);
    return v ? v : "0";
}

static double near_tol(const char *tag, const char *what, const float *a, const float *b, size_t n, double tol)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(e <= worst)) worst = e;
    }
    printf("     %s: %-44s max err %.3g over %zu values\n", tag, what, worst, n);
    CHECK(worst <= tol, "%s %s: max err %.3g > %g", tag, what, worst, tol);
    return worst;
}

static double near(const char *tag, const char *what, const float *a, const float *b, size_t n)
{
    return near_tol(tag, what, a, b, n, TOL);
}

/* y[n][out] = x[n][in] . w[out][in]^T */
static void matmul(int n, int in, int out, const float *x, const float *w, float *y)
{
    for (int t = 0; t < n; t++)
        for (int o = 0; o < out; o++) {
            float s = 0;
            for (int i = 0; i < in; i++) s += x[(size_t)t * in + i] * w[(size_t)o * in + i];
            y[(size_t)t * out + o] = s;
        }
}

struct layer_w {
    float *q, *k, *v, *fa, *fb, *b, *ga, *gb, *o;
};

/* The whole layer over rows [t0, t0 + n) of x: projections, conv, gates,
 * core (chunked or recurrent), norm, o_proj into y's rows. */
static void layer_rows(const struct kda *k, const struct layer_w *w, int hidden, int t0, int n, const float *x,
                       float *conv_state, float *state, int chunked, float *scratch, float *y)
{
    const int H = k->n_heads, D = k->head_dim, HD = H * D;
    const float *xr = x + (size_t)t0 * hidden;
    float *raw = malloc(sizeof(float) * (size_t)n * 3 * HD), *c = malloc(sizeof(float) * (size_t)n * 3 * HD);
    float *tmp = malloc(sizeof(float) * (size_t)n * HD), *fp = malloc(sizeof(float) * (size_t)n * HD);
    float *bl = malloc(sizeof(float) * (size_t)n * H), *g = malloc(sizeof(float) * (size_t)n * HD);
    float *beta = malloc(sizeof(float) * (size_t)n * H), *core = malloc(sizeof(float) * (size_t)n * HD);
    float *fa = malloc(sizeof(float) * (size_t)n * D);
    matmul(n, hidden, HD, xr, w->q, tmp);
    for (int t = 0; t < n; t++) memcpy(raw + (size_t)t * 3 * HD, tmp + (size_t)t * HD, sizeof(float) * HD);
    matmul(n, hidden, HD, xr, w->k, tmp);
    for (int t = 0; t < n; t++) memcpy(raw + (size_t)t * 3 * HD + HD, tmp + (size_t)t * HD, sizeof(float) * HD);
    matmul(n, hidden, HD, xr, w->v, tmp);
    for (int t = 0; t < n; t++) memcpy(raw + (size_t)t * 3 * HD + 2 * HD, tmp + (size_t)t * HD, sizeof(float) * HD);
    model_kda_conv(k, n, raw, conv_state, c);
    matmul(n, hidden, D, xr, w->fa, fa);
    matmul(n, D, HD, fa, w->fb, fp);
    matmul(n, hidden, H, xr, w->b, bl);
    model_kda_gates(k, n, fp, bl, g, beta);
    if (chunked)
        model_kda_chunked(k, n, c, g, beta, state, core, scratch, 1);
    else
        model_kda_recurrent(k, n, c, g, beta, state, core, 1);
    matmul(n, hidden, D, xr, w->ga, fa);
    matmul(n, D, HD, fa, w->gb, tmp);
    model_kda_out_norm(k, n, core, tmp, core);
    matmul(n, HD, hidden, core, w->o, y + (size_t)t0 * hidden);
    free(raw); free(c); free(tmp); free(fp); free(bl); free(g); free(beta); free(core); free(fa);
}

static void one(const struct st_set *s, const char *tag)
{
    const int T = atoi(meta(s, "T")), T1 = atoi(meta(s, "T1")), T2 = atoi(meta(s, "T2"));
    const int hid = atoi(meta(s, "hidden")), H = atoi(meta(s, "heads")), D = atoi(meta(s, "head_dim"));
    const int K = atoi(meta(s, "conv")), HD = H * D;
    char key[64];
    snprintf(key, sizeof key, "%s.lower_bound", tag);
    const char *lb = meta(s, key);
    struct kda k = { .n_heads = H, .head_dim = D, .conv_k = K, .bounded = strcmp(lb, "none") != 0,
                     .lower_bound = (float)atof(lb), .norm_eps = (float)atof(meta(s, "norm_eps")) };
    CHECK(atoi(meta(s, "chunk")) == KDA_CHUNK, "fixture chunk %s, KDA_CHUNK %d", meta(s, "chunk"), KDA_CHUNK);
    float *conv_w = f32(s, tag, "w.conv1d.weight", (int64_t)3 * HD * K);
    float *dt = f32(s, tag, "w.forget_gate.dt_bias", HD), *alog = f32(s, tag, "w.forget_gate.A_log", H);
    float *nw = f32(s, tag, "w.o_norm.weight", D);
    struct layer_w w = { f32(s, tag, "w.q_proj.weight", (int64_t)HD * hid), f32(s, tag, "w.k_proj.weight", (int64_t)HD * hid),
                         f32(s, tag, "w.v_proj.weight", (int64_t)HD * hid),
                         f32(s, tag, "w.forget_gate.f_a_proj.weight", (int64_t)D * hid),
                         f32(s, tag, "w.forget_gate.f_b_proj.weight", (int64_t)HD * D),
                         f32(s, tag, "w.b_proj.weight", (int64_t)H * hid), f32(s, tag, "w.g_a_proj.weight", (int64_t)D * hid),
                         f32(s, tag, "w.g_b_proj.weight", (int64_t)HD * D), f32(s, tag, "w.o_proj.weight", (int64_t)hid * HD) };
    float *x = f32(s, tag, "x", (int64_t)T * hid), *raw = f32(s, tag, "qkv_raw", (int64_t)T * 3 * HD);
    float *conv_r = f32(s, tag, "conv", (int64_t)T * 3 * HD), *fp = f32(s, tag, "fproj", (int64_t)T * HD);
    float *g_r = f32(s, tag, "g", (int64_t)T * HD), *bl = f32(s, tag, "blog", (int64_t)T * H);
    float *beta_r = f32(s, tag, "beta", (int64_t)T * H), *core_r = f32(s, tag, "core", (int64_t)T * HD);
    float *st_r = f32(s, tag, "state", (int64_t)H * D * D), *rcore_r = f32(s, tag, "rcore", (int64_t)T * HD);
    float *rst_r = f32(s, tag, "rstate", (int64_t)H * D * D), *gate = f32(s, tag, "gate", (int64_t)T * HD);
    float *normed_r = f32(s, tag, "normed", (int64_t)T * HD), *y_r = f32(s, tag, "y", (int64_t)T * hid);
    float *yc_r = f32(s, tag, "y_cached", (int64_t)T * hid);
    if (!(conv_w && dt && alog && nw && w.q && w.k && w.v && w.fa && w.fb && w.b && w.ga && w.gb && w.o && x && raw &&
          conv_r && fp && g_r && bl && beta_r && core_r && st_r && rcore_r && rst_r && gate && normed_r && y_r && yc_r))
        goto out;
    k.conv_w = conv_w; k.dt_bias = dt; k.a_log = alog; k.norm_w = nw;
    struct colibri_err err = {0};
    CHECK(model_kda_check(&k, &err) == 0, "%s", err.msg);

    float *cs = calloc(model_kda_conv_state_floats(&k), sizeof(float));
    float *st = calloc(model_kda_rec_state_floats(&k), sizeof(float));
    float *st2 = calloc(model_kda_rec_state_floats(&k), sizeof(float));
    float *scr = malloc(sizeof(float) * 3 * model_kda_scratch_floats(&k));
    float *c = malloc(sizeof(float) * (size_t)T * 3 * HD), *g = malloc(sizeof(float) * (size_t)T * HD);
    float *beta = malloc(sizeof(float) * (size_t)T * H), *core = malloc(sizeof(float) * (size_t)T * HD);
    float *core2 = malloc(sizeof(float) * (size_t)T * HD), *y = malloc(sizeof(float) * (size_t)T * hid);

    model_kda_conv(&k, T, raw, cs, c);
    near(tag, "convolution + silu (prefill)", c, conv_r, (size_t)T * 3 * HD);
    /* the same in pieces through the conv state: T1 rows, 2 rows, then single rows */
    memset(cs, 0, sizeof(float) * model_kda_conv_state_floats(&k));
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = t0 == 0 ? T1 : t0 == T1 ? 2 : 1;
        model_kda_conv(&k, n, raw + (size_t)t0 * 3 * HD, cs, c + (size_t)t0 * 3 * HD);
    }
    near(tag, "convolution in pieces (conv state)", c, conv_r, (size_t)T * 3 * HD);

    model_kda_gates(&k, T, fp, bl, g, beta);
    near(tag, k.bounded ? "forget gate (bounded)" : "forget gate (softplus)", g, g_r, (size_t)T * HD);
    near(tag, "beta", beta, beta_r, (size_t)T * H);

    model_kda_chunked(&k, T, conv_r, g_r, beta_r, st, core, scr, 1);
    near(tag, "chunked core", core, core_r, (size_t)T * HD);
    near(tag, "chunked final state", st, st_r, (size_t)H * D * D);
    model_kda_recurrent(&k, T, conv_r, g_r, beta_r, st2, core2, 1);
    near(tag, "recurrent core", core2, rcore_r, (size_t)T * HD);
    near(tag, "recurrent final state", st2, rst_r, (size_t)H * D * D);
    near(tag, "chunked vs recurrent (C), every row", core, core2, (size_t)T * HD);
    near(tag, "chunked vs recurrent (C), final state", st, st2, (size_t)H * D * D);
    /* on 3 threads (the heads split among them): the same bits */
    float *st3 = calloc(model_kda_rec_state_floats(&k), sizeof(float));
    float *core3 = malloc(sizeof(float) * (size_t)T * HD);
    model_kda_chunked(&k, T, conv_r, g_r, beta_r, st3, core3, scr, 3);
    CHECK(!memcmp(core3, core, sizeof(float) * (size_t)T * HD) &&
          !memcmp(st3, st, sizeof(float) * model_kda_rec_state_floats(&k)), "%s: chunked on 3 threads differs", tag);
    memset(st3, 0, sizeof(float) * model_kda_rec_state_floats(&k));
    model_kda_recurrent(&k, T, conv_r, g_r, beta_r, st3, core3, 3);
    CHECK(!memcmp(core3, core2, sizeof(float) * (size_t)T * HD), "%s: recurrent on 3 threads differs", tag);
    free(st3);
    free(core3);

    model_kda_out_norm(&k, T, core_r, gate, core2);
    near(tag, "gated rmsnorm", core2, normed_r, (size_t)T * HD);

    memset(cs, 0, sizeof(float) * model_kda_conv_state_floats(&k));
    memset(st, 0, sizeof(float) * model_kda_rec_state_floats(&k));
    layer_rows(&k, &w, hid, 0, T, x, cs, st, 1, scr, y);
    near_tol(tag, "layer, stateless prefill", y, y_r, (size_t)T * hid, LAYER_TOL);
    memset(cs, 0, sizeof(float) * model_kda_conv_state_floats(&k));
    memset(st, 0, sizeof(float) * model_kda_rec_state_floats(&k));
    layer_rows(&k, &w, hid, 0, T1, x, cs, st, 1, scr, y);
    layer_rows(&k, &w, hid, T1, T2, x, cs, st, 1, scr, y);
    for (int t = T1 + T2; t < T; t++) layer_rows(&k, &w, hid, t, 1, x, cs, st, 0, scr, y);
    near_tol(tag, "layer, prefill + continuation + decode", y, yc_r, (size_t)T * hid, LAYER_TOL);

    k.conv_k = KDA_MAX_CONV + 1;
    CHECK(model_kda_check(&k, &err) == COLIBRI_EINVAL && strstr(err.msg, "linear_conv_kernel_dim"), "conv: %s",
          err.msg);
    free(cs); free(st); free(st2); free(scr); free(c); free(g); free(beta); free(core); free(core2); free(y);
out:
    free(conv_w); free(dt); free(alog); free(nw); free(w.q); free(w.k); free(w.v); free(w.fa); free(w.fb);
    free(w.b); free(w.ga); free(w.gb); free(w.o); free(x); free(raw); free(conv_r); free(fp); free(g_r); free(bl);
    free(beta_r); free(core_r); free(st_r); free(rcore_r); free(rst_r); free(gate); free(normed_r); free(y_r);
    free(yc_r);
}

static int64_t *i64(const struct st_set *s, const char *tag, const char *name, int64_t numel)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", tag, name);
    const struct st_tensor *t = st_find(s, full);
    CHECK(t && t->dtype == ST_I64 && t->numel == numel, "tensor %s: missing or not I64 x %lld", full,
          (long long)numel);
    if (!t || t->dtype != ST_I64 || t->numel != numel) return NULL;
    int64_t *p = malloc(sizeof(int64_t) * (size_t)numel);
    memcpy(p, t->data, sizeof(int64_t) * (size_t)numel);
    return p;
}

/* Each row's selection from keys k and gates [T][D], q [T][H*D], w [T][H]
 * against the stored one; 0 when all rows match. */
static int selections(const struct pool_index *pi, int T, const float *k, const float *gate, const float *q,
                      const float *w, const int64_t *sel_r, int width, float *pkeys, const float *pkeys_r,
                      const float *scores_r, const char *tag, const char *what)
{
    const int P = pi->kpool, D = pi->head_dim, np = T / P;
    for (int p = 0; p < np; p++)
        model_pool_index_key(pi, k + (size_t)p * P * D, gate + (size_t)p * P * D, pkeys + (size_t)p * D);
    if (pkeys_r) near(tag, "pool keys", pkeys, pkeys_r, (size_t)np * D);
    float score[64];
    int order[64], bad = 0;
    int32_t sel[256];
    double worst = 0;
    for (int t = 0; t < T; t++) {
        int n = model_pool_index_select(pi, t, q + (size_t)t * pi->n_heads * D, w + (size_t)t * pi->n_heads, pkeys, np,
                                        score, order, sel);
        for (int p = 0; scores_r && p < (t + 1) / P && p < np; p++) {
            double e = fabs((double)score[p] - scores_r[(size_t)t * np + p]);
            if (!(e <= worst)) worst = e;
        }
        int ok = n <= width;
        for (int i = 0; ok && i < width; i++) ok = sel_r[(size_t)t * width + i] == (i < n ? sel[i] : -1);
        if (!ok && bad++ < 3) {
            fprintf(stderr, "  %s %s: row %d: selected %d positions:", tag, what, t, n);
            for (int i = 0; i < n; i++) fprintf(stderr, " %d", sel[i]);
            fprintf(stderr, "\n");
        }
    }
    if (scores_r) {
        printf("     %s: %-44s max err %.3g\n", tag, "pool scores", worst);
        CHECK(worst <= TOL, "%s pool scores: %.3g", tag, worst);
    }
    printf("     %s: %-44s %d of %d rows differ\n", tag, what, bad, T);
    CHECK(bad == 0, "%s %s: %d rows select other positions", tag, what, bad);
    return bad;
}

static void pool_one(const struct st_set *s, const char *tag)
{
    const int T = atoi(meta(s, "T")), hid = atoi(meta(s, "hidden")), Q = atoi(meta(s, "q_lora_rank"));
    const int H = atoi(meta(s, "heads")), D = atoi(meta(s, "head_dim"));
    char key[64];
    snprintf(key, sizeof key, "%s.kpool", tag);
    const int P = atoi(meta(s, key));
    snprintf(key, sizeof key, "%s.topk", tag);
    const int K = atoi(meta(s, key));
    snprintf(key, sizeof key, "%s.tail", tag);
    const int tail = atoi(meta(s, key)), np = T / P;
    float *ape = f32(s, tag, "w.index_kpool_compress_ape", (int64_t)P * D);
    struct pool_index pi = { H, D, P, K, tail, ape };
    const int width = K + (tail ? P - 1 : 0);
    float *x = f32(s, tag, "x", (int64_t)T * hid), *qr = f32(s, tag, "q_resid", (int64_t)T * Q);
    float *k = f32(s, tag, "k", (int64_t)T * D), *gate = f32(s, tag, "gate", (int64_t)T * D);
    float *q = f32(s, tag, "q", (int64_t)T * H * D), *w = f32(s, tag, "w", (int64_t)T * H);
    float *pk_r = f32(s, tag, "pool_keys", (int64_t)np * D), *sc_r = f32(s, tag, "scores", (int64_t)T * np);
    int64_t *sel_r = i64(s, tag, "sel", (int64_t)T * width);
    float *wq = f32(s, tag, "w.wq_b.weight", (int64_t)H * D * Q), *wk = f32(s, tag, "w.wk.weight", (int64_t)D * hid);
    float *nw = f32(s, tag, "w.k_norm.weight", D), *nb = f32(s, tag, "w.k_norm.bias", D);
    float *wp = f32(s, tag, "w.weights_proj.weight", (int64_t)H * hid);
    float *wg = f32(s, tag, "w.index_kpool_compress_gate", (int64_t)D * hid);
    float *pk = malloc(sizeof(float) * (size_t)np * D), *k2 = malloc(sizeof(float) * (size_t)T * D);
    float *g2 = malloc(sizeof(float) * (size_t)T * D), *q2 = malloc(sizeof(float) * (size_t)T * H * D);
    float *w2 = malloc(sizeof(float) * (size_t)T * H);
    if (ape && x && qr && k && gate && q && w && pk_r && sc_r && sel_r && wq && wk && nw && nb && wp && wg) {
        CHECK(np <= 64 && width <= 256, "fixture too large for the test's scratch");
        char what[64];
        snprintf(what, sizeof what, "selection (kpool %d, topk %d, tail %d)", P, K, tail);
        selections(&pi, T, k, gate, q, w, sel_r, width, pk, pk_r, sc_r, tag, what);
        /* the same from x: k = LayerNorm(wk x) (eps 1e-6), gate, q, w */
        matmul(T, hid, D, x, wk, k2);
        for (int t = 0; t < T; t++) {
            float *r = k2 + (size_t)t * D, mean = 0, var = 0;
            for (int d = 0; d < D; d++) mean += r[d];
            mean /= (float)D;
            for (int d = 0; d < D; d++) var += (r[d] - mean) * (r[d] - mean);
            var /= (float)D;
            for (int d = 0; d < D; d++) r[d] = (r[d] - mean) / sqrtf(var + 1e-6f) * nw[d] + nb[d];
        }
        near(tag, "index keys from x", k2, k, (size_t)T * D);
        matmul(T, hid, D, x, wg, g2);
        matmul(T, Q, H * D, qr, wq, q2);
        matmul(T, hid, H, x, wp, w2);
        for (size_t i = 0; i < (size_t)T * H; i++) w2[i] /= sqrtf((float)H);
        near(tag, "head weights from x", w2, w, (size_t)T * H);
        selections(&pi, T, k2, g2, q2, w2, sel_r, width, pk, NULL, NULL, tag, "selection from x");
    }
    free(ape); free(x); free(qr); free(k); free(gate); free(q); free(w); free(pk_r); free(sc_r); free(sel_r);
    free(wq); free(wk); free(nw); free(nb); free(wp); free(wg); free(pk); free(k2); free(g2); free(q2); free(w2);
}

static void test_pool_index(void)
{
    struct st_set s;
    struct colibri_err err = {0};
    memset(&s, 0, sizeof s);
    int rc = st_open_file("tests/parts/glm53/pool_index.safetensors", &s, &err);
    CHECK(rc == 0, "pool_index.safetensors: %s", err.msg);
    if (rc) return;
    pool_one(&s, "t4");
    pool_one(&s, "n4");
    pool_one(&s, "t3");
    st_close(&s);
}

static void test_kda(void)
{
    struct st_set s;
    struct colibri_err err = {0};
    memset(&s, 0, sizeof s);
    int rc = st_open_file(FIX, &s, &err);
    CHECK(rc == 0, "%s: %s", FIX, err.msg);
    if (rc) return;
    one(&s, "b");
    one(&s, "u");
    st_close(&s);
}

int main(void)
{
    RUN_TEST(test_kda);
    RUN_TEST(test_pool_index);
    return CHECK_SUMMARY();
}
