/* test_v4_parts.c - DeepSeek-V4's standalone parts against transformers
 * 5.18.0, module by module (fixtures by tools/oracle_v4_parts.py under
 * tests/parts/v4/, their notes say how much each feature moves the
 * output): hyper-connections with 2 and 4 streams and the hyper head
 * (model/hyper.h), the sqrtsoftplus top-k and hash routers
 * (model/router_v4.h), the routed experts' clipped SwiGLU
 * (model/v4_swiglu.h), the two ropes' frequencies (model/v4_rope.h), the HCA
 * and CSA compressors in bulk and one token at a time (model/v4_compress.h),
 * the lightning indexer's scores and top-k (model/v4_indexer.h), and the
 * attention core (model/v4_attn.h) of sliding, CSA and HCA layers, the last
 * two also chained: entries and selection made by the C compressor and
 * indexer from the layer's input.
 *
 * Tolerance: f32 here against torch's f32, |a - b| <= TOL * max(1, |b|)
 * with TOL 1e-5 (the parts land within ~2e-6; f32 sums of ~100 terms in
 * another order); expert and entry indices exactly. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "io/safetensors.h"
#include "model/hyper.h"
#include "model/router_v4.h"
#include "model/v4_attn.h"
#include "model/v4_compress.h"
#include "model/v4_indexer.h"
#include "model/v4_swiglu.h"

#define DIR "tests/parts/v4/"
#define TOL 1e-5

/* A copy (aligned) of an f32 tensor that must hold `numel` values, or NULL
 * after a failed CHECK. The caller frees. */
static float *f32(const struct st_set *s, const char *name, int64_t numel)
{
    const struct st_tensor *t = st_find(s, name);
    CHECK(t != NULL, "tensor %s missing", name);
    if (!t) return NULL;
    CHECK(t->dtype == ST_F32 && t->numel == numel, "%s: dtype %s, %lld values, want F32 x %lld", name,
          st_dtype_name(t->dtype), (long long)t->numel, (long long)numel);
    if (t->dtype != ST_F32 || t->numel != numel) return NULL;
    float *p = malloc(sizeof(float) * (size_t)(numel ? numel : 1));
    memcpy(p, t->data, sizeof(float) * (size_t)numel);
    return p;
}

static int64_t *i64(const struct st_set *s, const char *name, int64_t numel)
{
    const struct st_tensor *t = st_find(s, name);
    CHECK(t && t->dtype == ST_I64 && t->numel == numel, "tensor %s: missing or not I64 x %lld", name,
          (long long)numel);
    if (!t || t->dtype != ST_I64 || t->numel != numel) return NULL;
    int64_t *p = malloc(sizeof(int64_t) * (size_t)(numel ? numel : 1));
    memcpy(p, t->data, sizeof(int64_t) * (size_t)numel);
    return p;
}

static double meta_num(const struct st_set *s, const char *key)
{
    const char *v = st_tensor_meta(s, &s->tensors[0], key);
    CHECK(v != NULL, "metadata %s missing", key);
    return v ? atof(v) : 0;
}

/* Worst |a - b| / max(1, |b|) over n values; prints it under `what`. */
static double near(const char *what, const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(e <= worst)) worst = e; /* NaN sticks */
    }
    printf("     %-40s max err %.3g over %zu values\n", what, worst, n);
    CHECK(worst <= TOL, "%s: max err %.3g > %g", what, worst, TOL);
    return worst;
}

static int open_fixture(const char *file, struct st_set *s)
{
    struct colibri_err err = {0};
    memset(s, 0, sizeof *s);
    int rc = st_open_file(file, s, &err);
    CHECK(rc == 0, "%s: %s", file, err.msg);
    return rc;
}

