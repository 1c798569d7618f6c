/* The model layer's seams: run buffers (no growth while decoding), the
 * attention door for every tier, the prefill forms, slices longer than the
 * run buffers, the expert store's call pattern, the hidden-state output and
 * the optional kv_b copy. Runs on models/colibri-tiny (bf16, trained) and the
 * oracle fixture tests/oracle/deepseek_v3_tiny (f32); the attention's dot
 * products, one and batched, against their stated order. */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/expert_store_stream.h"
#include "model/forward.h"
#include "model/mla.h"
#include "model/norm.h"
#include "model/linear.h"

#define TINY "models/colibri-tiny"
#define FIXTURE "tests/oracle/deepseek_v3_tiny"

static int load(const char *dir, int kv_b_f32, struct model *m)
{
    struct colibri_err err = { 0 };
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, kv_b_f32, 0, 0 };
    int rc = model_load(dir, &lo, m, &err);
    CHECK(rc == 0, "%s: %s", dir, err.msg);
    return rc;
}

static int state(const struct model *m, int n_ctx, int batch, enum kv_tier tier, struct fwd_state *st)
{
    struct colibri_err err = { 0 };
    struct compute_ctx cc = base_compute_ctx_make(0);
    int rc = fwd_state_init(st, m, n_ctx, batch, tier, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
    CHECK(rc == 0, "%s", err.msg);
    return rc;
}

static void tokens(int32_t *t, int n, int V)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 7919 + 13) % V);
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d) d = e;
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return d / scale;
}

/* After the first decoded token the state holds as many bytes as before,
 * for the exact f32 path and for a quantized tier's native consumer (that
 * nothing is allocated at all is test_noalloc's check). */
static void test_decode_state_does_not_grow(void)
{
    struct model m;
    if (load(TINY, 0, &m)) return;
    const enum kv_tier tiers[] = { KV_TIER_F32, KV_TIER_TQ4 };
    for (int ti = 0; ti < 2; ti++) {
        struct fwd_state st;
        if (state(&m, 96, 0, tiers[ti], &st)) continue;
        int V = m.cfg.vocab_size;
        int32_t t[96];
        tokens(t, 96, V);
        float *logits = malloc((size_t)V * sizeof *logits);
        struct colibri_err err = { 0 };
        struct fwd_out out = { .logits = logits };
        int rc = model_forward(&m, &st, t, 16, 0, FWD_EXPANDED, &out, &err);
        rc = rc ? rc : model_forward(&m, &st, t + 16, 1, 16, FWD_ABSORBED, &out, &err);
        int64_t bytes = fwd_state_bytes(&st);
        for (int p = 17; p < 96 && !rc; p++) rc = model_forward(&m, &st, t + p, 1, p, FWD_ABSORBED, &out, &err);
        CHECK(rc == 0, "%s", err.msg);
        CHECK(fwd_state_bytes(&st) == bytes, "%s: the state grew while decoding", kv_tier_name(tiers[ti]));
        free(logits);
        fwd_state_free(&st);
    }
    model_free(&m);
}

/* The absorbed decode reads the same f32 values of kv_b whether it keeps a
 * copy or dequantizes each head's rows: the logits are bit-identical. */
static void test_kv_b_copy_is_bit_identical(void)
{
    struct model a, b;
    if (load(TINY, 0, &a)) return;
    if (load(TINY, 1, &b)) { model_free(&a); return; }
    CHECK(a.layers[0].attn.kv_b.fmt == QUANT_BF16, "the bundled model's kv_b is bf16");
    CHECK(!a.layers[0].attn.kv_b_f32 && b.layers[0].attn.kv_b_f32, "the copy is made when asked for, only then");
    struct model_bytes ba, bb;
    model_bytes(&a, &ba);
    model_bytes(&b, &bb);
    int64_t copy = 0;
    for (int l = 0; l < b.cfg.num_hidden_layers + b.n_mtp; l++) copy += (int64_t)b.layers[l].attn.kv_b.rows * b.layers[l].attn.kv_b.cols * 4;
    CHECK(ba.copies == 0 && bb.copies == copy && bb.resident == ba.resident + copy, "copies %lld vs %lld",
          (long long)bb.copies, (long long)copy);
    int V = a.cfg.vocab_size;
    int32_t t[40];
    tokens(t, 40, V);
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    struct fwd_state sa, sb;
    if (!state(&a, 40, 0, KV_TIER_F32, &sa) && !state(&b, 40, 0, KV_TIER_F32, &sb)) {
        struct colibri_err err = { 0 };
        struct fwd_out oa = { .logits = la }, ob = { .logits = lb };
        int rc = model_forward(&a, &sa, t, 8, 0, FWD_EXPANDED, &oa, &err);
        rc = rc ? rc : model_forward(&b, &sb, t, 8, 0, FWD_EXPANDED, &ob, &err);
        for (int p = 8; p < 40 && !rc; p++) {
            rc = model_forward(&a, &sa, t + p, 1, p, FWD_ABSORBED, &oa, &err);
            rc = rc ? rc : model_forward(&b, &sb, t + p, 1, p, FWD_ABSORBED, &ob, &err);
            CHECK(!memcmp(la, lb, (size_t)V * sizeof *la), "decode at %d differs with the kv_b copy", p);
        }
        CHECK(rc == 0, "%s", err.msg);
        fwd_state_free(&sa);
        fwd_state_free(&sb);
    }
    free(la);
    free(lb);
    model_free(&a);
    model_free(&b);
}

/* A prefill after cached rows gives exactly the logits of a cold prefill of
 * the whole prompt (prefix reuse is invisible); the opt-in absorbed form for
 * such prefills, chosen when cheaper, agrees to rounding. */
static void test_prefill_forms_agree(void)
{
    struct model m;
    if (load(FIXTURE, 0, &m)) return;
    const struct model_config *c = &m.cfg;
    CHECK(!mla_prefill_absorbed(c, 4, 0), "a prefill from position 0 is expanded");
    CHECK(mla_prefill_absorbed(c, 2, 60), "2 tokens after 60 cached rows are cheaper absorbed");
    CHECK(!mla_prefill_absorbed(c, 2000, 60), "2000 tokens after 60 cached rows are cheaper expanded");
    int V = c->vocab_size, N = 64;
    int32_t t[64];
    tokens(t, N, V);
    float *cold = malloc((size_t)N * V * sizeof *cold), *warm = malloc((size_t)4 * V * sizeof *warm);
    struct fwd_state a, b;
    if (!state(&m, N, 0, KV_TIER_F32, &a) && !state(&m, N, 0, KV_TIER_F32, &b)) {
        struct colibri_err err = { 0 };
        struct fwd_out oc = { .logits = cold, .all_logits = 1 }, ow = { .logits = warm, .all_logits = 1 };
        int rc = model_forward(&m, &a, t, N, 0, FWD_EXPANDED, &oc, &err);
        rc = rc ? rc : model_forward(&m, &b, t, N - 4, 0, FWD_EXPANDED, NULL, &err);
        rc = rc ? rc : model_forward(&m, &b, t + N - 4, 4, N - 4, FWD_EXPANDED, &ow, &err);
        CHECK(rc == 0, "%s", err.msg);
        CHECK(!memcmp(warm, cold + (size_t)(N - 4) * V, (size_t)4 * V * sizeof *warm),
              "a prefill after 60 cached rows differs from the cold prefill");
        /* the opt-in absorbed form for the same warm prefill */
        b.absorbed_prefill = 1;
        CHECK(model_forward(&m, &b, t + N - 4, 4, N - 4, FWD_EXPANDED, &ow, &err) == 0, "%s", err.msg);
        double d = max_rel_diff(warm, cold + (size_t)(N - 4) * V, (size_t)4 * V);
        CHECK(d < 1e-5 && d > 0, "absorbed prefill vs expanded: max relative difference %g", d);
        fwd_state_free(&a);
        fwd_state_free(&b);
    }
    free(cold);
    free(warm);
    model_free(&m);
}

/* A prefill longer than the run buffers runs in slices, with every row's
 * logits where they belong; a batch of groups longer than the buffers too. */