static void test_hyper(void)
{
    struct st_set s;
    if (open_fixture(DIR "hyper.safetensors", &s)) return;
    const int T = (int)meta_num(&s, "T"), D = (int)meta_num(&s, "hidden");
    for (int n = 2; n <= 4; n += 2) {
        char nm[64];
#define T_(suffix, pre, cnt) (snprintf(nm, sizeof nm, "%s%d." suffix, pre, n), f32(&s, nm, cnt))
        float *x = T_("x", "hc", (int64_t)T * n * D), *y = T_("y", "hc", (int64_t)T * D);
        float *fn = T_("fn", "hc", (int64_t)(2 + n) * n * n * D), *base = T_("base", "hc", (2 + n) * n);
        float *scale = T_("scale", "hc", 3);
        float *post_r = T_("post", "hc", T * n), *comb_r = T_("comb", "hc", T * n * n);
        float *coll_r = T_("collapsed", "hc", T * D), *out_r = T_("out", "hc", (int64_t)T * n * D);
        float *hfn = T_("fn", "head", (int64_t)n * n * D), *hbase = T_("base", "head", n);
        float *hscale = T_("scale", "head", 1), *hout_r = T_("out", "head", (int64_t)T * D);
#undef T_
        if (x && y && fn && base && scale && post_r && comb_r && coll_r && out_r && hfn && hbase && hscale && hout_r) {
            struct hyper_conn hc = { .n = n, .hidden = D, .sinkhorn_iters = (int)meta_num(&s, "sinkhorn_iters"),
                                     .hc_eps = 0,
                                     .norm_eps = (float)meta_num(&s, "norm_eps"), .fn = fn, .base = base,
                                     .scale = scale };
            float *post = malloc(sizeof(float) * T * n), *comb = malloc(sizeof(float) * T * n * n);
            float *coll = malloc(sizeof(float) * T * D), *out = malloc(sizeof(float) * T * n * D);
            struct colibri_err err = {0};
            char what[64];
            snprintf(what, sizeof what, "hc%d_eps", n);
            hc.hc_eps = (float)meta_num(&s, what);
            CHECK(model_hyper_pre(&hc, T, x, coll, post, comb, &err) == 0, "%s", err.msg);
            snprintf(what, sizeof what, "hyper %d streams: post", n);
            near(what, post, post_r, (size_t)T * n);
            snprintf(what, sizeof what, "hyper %d streams: comb", n);
            near(what, comb, comb_r, (size_t)T * n * n);
            snprintf(what, sizeof what, "hyper %d streams: collapsed", n);
            near(what, coll, coll_r, (size_t)T * D);
            /* the post mix from the reference post/comb, in place over a copy of x */
            memcpy(out, x, sizeof(float) * T * n * D);
            CHECK(model_hyper_post(&hc, T, out, y, post_r, comb_r, out, &err) == 0, "%s", err.msg);
            snprintf(what, sizeof what, "hyper %d streams: post mix", n);
            near(what, out, out_r, (size_t)T * n * D);
            struct hyper_head hh = { .n = n, .hidden = D, .hc_eps = hc.hc_eps, .norm_eps = hc.norm_eps,
                                     .fn = hfn, .base = hbase, .scale = hscale };
            CHECK(model_hyper_head(&hh, T, x, coll, &err) == 0, "%s", err.msg);
            snprintf(what, sizeof what, "hyper head %d streams", n);
            near(what, coll, hout_r, (size_t)T * D);
            hc.n = HYPER_MAX_STREAMS + 1;
            CHECK(model_hyper_pre(&hc, T, x, coll, post, comb, &err) == COLIBRI_EINVAL && strstr(err.msg, "streams"),
                  "too many streams: %s", err.msg);
            free(post); free(comb); free(coll); free(out);
        }
        free(x); free(y); free(fn); free(base); free(scale); free(post_r); free(comb_r); free(coll_r);
        free(out_r); free(hfn); free(hbase); free(hscale); free(hout_r);
    }
    st_close(&s);
}

/* idx/weight against the reference's as sets: transformers' top-k is
 * unsorted, so each chosen expert is looked up in the reference row. */
static void same_choice(const char *what, int t, const int32_t *idx, const float *w, const int64_t *ridx,
                        const float *rw, int k)
{
    for (int i = 0; i < k; i++) {
        int j = 0;
        while (j < k && ridx[j] != idx[i]) j++;
        CHECK(j < k, "%s token %d: expert %d chosen, not in the reference's", what, t, idx[i]);
        if (j < k) CHECK_NEAR(w[i], rw[j], TOL);
    }
}