static void test_slices(void)
{
    struct model m;
    if (load(FIXTURE, 0, &m)) return;
    int V = m.cfg.vocab_size, N = 37;
    int32_t t[37];
    tokens(t, N, V);
    float *big = malloc((size_t)N * V * sizeof *big), *small = malloc((size_t)N * V * sizeof *small);
    float *last = malloc((size_t)V * sizeof *last);
    struct fwd_state a, b;
    if (!state(&m, N, 0, KV_TIER_F32, &a) && !state(&m, N, 5, KV_TIER_F32, &b)) {
        CHECK(b.bufs.cap == 5, "run buffers for %d rows", b.bufs.cap);
        struct colibri_err err = { 0 };
        struct fwd_out o1 = { .logits = big, .all_logits = 1 }, o2 = { .logits = small, .all_logits = 1 };
        int rc = model_forward(&m, &a, t, N, 0, FWD_EXPANDED, &o1, &err);
        rc = rc ? rc : model_forward(&m, &b, t, N, 0, FWD_EXPANDED, &o2, &err);
        CHECK(rc == 0, "%s", err.msg);
        CHECK(!memcmp(big, small, (size_t)N * V * sizeof *big), "a prefill in slices of 5 rows differs from one slice");
        double d;
        /* last-row logits only, and a second group after the sliced one */
        struct fwd_state c2;
        if (!state(&m, N, 0, KV_TIER_F32, &c2)) {
            fwd_state_free(&b);
            state(&m, N, 5, KV_TIER_F32, &b);
            float *two = malloc((size_t)2 * V * sizeof *two);
            /* group 0 (3 rows) ends in the first slice, group 1 (37 rows) in the last */
            int32_t both[3 + 37];
            memcpy(both, t, 3 * sizeof *t);
            memcpy(both + 3, t, sizeof t);
            struct fwd_group g[2] = { { &b, 0, 3, 0 }, { &c2, 3, N, 0 } };
            struct fwd_out o3 = { .logits = two };
            rc = model_forward_groups(&m, g, 2, both, FWD_EXPANDED, &o3, &err);
            CHECK(rc == 0, "%s", err.msg);
            CHECK(!memcmp(two, big + (size_t)2 * V, (size_t)V * sizeof *two), "group 0's last row");
            d = max_rel_diff(two + V, big + (size_t)(N - 1) * V, (size_t)V);
            CHECK(d == 0, "group 1's last row: %g", d);
            free(two);
            fwd_state_free(&c2);
        }
        fwd_state_free(&a);
        fwd_state_free(&b);
    }
    free(big);
    free(small);
    free(last);
    model_free(&m);
}

/* The hidden state handed out is what the final norm and lm_head turn into
 * the logits. */
static void test_hidden_state(void)
{
    struct model m;
    if (load(FIXTURE, 0, &m)) return;
    int V = m.cfg.vocab_size, hid = m.cfg.hidden_size, N = 9;
    int32_t t[9];
    tokens(t, N, V);
    float *lg = malloc((size_t)N * V * sizeof *lg), *hs = malloc((size_t)N * hid * sizeof *hs);
    float *nrm = malloc((size_t)hid * sizeof *nrm), *re = malloc((size_t)V * sizeof *re);
    struct fwd_state st;
    if (!state(&m, N, 0, KV_TIER_F32, &st)) {
        struct colibri_err err = { 0 };
        struct fwd_out o = { .logits = lg, .hidden = hs, .all_logits = 1 };
        CHECK(model_forward(&m, &st, t, N, 0, FWD_EXPANDED, &o, &err) == 0, "%s", err.msg);
        for (int s = 0; s < N; s += 4) {
            model_rmsnorm(nrm, hs + (size_t)s * hid, m.final_norm, 1, hid, m.cfg.rms_norm_eps);
            CHECK(model_linear(&m.lm_head, nrm, 1, re, NULL, NULL) == 0, "lm_head");
            CHECK(!memcmp(re, lg + (size_t)s * V, (size_t)V * sizeof *re), "row %d: hidden state -> logits", s);
        }
        fwd_state_free(&st);
    }
    free(lg); free(hs); free(nrm); free(re);
    model_free(&m);
}

/* The MoE layer goes through the store: one acquire and one prefetch hint
 * per routed expert per MoE layer for a decoded token. */