static void test_routers(void)
{
    struct st_set s;
    if (open_fixture(DIR "router.safetensors", &s)) return;
    const int T = (int)meta_num(&s, "T"), E = (int)meta_num(&s, "experts"), K = (int)meta_num(&s, "k");
    const int V = (int)meta_num(&s, "vocab");
    const float scaling = (float)meta_num(&s, "routed_scaling");
    float *logits = f32(&s, "topk.logits", T * E), *bias = f32(&s, "topk.bias", E), *rw = f32(&s, "topk.weight", T * K);
    int64_t *ridx = i64(&s, "topk.idx", T * K);
    float *hlogits = f32(&s, "hash.logits", T * E), *hrw = f32(&s, "hash.weight", T * K);
    int64_t *tid2eid = i64(&s, "hash.tid2eid", (int64_t)V * K), *ids = i64(&s, "hash.ids", T);
    int64_t *hridx = i64(&s, "hash.idx", T * K);
    struct colibri_err err = {0};
    if (logits && bias && rw && ridx && hlogits && hrw && tid2eid && ids && hridx) {
        for (int t = 0; t < T; t++) {
            int32_t idx[ROUTER_V4_MAX_K];
            float w[ROUTER_V4_MAX_K];
            CHECK(model_router_v4_topk(logits + t * E, bias, E, K, scaling, idx, w, &err) == 0, "%s", err.msg);
            same_choice("topk", t, idx, w, ridx + t * K, rw + t * K, K);
            CHECK(model_router_v4_hash(hlogits + t * E, E, tid2eid, V, K, (int)ids[t], scaling, idx, w, &err) == 0,
                  "%s", err.msg);
            for (int i = 0; i < K; i++) {
                CHECK(idx[i] == hridx[t * K + i], "hash token %d slot %d: expert %d, want %lld", t, i, idx[i],
                      (long long)hridx[t * K + i]);
                CHECK_NEAR(w[i], hrw[t * K + i], TOL);
            }
        }
        printf("     routers: %d tokens, top-%d of %d, exact choices\n", T, K, E);
        float *sin_ = f32(&s, "sqrtsoftplus.in", 8), *sout = f32(&s, "sqrtsoftplus.out", 8);
        if (sin_ && sout)
            for (int i = 0; i < 8; i++) CHECK_NEAR(model_router_v4_sqrtsoftplus(sin_[i]), sout[i], TOL);
        free(sin_); free(sout);
        int32_t idx[ROUTER_V4_MAX_K];
        float w[ROUTER_V4_MAX_K];
        CHECK(model_router_v4_hash(hlogits, E, tid2eid, V, K, V, scaling, idx, w, &err) == COLIBRI_ERANGE &&
                  strstr(err.msg, "tid2eid"), "token out of the table: %s", err.msg);
        CHECK(model_router_v4_topk(logits, bias, E, E + 1, scaling, idx, w, &err) == COLIBRI_EINVAL, "k > experts");
    }
    free(logits); free(bias); free(rw); free(ridx); free(hlogits); free(hrw); free(tid2eid); free(ids);
    free(hridx);
    st_close(&s);
}

/* y[t][r] = W[r] . x[t] for T rows: the projections transformers does
 * before the parts under test, in double. */
static float *proj(const float *W, int rows, int cols, const float *x, int T)
{
    float *y = malloc(sizeof(float) * (size_t)T * rows);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            double acc = 0;
            for (int c = 0; c < cols; c++) acc += (double)W[(size_t)r * cols + c] * x[(size_t)t * cols + c];
            y[(size_t)t * rows + r] = (float)acc;
        }
    return y;
}

/* The routed experts' clipped SwiGLU: out[t] = sum_k weight * down_e
 * model_v4_swiglu_clip(gate_up_e x), against DeepseekV4Experts. */