static void test_expert_store_calls(void)
{
    struct model m;
    if (load(FIXTURE, 0, &m)) return;
    const struct model_config *c = &m.cfg;
    int n_moe = c->num_hidden_layers - c->first_k_dense_replace;
    CHECK(n_moe > 0, "the fixture has MoE layers");
    CHECK(!strcmp(m.experts->ops->name, "resident"), "resident store");
    struct fwd_state st;
    if (!state(&m, 8, 0, KV_TIER_F32, &st)) {
        int32_t t[2] = { 1, 2 };
        struct colibri_err err = { 0 };
        CHECK(model_forward(&m, &st, t, 1, 0, FWD_EXPANDED, NULL, &err) == 0, "%s", err.msg);
        struct expert_store_stats s0, s1;
        expert_store_get_stats(m.experts, &s0);
        CHECK(model_forward(&m, &st, t + 1, 1, 1, FWD_ABSORBED, NULL, &err) == 0, "%s", err.msg);
        expert_store_get_stats(m.experts, &s1);
        uint64_t want = (uint64_t)n_moe * c->num_experts_per_tok;
        CHECK(s1.acquires - s0.acquires == want, "%llu acquires, want %llu",
              (unsigned long long)(s1.acquires - s0.acquires), (unsigned long long)want);
        CHECK(s1.prefetch_hints - s0.prefetch_hints == want, "%llu experts hinted",
              (unsigned long long)(s1.prefetch_hints - s0.prefetch_hints));
        CHECK(s1.misses == 0 && s1.bytes_read == 0, "a resident store reads nothing");
        fwd_state_free(&st);
    }
    struct mlp_weights *w0 = expert_store_resident_slot(m.experts, c->first_k_dense_replace, 0);
    CHECK(w0 && w0->gate.rows == c->moe_intermediate_size, "resident slot holds the expert");
    CHECK(!expert_store_resident_slot(m.experts, 0, 0) || c->first_k_dense_replace == 0, "dense layers hold no slot");
    const struct mlp_weights *got;
    struct colibri_err err = { 0 };
    CHECK(expert_store_acquire(m.experts, c->num_hidden_layers, 0, &got, &err) == COLIBRI_EINVAL &&
              strstr(err.msg, "outside"), "an expert outside the store is refused: %s", err.msg);
    int64_t per = 0;
    for (int e = 0; e < c->n_routed_experts; e++)
        per += model_mlp_bytes(expert_store_resident_slot(m.experts, c->first_k_dense_replace, e));
    CHECK(expert_store_total_bytes(m.experts) == per * n_moe, "total expert bytes");
    model_free(&m);
}

/* The streamed store computes exactly what the resident one does, at the
 * smallest budget (one token's experts, evicted all the time), reads each
 * miss's bytes once, and refuses to read a checkpoint changed on disk. */