static void test_swiglu(void)
{
    struct st_set s;
    if (open_fixture(DIR "swiglu.safetensors", &s)) return;
    const int T = (int)meta_num(&s, "T"), D = (int)meta_num(&s, "hidden"), I = (int)meta_num(&s, "inter");
    const int E = (int)meta_num(&s, "experts"), K = (int)meta_num(&s, "k");
    const float limit = (float)meta_num(&s, "limit");
    float *x = f32(&s, "x", (int64_t)T * D), *gu = f32(&s, "gate_up", (int64_t)E * 2 * I * D);
    float *down = f32(&s, "down", (int64_t)E * D * I), *w = f32(&s, "weight", T * K), *want = f32(&s, "out", T * D);
    int64_t *idx = i64(&s, "idx", T * K);
    if (x && gu && down && w && want && idx) {
        float *y = calloc((size_t)T * D, sizeof(float));
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++) {
                const int e = (int)idx[t * K + k];
                float *h = proj(gu + (size_t)e * 2 * I * D, 2 * I, D, x + (size_t)t * D, 1);
                model_v4_swiglu_clip(h, h + I, I, limit, h);
                float *o = proj(down + (size_t)e * D * I, D, I, h, 1);
                for (int d = 0; d < D; d++) y[(size_t)t * D + d] += w[t * K + k] * o[d];
                free(h); free(o);
            }
        near("routed experts, clipped SwiGLU", y, want, (size_t)T * D);
        free(y);
    }
    free(x); free(gu); free(down); free(w); free(want); free(idx);
    st_close(&s);
}

/* The main and compress ropes' frequencies and scaling of three configs
 * (tiny, V4-Flash, a yarn rope scaled by mscale) against
 * DeepseekV4RotaryEmbedding's buffers. */
static void test_rope_freqs(void)
{
    struct st_set s;
    if (open_fixture(DIR "rope.safetensors", &s)) return;
    const char *cases[] = { "tiny.main", "tiny.compress", "flash.main", "flash.compress", "nested.main",
                            "nested.compress" };
    for (int c = 0; c < 6; c++) {
        char k[96];
#define M_(field) (snprintf(k, sizeof k, "%s." field, cases[c]), st_tensor_meta(&s, &s.tensors[0], k))
#define N_(field) (M_(field) ? atof(M_(field)) : 0.0)
        struct v4_rope_params p = { .theta = N_("theta"), .dr = (int)N_("dr"), .yarn = (int)N_("yarn"),
                                    .factor = N_("factor"), .original_max_pos = N_("original_max_position_embeddings"),
                                    .beta_fast = N_("beta_fast"), .beta_slow = N_("beta_slow"),
                                    .has_attention_factor = M_("attention_factor") != NULL,
                                    .attention_factor = N_("attention_factor"), .mscale = N_("mscale"),
                                    .mscale_all_dim = N_("mscale_all_dim") };
#undef N_
#undef M_
        snprintf(k, sizeof k, "%s.inv_freq", cases[c]);
        float *want = f32(&s, k, p.dr / 2);
        snprintf(k, sizeof k, "%s.scale", cases[c]);
        float *want_scale = f32(&s, k, 1);
        float inv[V4_ROPE_MAX_PAIRS], scale = 0;
        struct colibri_err err = {0};
        if (want && want_scale) {
            CHECK(model_v4_rope_freqs(&p, inv, &scale, &err) == 0, "%s: %s", cases[c], err.msg);
            snprintf(k, sizeof k, "rope %s (%d dims%s)", cases[c], p.dr, p.yarn ? ", yarn" : "");
            near(k, inv, want, (size_t)p.dr / 2);
            CHECK_NEAR(scale, want_scale[0], TOL);
        }
        free(want); free(want_scale);
    }
    st_close(&s);
}

/* One compressor from its fixture tensors <p>.kv_proj/.gate_proj/
 * .position_bias/.kv_norm: the bulk entries against `ref`, and the
 * incremental ones (one token at a time) against `ref_inc` (transformers'
 * cached path when given, else `ref`) and bit for bit against the bulk. */
static void check_compressor(const struct st_set *s, const char *p, int ratio, int hd, int overlap, int T, int D,
                             const float *x, const struct v4_rope *rope, const char *ref, const char *ref_inc)
{
    char nm[96];
    const int W = overlap ? 2 * hd : hd, n = T / ratio;
#define P_(suffix, cnt) (snprintf(nm, sizeof nm, "%s." suffix, p), f32(s, nm, cnt))
    float *wkv = P_("kv_proj", (int64_t)W * D), *wg = P_("gate_proj", (int64_t)W * D);
    float *pb = P_("position_bias", (int64_t)ratio * W), *nw = P_("kv_norm", hd);
#undef P_
    float *want = f32(s, ref, (int64_t)n * hd), *want_inc = ref_inc ? f32(s, ref_inc, (int64_t)n * hd) : NULL;
    if (wkv && wg && pb && nw && want && (want_inc || !ref_inc)) {
        struct v4_compressor c = { .ratio = ratio, .head_dim = hd, .overlap = overlap,
                                   .norm_eps = (float)meta_num(s, "norm_eps"),
                                   .position_bias = pb, .norm_w = nw, .rope = *rope };
        float *kv = proj(wkv, W, D, x, T), *gate = proj(wg, W, D, x, T);
        float *bulk = malloc(sizeof(float) * n * hd), *inc = malloc(sizeof(float) * n * hd);
        float *mem = malloc(sizeof(float) * model_v4_compress_state_floats(&c));
        struct colibri_err err = {0};
        char what[96];
        CHECK(model_v4_compress_bulk(&c, T, kv, gate, bulk, &err) == 0, "%s", err.msg);
        snprintf(what, sizeof what, "%s: %d entries, bulk", p, n);
        near(what, bulk, want, (size_t)n * hd);
        struct v4_compress_state st;
        model_v4_compress_state_init(&c, &st, mem);
        int got = 0;
        for (int t = 0; t < T; t++) {
            int emitted = 0;
            CHECK(model_v4_compress_push(&c, &st, kv + (size_t)t * W, gate + (size_t)t * W, inc + (size_t)got * hd,
                                   &emitted, &err) == 0, "%s", err.msg);
            CHECK(emitted == ((t + 1) % ratio == 0), "%s: token %d emitted %d", p, t, emitted);
            got += emitted;
        }
        CHECK(got == n && st.n_entries == n && st.n_buf == T % ratio, "%s: %d entries, %d buffered", p, got, st.n_buf);
        snprintf(what, sizeof what, "%s: one token at a time%s", p, ref_inc ? " (HF cache)" : "");
        near(what, inc, want_inc ? want_inc : want, (size_t)n * hd);
        CHECK(!memcmp(inc, bulk, sizeof(float) * n * hd), "%s: incremental entries differ from the bulk's", p);
        free(kv); free(gate); free(bulk); free(inc); free(mem);
    }
    free(wkv); free(wg); free(pb); free(nw); free(want); free(want_inc);
}