static void test_streamed_store(void)
{
    struct model a, b;
    if (load(TINY, 1, &a)) return;
    struct colibri_err err = { 0 };
    struct model_bytes mb;
    model_bytes(&a, &mb);
    int64_t per = a.experts->ops->expert_bytes(a.experts, a.cfg.first_k_dense_replace, 0);
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 1, 0,
                                  mb.dense + mb.copies + mb.small + 2 * per + per / 2 };
    if (model_load(TINY, &lo, &b, &err)) { CHECK(0, "%s", err.msg); model_free(&a); return; }
    CHECK(!strcmp(b.experts->ops->name, "streamed") && expert_store_stream_slots(b.experts) == 2, "%s store, %d slots",
          b.experts->ops->name, expert_store_stream_slots(b.experts));
    int V = a.cfg.vocab_size;
    int32_t t[48];
    tokens(t, 48, V);
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    struct fwd_state sa, sb;
    if (!state(&a, 48, 0, KV_TIER_F32, &sa) && !state(&b, 48, 0, KV_TIER_F32, &sb)) {
        struct fwd_out oa = { .logits = la }, ob = { .logits = lb };
        int rc = model_forward(&a, &sa, t, 24, 0, FWD_EXPANDED, &oa, &err);
        rc = rc ? rc : model_forward(&b, &sb, t, 24, 0, FWD_EXPANDED, &ob, &err);
        CHECK(rc == 0 && !memcmp(la, lb, (size_t)V * sizeof *la), "prefill differs when streamed: %s", err.msg);
        for (int p = 24; p < 48 && !rc; p++) {
            rc = model_forward(&a, &sa, t + p, 1, p, FWD_ABSORBED, &oa, &err);
            rc = rc ? rc : model_forward(&b, &sb, t + p, 1, p, FWD_ABSORBED, &ob, &err);
            CHECK(!memcmp(la, lb, (size_t)V * sizeof *la), "decode at %d differs when streamed", p);
        }
        CHECK(rc == 0, "%s", err.msg);
        struct expert_store_stats st;
        expert_store_get_stats(b.experts, &st);
        /* every read expert's bytes read once: at least its payload, at most its slot */
        int64_t slot = b.experts->ops->resident_bytes(b.experts) / expert_store_stream_slots(b.experts);
        CHECK(st.misses > 0 && st.reads == st.misses + st.prefetch_reads && st.bytes_read >= st.reads * (uint64_t)per &&
                  st.bytes_read <= st.reads * (uint64_t)slot,
              "%llu misses, %llu reads, %llu bytes read (%lld to %lld per read)", (unsigned long long)st.misses,
              (unsigned long long)st.reads, (unsigned long long)st.bytes_read, (long long)per, (long long)slot);
        CHECK(st.predicted > 0 && st.predicted_hits <= st.predicted && st.prefetch_used <= st.prefetch_reads,
              "%llu of %llu routed experts predicted, %llu of %llu prefetched used",
              (unsigned long long)st.predicted_hits, (unsigned long long)st.predicted,
              (unsigned long long)st.prefetch_used, (unsigned long long)st.prefetch_reads);
        /* the per-layer counts add up to the store's totals (bytes as the reader threads counted them) */
        struct expert_layer_reads sum = { 0 };
        for (int l = 0; l < b.cfg.num_hidden_layers; l++) {
            struct expert_layer_reads lr;
            model_expert_layer_stats(b.experts, l, &lr);
            uint64_t all = lr.reads[0] + lr.reads[1] + lr.reads[2];
            CHECK(l < b.cfg.first_k_dense_replace ? all == 0 && lr.predict_steps == 0 : all > 0,
                  "layer %d: %llu reads", l, (unsigned long long)all);
            CHECK(lr.used[EXPERT_READ_MISS] == lr.reads[EXPERT_READ_MISS], "layer %d: a miss read not used", l);
            for (int w = 0; w < EXPERT_READ_WHYS; w++) {
                CHECK(lr.used[w] <= lr.reads[w] && lr.bytes[w] >= lr.reads[w] * (uint64_t)per &&
                          lr.bytes[w] <= lr.reads[w] * (uint64_t)slot,
                      "layer %d why %d: %llu of %llu used, %llu bytes", l, w, (unsigned long long)lr.used[w],
                      (unsigned long long)lr.reads[w], (unsigned long long)lr.bytes[w]);
                sum.reads[w] += lr.reads[w];
                sum.bytes[w] += lr.bytes[w];
                sum.used[w] += lr.used[w];
            }
            sum.predicted += lr.predicted;
            sum.predicted_hits += lr.predicted_hits;
            sum.predict_steps += lr.predict_steps;
            sum.predict_withheld += lr.predict_withheld;
        }
        CHECK(sum.reads[EXPERT_READ_MISS] == st.misses &&
                  sum.reads[EXPERT_READ_ROUTED] + sum.reads[EXPERT_READ_PREDICTED] == st.prefetch_reads &&
                  sum.used[EXPERT_READ_ROUTED] + sum.used[EXPERT_READ_PREDICTED] == st.prefetch_used &&
                  sum.bytes[0] + sum.bytes[1] + sum.bytes[2] == st.bytes_read && sum.predicted == st.predicted &&
                  sum.predicted_hits == st.predicted_hits && sum.predict_steps == st.predict_steps &&
                  sum.predict_withheld == st.predict_withheld,
              "per-layer sums differ from the totals: %llu bytes against %llu",
              (unsigned long long)(sum.bytes[0] + sum.bytes[1] + sum.bytes[2]), (unsigned long long)st.bytes_read);
        fwd_state_free(&sa);
        fwd_state_free(&sb);
    }
    model_free(&b);
    /* a checkpoint whose file changes under a streamed store */
    char dir[] = "/tmp/colibri-stream-XXXXXX", cmd[512], path[300];
    if (mkdtemp(dir)) {
        snprintf(cmd, sizeof cmd, "cp " TINY "/config.json " TINY "/model.safetensors %s/", dir);
        CHECK(system(cmd) == 0, "copy the model");
        if (!model_load(dir, &lo, &b, &err)) {
            struct fwd_state sc;
            if (!state(&b, 8, 0, KV_TIER_F32, &sc)) {
                CHECK(model_forward(&b, &sc, t, 4, 0, FWD_EXPANDED, NULL, &err) == 0, "%s", err.msg);
                snprintf(path, sizeof path, "%s/model.safetensors", dir);
                struct timespec ts[2] = { { 1, 0 }, { 1, 0 } };
                CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0, "touch");
                int rc = 0;
                for (int p = 4; p < 8 && !rc; p++) rc = model_forward(&b, &sc, t + p, 1, p, FWD_ABSORBED, NULL, &err);
                CHECK(rc == COLIBRI_EIO && strstr(err.msg, "changed on disk") && strstr(err.msg, path),
                      "a changed file is refused by name: %s", err.msg);
                fwd_state_free(&sc);
            }
            model_free(&b);
        } else {
            CHECK(0, "%s", err.msg);
        }
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "clean up");
    }
    free(la);
    free(lb);
    model_free(&a);
}