static void test_compress_indexer(void)
{
    struct st_set s;
    if (open_fixture(DIR "compress.safetensors", &s)) return;
    const int T = (int)meta_num(&s, "T"), D = (int)meta_num(&s, "hidden"), hd = (int)meta_num(&s, "head_dim");
    const int ihd = (int)meta_num(&s, "index_head_dim"), H = (int)meta_num(&s, "index_n_heads");
    const int topk = (int)meta_num(&s, "index_topk"), ql = (int)meta_num(&s, "q_lora_rank");
    const int csa = (int)meta_num(&s, "csa_ratio"), hca = (int)meta_num(&s, "hca_ratio");
    const int dr = (int)meta_num(&s, "rope_dims"), ne = T / csa;
    float *x = f32(&s, "x", (int64_t)T * D), *qres = f32(&s, "q_residual", (int64_t)T * ql);
    float *inv = f32(&s, "rope.inv_freq", dr / 2), *rsc = f32(&s, "rope.scale", 1);
    float *wq = f32(&s, "ix.q_b_proj", (int64_t)H * ihd * ql), *ww = f32(&s, "ix.weights_proj", (int64_t)H * D);
    float *keys = f32(&s, "ix.keys", (int64_t)ne * ihd), *scores_r = f32(&s, "ix.scores", (int64_t)T * ne);
    int64_t *topk_r = i64(&s, "ix.topk", (int64_t)T * (topk < ne ? topk : ne));
    int64_t *vis_r = i64(&s, "csa.visible", (int64_t)T * ne);
    if (x && qres && inv && rsc && wq && ww && keys && scores_r && topk_r && vis_r) {
        struct v4_rope rope = { .dr = dr, .inv_freq = inv, .scale = rsc[0] };
        check_compressor(&s, "hca", hca, hd, 0, T, D, x, &rope, "hca.entries", NULL);
        check_compressor(&s, "csa", csa, hd, 1, T, D, x, &rope, "csa.entries", "csa.entries_cached");
        check_compressor(&s, "ix", csa, ihd, 1, T, D, x, &rope, "ix.keys", "ix.keys_cached");

        struct v4_indexer ix = { .n_heads = H, .head_dim = ihd, .topk = topk, .ratio = csa, .rope = rope };
        float *q = proj(wq, H * ihd, ql, qres, T), *w = proj(ww, H, D, x, T);
        float *qrot = malloc(sizeof(float) * H * ihd), *sc = malloc(sizeof(float) * T * ne);
        struct colibri_err err = {0};
        const int kk = topk < ne ? topk : ne;
        int sel_rows = 0;
        for (int t = 0; t < T; t++) {
            CHECK(model_v4_indexer_scores(&ix, t, q + (size_t)t * H * ihd, w + (size_t)t * H, keys, ne, qrot,
                                    sc + (size_t)t * ne, &err) == 0, "%s", err.msg);
            int32_t sel[64];
            int n_sel = -1;
            CHECK(model_v4_indexer_select(&ix, t, sc + (size_t)t * ne, ne, sel, &n_sel, &err) == 0, "%s", err.msg);
            /* transformers' top-k is sorted by score with -1 for the invisible rest */
            int n_ref = 0;
            for (int i = 0; i < kk; i++) n_ref += topk_r[t * kk + i] >= 0;
            CHECK(n_sel == n_ref, "indexer query %d: %d selected, transformers %d", t, n_sel, n_ref);
            for (int i = 0; i < n_sel && i < n_ref; i++)
                CHECK(sel[i] == topk_r[t * kk + i], "indexer query %d rank %d: entry %d, transformers %lld", t, i,
                      sel[i], (long long)topk_r[t * kk + i]);
            int n_vis = 0;
            for (int e = 0; e < ne; e++) n_vis += (int)vis_r[t * ne + e];
            CHECK(n_vis == n_sel, "query %d: CSA attends %d entries, the indexer selects %d", t, n_vis, n_sel);
            for (int i = 0; i < n_sel; i++) CHECK(vis_r[t * ne + sel[i]], "query %d: entry %d not attended", t, sel[i]);
            sel_rows += n_sel == topk;
        }
        near("indexer scores", sc, scores_r, (size_t)T * ne);
        printf("     indexer: %d queries, selections exact (%d of them a full top-%d)\n", T, sel_rows, topk);
        free(q); free(w); free(qrot); free(sc);
    }
    free(x); free(qres); free(inv); free(rsc); free(wq); free(ww); free(keys); free(scores_r); free(topk_r);
    free(vis_r);
    st_close(&s);
}

/* y [T][D]: each query t of a layer through the core and the output
 * projection, q and kv prepared, seeing compressed entries
 * sel[t * max_sel ..][0 .. n_sel[t]). */
static void attend_layer(const struct v4_attn *a, int T, const float *q, const float *kv, const float *ent,
                         const int32_t *sel, const int *n_sel, int max_sel, int G, int R, int D, const float *oa,
                         const float *ob, float *y)
{
    const int H = a->n_heads, hd = a->head_dim;
    float *o = malloc(sizeof(float) * H * hd), *mid = malloc(sizeof(float) * G * R);
    float *scr = malloc(sizeof(float) * (a->window + max_sel + 1));
    struct colibri_err err = {0};
    for (int t = 0; t < T; t++) {
        int n_win = t + 1 < a->window ? t + 1 : a->window;
        CHECK(model_v4_attn_query(a, t, q + (size_t)t * H * hd, kv + (size_t)(t - n_win + 1) * hd, n_win, ent,
                                  sel + (size_t)t * max_sel, n_sel[t], o, scr, &err) == 0, "%s", err.msg);
        CHECK(model_v4_attn_out_proj(H * hd, G, R, D, oa, ob, o, mid, y + (size_t)t * D, &err) == 0, "%s",
              err.msg);
    }
    free(o); free(mid); free(scr);
}

/* The compressed entries and each query's selection from the C parts alone:
 * the layer's compressor over x, and for CSA its indexer (keys from its own
 * compressor, queries from q_residual), for HCA every visible entry. 0 when
 * a tensor is missing (a CHECK has failed). */
static int chain_selection(const struct st_set *s, const char *kind, int csa, int ratio, int T, int D,
                           const float *x, const struct v4_rope *rope, float *ent, int32_t *sel, int *n_sel,
                           int max_sel)
{
    char nm[128];
    const int hd = (int)meta_num(s, "head_dim"), ne = T / ratio, W = csa ? 2 * hd : hd;
    const int ql = (int)meta_num(s, "q_lora_rank"), H = (int)meta_num(s, "index_n_heads");
    const int ihd = (int)meta_num(s, "index_head_dim"), topk = (int)meta_num(s, "index_topk");
    struct colibri_err err = {0};
#define K_(suffix, cnt) (snprintf(nm, sizeof nm, "%s." suffix, kind), f32(s, nm, cnt))
    float *wkv = K_("c.kv_proj", (int64_t)W * D), *wg = K_("c.gate_proj", (int64_t)W * D);
    float *pb = K_("c.position_bias", (int64_t)ratio * W), *nw = K_("c.kv_norm", hd);
    int ok = wkv && wg && pb && nw;
    if (ok) {
        struct v4_compressor c = { .ratio = ratio, .head_dim = hd, .overlap = csa,
                                   .norm_eps = (float)meta_num(s, "norm_eps"),
                                   .position_bias = pb, .norm_w = nw, .rope = *rope };
        float *kv = proj(wkv, W, D, x, T), *gate = proj(wg, W, D, x, T);
        CHECK(model_v4_compress_bulk(&c, T, kv, gate, ent, &err) == 0, "%s", err.msg);
        free(kv); free(gate);
    }
    if (ok && !csa)
        for (int t = 0; t < T; t++) {
            n_sel[t] = model_v4_compress_visible(t, ratio);
            for (int i = 0; i < n_sel[t]; i++) sel[t * max_sel + i] = i;
        }
    if (ok && csa) {
        float *iwkv = K_("ix.kv_proj", (int64_t)2 * ihd * D), *iwg = K_("ix.gate_proj", (int64_t)2 * ihd * D);
        float *ipb = K_("ix.position_bias", (int64_t)ratio * 2 * ihd), *inw = K_("ix.kv_norm", ihd);
        float *wq = K_("ix.q_b_proj", (int64_t)H * ihd * ql), *ww = K_("ix.weights_proj", (int64_t)H * D);
        float *qres = K_("q_residual", (int64_t)T * ql);
        ok = iwkv && iwg && ipb && inw && wq && ww && qres;
        if (ok) {
            struct v4_compressor c = { .ratio = ratio, .head_dim = ihd, .overlap = 1,
                                       .norm_eps = (float)meta_num(s, "norm_eps"),
                                       .position_bias = ipb, .norm_w = inw, .rope = *rope };
            struct v4_indexer ix = { .n_heads = H, .head_dim = ihd, .topk = topk, .ratio = ratio, .rope = *rope };
            float *kv = proj(iwkv, 2 * ihd, D, x, T), *gate = proj(iwg, 2 * ihd, D, x, T);
            float *keys = malloc(sizeof(float) * ne * ihd), *q = proj(wq, H * ihd, ql, qres, T);
            float *w = proj(ww, H, D, x, T), *qrot = malloc(sizeof(float) * H * ihd);
            float *sc = malloc(sizeof(float) * ne);
            CHECK(model_v4_compress_bulk(&c, T, kv, gate, keys, &err) == 0, "%s", err.msg);
            for (int t = 0; t < T; t++) {
                CHECK(model_v4_indexer_scores(&ix, t, q + (size_t)t * H * ihd, w + (size_t)t * H, keys, ne, qrot, sc,
                                              &err) == 0, "%s", err.msg);
                CHECK(topk <= max_sel && model_v4_indexer_select(&ix, t, sc, ne, sel + (size_t)t * max_sel,
                                                                 &n_sel[t], &err) == 0, "%s", err.msg);
            }
            free(kv); free(gate); free(keys); free(q); free(w); free(qrot); free(sc);
        }
        free(iwkv); free(iwg); free(ipb); free(inw); free(wq); free(ww); free(qres);
    }
#undef K_
    free(wkv); free(wg); free(pb); free(nw);
    return ok;
}

/* Each layer kind's attention: the core from transformers' q, kv, entries
 * and selection; then for CSA and HCA the same with the entries and the
 * selection made by the C compressor and indexer from x. */