/* model_dot_f32's order as linear.h states it, spelled out lane by lane */
static float dot_in_stated_order(const float *a, const float *b, int n)
{
    float lane[16] = { 0 };
    int whole = n / 16 * 16;
    for (int l = 0; l < 16; l++)
        for (int i = l; i < whole; i += 16) {
            float prod = a[i] * b[i];
            lane[l] = lane[l] + prod;
        }
    for (int i = whole; i < n; i++) {
        float prod = a[i] * b[i];
        lane[0] = lane[0] + prod;
    }
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s = s + lane[l];
    return s;
}

static void test_dot_orders(void)
{
    enum { NMAX = 200, AMAX = 40 };
    static float a[AMAX][NMAX], b[NMAX];
    uint64_t x = 88172645463325252ull;
    for (int j = 0; j < AMAX; j++)
        for (int i = 0; i < NMAX; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            /* mixed magnitudes, so a different order gives different bits */
            a[j][i] = (float)((int64_t)(x % 2000001) - 1000000) * (x % 7 == 0 ? 1e-3f : 1e-7f);
        }
    for (int i = 0; i < NMAX; i++) b[i] = a[AMAX - 1][(i * 7) % NMAX] * 3.0f + 1e-4f;
    const int ns[] = { 1, 7, 16, 31, 64, 128, 192, 200 }, nas[] = { 1, 3, 16, 17, 33, 40 };
    const float *ap[AMAX];
    for (int j = 0; j < AMAX; j++) ap[j] = a[j];
    for (size_t u = 0; u < sizeof ns / sizeof *ns; u++) {
        int n = ns[u];
        for (int j = 0; j < AMAX; j++) {
            float got = model_dot_f32(a[j], b, n), want = dot_in_stated_order(a[j], b, n);
            CHECK(!memcmp(&got, &want, sizeof got), "n = %d row %d: %.9g, stated order %.9g", n, j, got, want);
        }
        for (size_t v = 0; v < sizeof nas / sizeof *nas; v++) {
            float out[AMAX + 1];
            out[nas[v]] = -1.0f;
            model_dot_f32_multi(ap, nas[v], b, n, out);
            for (int j = 0; j < nas[v]; j++) {
                float want = model_dot_f32(a[j], b, n);
                CHECK(!memcmp(&out[j], &want, sizeof want), "multi n = %d na = %d row %d: %.9g vs %.9g", n, nas[v],
                      j, out[j], want);
            }
            CHECK(out[nas[v]] == -1.0f, "multi n = %d wrote past na = %d", n, nas[v]);
        }
    }
    /* the value sums: rows of weights a[i] over the rows of b-shaped values
     * (vstride NMAX; t < tn[i], tn rising and not), against the plain loop */
    const int tns[9] = { 5, 6, 7, 8, 9, 1, 30, 2, 17 };
    for (size_t u = 0; u < sizeof ns / sizeof *ns; u++) {
        int n = ns[u];
        static float got[9][NMAX + 1], want[NMAX];
        float *outp[9];
        for (int i = 0; i < 9; i++) {
            outp[i] = got[i];
            got[i][n] = -1.0f;
        }
        model_weighted_sum_multi(ap, tns, 9, &a[0][0], NMAX, n, outp);
        for (int i = 0; i < 9; i++) {
            for (int k = 0; k < n; k++) {
                float acc = 0.0f;
                for (int t = 0; t < tns[i]; t++) {
                    float prod = a[i][t] * a[t][k];
                    acc = acc + prod;
                }
                want[k] = acc;
            }
            CHECK(!memcmp(got[i], want, (size_t)n * sizeof *want), "value sums n = %d row %d differ", n, i);
            CHECK(got[i][n] == -1.0f, "value sums n = %d row %d: wrote past n", n, i);
        }
    }
}

int main(void)
{
    RUN_TEST(test_dot_orders);
    RUN_TEST(test_decode_state_does_not_grow);
    RUN_TEST(test_kv_b_copy_is_bit_identical);
    RUN_TEST(test_prefill_forms_agree);
    RUN_TEST(test_slices);
    RUN_TEST(test_hidden_state);
    RUN_TEST(test_expert_store_calls);
    RUN_TEST(test_streamed_store);
    return CHECK_SUMMARY();
}