static void test_attention(void)
{
    struct st_set s;
    if (open_fixture(DIR "attention.safetensors", &s)) return;
    const int T = (int)meta_num(&s, "T"), D = (int)meta_num(&s, "hidden"), H = (int)meta_num(&s, "heads");
    const int hd = (int)meta_num(&s, "head_dim"), win = (int)meta_num(&s, "window");
    const int G = (int)meta_num(&s, "o_groups"), R = (int)meta_num(&s, "o_lora_rank");
    const int dr = (int)meta_num(&s, "rope_dims");
    const float eps = (float)meta_num(&s, "norm_eps");
    const char *kinds[] = { "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention" };
    const int ratios[] = { 0, (int)meta_num(&s, "csa_ratio"), (int)meta_num(&s, "hca_ratio") };
    float *x = f32(&s, "x", (int64_t)T * D);
    for (int k = 0; k < 3 && x; k++) {
        char nm[96];
        const int ne = ratios[k] ? T / ratios[k] : 0, max_sel = ne ? ne : 1;
#define K_(suffix, cnt) (snprintf(nm, sizeof nm, "%s." suffix, kinds[k]), f32(&s, nm, cnt))
        float *q = K_("q", (int64_t)T * H * hd), *kv = K_("kv", (int64_t)T * hd), *nw = K_("kv_norm", hd);
        float *sinks = K_("sinks", H), *oa = K_("o_a", (int64_t)G * R * (H * hd / G));
        float *ob = K_("o_b", (int64_t)D * G * R), *want = K_("out", (int64_t)T * D);
        float *inv = K_("inv_freq", dr / 2), *rsc = K_("rope_scale", 1);
        float *ent = ne ? K_("entries", (int64_t)ne * hd) : NULL;
#undef K_
        snprintf(nm, sizeof nm, "%s.visible", kinds[k]);
        int64_t *vis = ne ? i64(&s, nm, (int64_t)T * ne) : NULL;
        int32_t *sel = calloc((size_t)T * max_sel, sizeof(int32_t));
        int *n_sel = calloc((size_t)T, sizeof(int));
        float *y = malloc(sizeof(float) * T * D), *ent_c = malloc(sizeof(float) * max_sel * hd);
        if (q && kv && nw && sinks && oa && ob && want && inv && rsc && (!ne || (ent && vis))) {
            struct v4_attn a = { .n_heads = H, .head_dim = hd, .window = win, .norm_eps = eps, .sinks = sinks,
                                 .kv_norm_w = nw, .rope = { .dr = dr, .inv_freq = inv, .scale = rsc[0] } };
            struct colibri_err err = {0};
            for (int t = 0; t < T; t++) {
                CHECK(model_v4_attn_prep_kv(&a, t, kv + (size_t)t * hd, &err) == 0, "%s", err.msg);
                CHECK(model_v4_attn_prep_q(&a, t, q + (size_t)t * H * hd, &err) == 0, "%s", err.msg);
                for (int e = 0; e < ne; e++)
                    if (vis[t * ne + e]) sel[t * max_sel + n_sel[t]++] = e;
            }
            attend_layer(&a, T, q, kv, ent, sel, n_sel, max_sel, G, R, D, oa, ob, y);
            char what[96];
            snprintf(what, sizeof what, "attention %s", kinds[k]);
            near(what, y, want, (size_t)T * D);
            if (ne && chain_selection(&s, kinds[k], k == 1, ratios[k], T, D, x, &a.rope, ent_c, sel, n_sel, max_sel)) {
                attend_layer(&a, T, q, kv, ent_c, sel, n_sel, max_sel, G, R, D, oa, ob, y);
                snprintf(what, sizeof what, "  the same from C %s", k == 1 ? "compressor + indexer" : "compressor");
                near(what, y, want, (size_t)T * D);
            }
        }
        free(q); free(kv); free(nw); free(sinks); free(oa); free(ob); free(want); free(inv); free(rsc); free(ent);
        free(vis); free(sel); free(n_sel); free(y); free(ent_c);
    }
    free(x);
    st_close(&s);
}

int main(void)
{
    RUN_TEST(test_hyper);
    RUN_TEST(test_routers);
    RUN_TEST(test_swiglu);
    RUN_TEST(test_rope_freqs);
    RUN_TEST(test_compress_indexer);
    RUN_TEST(test_attention);
    return CHECK_SUMMARY();
}
