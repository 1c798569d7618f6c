/* The routed-expert seam (model/expert_store.h): stores written here, outside
 * src/, plug into moe_forward with no other change and give the resident
 * store's bits.
 *   - a counting wrapper of the per-expert calls, run by the shared loop
 *     (model_expert_local_start/_finish): every routed expert acquired once
 *     per layer in ascending order, each released before the next, the
 *     prefetch hint naming the same experts;
 *   - a store with its own start/finish, shaped as a remote one: start runs
 *     every routed expert at once into its own buffer (before the shared
 *     experts), finish only adds, in ascending expert order; its `local`
 *     store answers for sizes, statistics and slots.
 * On the oracle fixture tests/oracle/deepseek_v3_tiny (f32) and
 * models/colibri-tiny (bf16): a prefill and decoded tokens, logits compared
 * bit for bit against the resident store's. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/expert_store_stream.h"
#include "model/forward.h"
#include "model/moe.h"

#define TINY "models/colibri-tiny"
#define FIXTURE "tests/oracle/deepseek_v3_tiny"
#define PROMPT 6
#define DECODE 3

/* ---- a counting wrapper of another store's per-expert calls ---- */

struct counting {
    struct expert_store base;
    struct expert_store *in;        /* owned */
    long acquires, releases, hinted, starts;
    int held;                       /* acquired, not yet released */
    int layer, last;                /* the layer being run, its last expert acquired */
    int bad_order, bad_hold, bad_hint;
    int hint[256], n_hint;          /* the last prefetch's experts */
};

static int count_start(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err)
{
    struct counting *c = (struct counting *)s;
    c->starts++;
    c->layer = b->layer;
    c->last = -1;
    return model_expert_local_start(s, b, err);
}

static int count_acquire(struct expert_store *s, int layer, int expert, const struct mlp_weights **out,
                         struct colibri_err *err)
{
    struct counting *c = (struct counting *)s;
    c->acquires++;
    if (layer != c->layer || expert <= c->last) c->bad_order++;
    if (c->held) c->bad_hold++;
    int named = 0;
    for (int i = 0; i < c->n_hint; i++) named |= c->hint[i] == expert;
    if (!named) c->bad_hint++;
    c->last = expert;
    c->held = 1;
    return expert_store_acquire(c->in, layer, expert, out, err);
}

static void count_release(struct expert_store *s, int layer, int expert)
{
    struct counting *c = (struct counting *)s;
    c->releases++;
    c->held = 0;
    expert_store_release(c->in, layer, expert);
}

static void count_prefetch(struct expert_store *s, int layer, const int *experts, int n)
{
    struct counting *c = (struct counting *)s;
    c->hinted += n;
    c->n_hint = n < 256 ? n : 256;
    memcpy(c->hint, experts, (size_t)c->n_hint * sizeof *experts);
    expert_store_prefetch(c->in, layer, experts, n);
}

static int64_t count_expert_bytes(const struct expert_store *s, int layer, int expert)
{
    return model_expert_bytes(((const struct counting *)s)->in, layer, expert);
}

static int64_t count_resident_bytes(const struct expert_store *s)
{
    return model_expert_resident_bytes(((const struct counting *)s)->in);
}

static void count_free(struct expert_store *s)
{
    expert_store_free(((struct counting *)s)->in);
    free(s);
}

static const struct expert_store_ops COUNTING_OPS = {
    .name = "counting",
    .start = count_start,
    .finish = model_expert_local_finish,
    .free = count_free,
    .acquire = count_acquire,
    .release = count_release,
    .prefetch = count_prefetch,
    .expert_bytes = count_expert_bytes,
    .resident_bytes = count_resident_bytes,
};

/* ---- a store running its experts at start, as a remote one would ---- */

struct early {
    struct expert_store base;
    struct expert_store *in;        /* owned: the local store */
    int inter;
    float *res;                     /* every routed row's output, expert after expert */
    int *tok;
    float *tw;
    long starts, finishes;
    int open_layer;                 /* started, not finished (-1: none) */
    int bad_pair;
};

static int early_start(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err)
{
    struct early *q = (struct early *)s;
    q->starts++;
    if (q->open_layer >= 0 || b->layer < s->first_moe_layer) q->bad_pair++;
    q->open_layer = b->layer;
    int hid = b->hid, rc = 0;
    float *in = malloc((size_t)b->n * hid * sizeof *in), *g = malloc((size_t)b->n * q->inter * sizeof *g),
          *u = malloc((size_t)b->n * q->inter * sizeof *u);
    q->res = malloc((size_t)b->n * b->K * hid * sizeof *q->res);
    q->tok = malloc((size_t)b->n * sizeof *q->tok);
    q->tw = malloc((size_t)b->n * sizeof *q->tw);
    if (!in || !g || !u || !q->res || !q->tok || !q->tw) rc = COLIBRI_ENOMEM;
    int64_t off = 0;
    for (int j = 0; j < b->n_used && !rc; j++) {
        int e = b->list[j], cnt = model_expert_batch_rows(b, e, q->tok, q->tw);
        for (int i = 0; i < cnt; i++)
            memcpy(in + (int64_t)i * hid, b->x + (int64_t)q->tok[i] * hid, (size_t)hid * sizeof *in);
        const struct mlp_weights *w;
        if ((rc = expert_store_acquire(q->in, b->layer, e, &w, err))) break;
        rc = model_mlp_forward(w, in, cnt, q->res + off * hid, g, u, b->qs, err);
        expert_store_release(q->in, b->layer, e);
        off += cnt;
    }
    free(in);
    free(g);
    free(u);
    return rc;
}

static int early_finish(struct expert_store *s, const struct expert_batch *b, float *out, struct colibri_err *err)
{
    struct early *q = (struct early *)s;
    q->finishes++;
    if (q->open_layer != b->layer) q->bad_pair++;
    q->open_layer = -1;
    int64_t off = 0;
    for (int j = 0; j < b->n_used; j++) {
        int cnt = model_expert_batch_rows(b, b->list[j], q->tok, q->tw);
        model_expert_batch_add(out, q->tok, q->tw, q->res + off * b->hid, cnt, b->hid);
        off += cnt;
    }
    free(q->res);
    free(q->tok);
    free(q->tw);
    q->res = NULL;
    return 0;
}

static struct expert_store *early_local(const struct expert_store *s) { return ((const struct early *)s)->in; }

static void early_free(struct expert_store *s)
{
    expert_store_free(((struct early *)s)->in);
    free(s);
}

static const struct expert_store_ops EARLY_OPS = {
    .name = "early",
    .start = early_start,
    .finish = early_finish,
    .free = early_free,
    .local = early_local,
};

/* ---- the runs ---- */

static int load(const char *dir, struct model *m)
{
    struct colibri_err err = { 0 };
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 0, 0, 0 };
    int rc = model_load(dir, &lo, m, &err);
    CHECK(rc == 0, "%s: %s", dir, err.msg);
    return rc;
}

/* A prefill of PROMPT tokens, then DECODE tokens; the logits of each step,
 * [(1 + DECODE)][V]. */
static int run(const struct model *m, float *logits)
{
    struct colibri_err err = { 0 };
    struct compute_ctx cc = base_compute_ctx_make(0);
    struct fwd_state st;
    int rc = fwd_state_init(&st, m, PROMPT + DECODE, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) return rc;
    int V = m->cfg.vocab_size;
    int32_t t[PROMPT + DECODE];
    for (int i = 0; i < PROMPT + DECODE; i++) t[i] = (int32_t)((i * 7919 + 13) % V);
    struct fwd_out o = { .logits = logits };
    rc = model_forward(m, &st, t, PROMPT, 0, FWD_EXPANDED, &o, &err);
    for (int p = 0; p < DECODE && !rc; p++) {
        o.logits = logits + (size_t)(p + 1) * V;
        rc = model_forward(m, &st, t + PROMPT + p, 1, PROMPT + p, FWD_ABSORBED, &o, &err);
    }
    CHECK(rc == 0, "%s", err.msg);
    fwd_state_free(&st);
    return rc;
}

static void wrap(struct expert_store *w, const struct expert_store_ops *ops, const struct expert_store *in)
{
    *w = (struct expert_store){ .ops = ops, .n_layers = in->n_layers, .first_moe_layer = in->first_moe_layer,
                                .n_experts = in->n_experts };
}

static void seam_on(const char *dir)
{
    struct model m;
    if (load(dir, &m)) return;
    const struct model_config *c = &m.cfg;
    int V = c->vocab_size, n_moe = c->num_hidden_layers - c->first_k_dense_replace;
    size_t bytes = (size_t)(1 + DECODE) * V * sizeof(float);
    float *want = malloc(bytes), *got = malloc(bytes);
    struct model_bytes mb0, mb1;
    model_bytes(&m, &mb0);
    if (run(&m, want)) goto done;

    struct counting *cw = calloc(1, sizeof *cw);
    wrap(&cw->base, &COUNTING_OPS, m.experts);
    cw->in = m.experts;
    m.experts = &cw->base;
    memset(got, 0, bytes);
    if (!run(&m, got)) {
        CHECK(!memcmp(want, got, bytes), "%s: the counting store's logits differ from the resident store's", dir);
        long calls = 1 + DECODE;   /* forward calls, each through every MoE layer */
        CHECK(cw->starts == calls * n_moe, "%s: %ld starts, want %ld", dir, cw->starts, calls * n_moe);
        CHECK(cw->acquires == cw->releases && cw->acquires == cw->hinted && cw->acquires >= calls * n_moe,
              "%s: %ld acquires, %ld releases, %ld hinted", dir, cw->acquires, cw->releases, cw->hinted);
        CHECK(!cw->bad_order && !cw->bad_hold && !cw->bad_hint,
              "%s: %d acquires out of ascending order, %d while holding one, %d not hinted", dir, cw->bad_order,
              cw->bad_hold, cw->bad_hint);
    }
    m.experts = cw->in;
    free(cw);

    struct expert_store_stats s0, s1;
    expert_store_get_stats(m.experts, &s0);
    struct early *ew = calloc(1, sizeof *ew);
    wrap(&ew->base, &EARLY_OPS, m.experts);
    ew->in = m.experts;
    ew->inter = c->moe_intermediate_size;
    ew->open_layer = -1;
    m.experts = &ew->base;
    model_bytes(&m, &mb1);
    CHECK(!memcmp(&mb0, &mb1, sizeof mb0), "%s: model_bytes differ through the local store", dir);
    CHECK(expert_store_resident_slot(m.experts, c->first_k_dense_replace, 0) ==
              expert_store_resident_slot(ew->in, c->first_k_dense_replace, 0) &&
              expert_store_stream_slots(m.experts) == 0,
          "%s: slots are the local store's", dir);
    CHECK(!strcmp(expert_store_local(m.experts)->ops->name, "resident"), "the local store's name");
    memset(got, 0, bytes);
    if (!run(&m, got)) {
        CHECK(!memcmp(want, got, bytes), "%s: the early store's logits differ from the resident store's", dir);
        CHECK(ew->starts == (long)(1 + DECODE) * n_moe && ew->finishes == ew->starts && !ew->bad_pair,
              "%s: %ld starts, %ld finishes, %d unpaired", dir, ew->starts, ew->finishes, ew->bad_pair);
        expert_store_get_stats(m.experts, &s1);
        CHECK(s1.acquires > s0.acquires, "%s: statistics are the local store's", dir);
    }
done:
    free(want);
    free(got);
    model_free(&m);
}

/* ---- the prediction's precision gate (model/moe.h) ---- */

/* A reference of the gate kept from what the store is told: the route hook
 * sees every prediction (read or withheld) and every layer's routing; the
 * store's predict op sees only the experts let read. The ranks (each
 * predicted expert's best rank over the rows, + 1) are the one thing taken
 * from the session: its pending prediction when the hook is told of it. */
struct gate_ref {
    struct expert_store base;
    struct expert_store *in;
    const struct run_bufs *b;       /* the session's buffers, for the ranks */
    int E, K, decode;
    unsigned char pred[8][64];      /* [layer][expert]: the pending prediction's ranks + 1 */
    int pending[8];
    float prec[8][8];               /* [layer][rank]: the gate's running precision, computed here */
    unsigned char expect[8][64];    /* [layer][expert]: the reads the reference lets through */
    int n_expect[8];
    long reads, withheld, wrong, bad_ranks;
};

static void gate_hook(void *user, int layer, const int *experts, int n, int predicted)
{
    struct gate_ref *g = user;
    if (predicted) {
        const unsigned char *rank = g->b->moe_pred + (size_t)(layer & 1) * g->E;
        int seen[8] = { 0 };
        memset(g->pred[layer], 0, sizeof g->pred[layer]);
        memset(g->expect[layer], 0, sizeof g->expect[layer]);
        g->n_expect[layer] = 0;
        for (int i = 0; i < n; i++) {
            int e = experts[i], r = rank[e];
            if (r < 1 || r > g->K) {
                g->bad_ranks++;
                continue;
            }
            seen[r - 1]++;
            g->pred[layer][e] = (unsigned char)r;
            if (g->prec[layer][r - 1] >= MOE_PREDICT_MIN_PRECISION) {
                g->expect[layer][e] = 1;
                g->n_expect[layer]++;
            }
        }
        for (int r = 0; g->decode && r < g->K; r++) g->bad_ranks += seen[r] != 1;   /* one row: ranks 1..K once */
        g->pending[layer] = 1;
        if (!g->n_expect[layer]) g->withheld++;
        return;
    }
    if (!g->pending[layer]) return;
    unsigned char routed[64] = { 0 };
    for (int i = 0; i < n; i++) routed[experts[i]] = 1;
    for (int r = 1; r <= g->K; r++) {
        int cnt = 0, hit = 0;
        for (int e = 0; e < g->E; e++)
            if (g->pred[layer][e] == r) {
                cnt++;
                hit += routed[e];
            }
        if (cnt) g->prec[layer][r - 1] += ((float)hit / (float)cnt - g->prec[layer][r - 1]) * 0.125f;
    }
    g->pending[layer] = 0;
}

static void gate_predict(struct expert_store *s, int layer, const int *experts, int n)
{
    struct gate_ref *g = (struct gate_ref *)s;
    g->reads++;
    int ok = n == g->n_expect[layer];
    for (int i = 0; i < n && ok; i++) ok = g->expect[layer][experts[i]];
    g->wrong += !ok;
}

static int gate_start(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err)
{
    return model_expert_local_start(s, b, err);
}

static int gate_acquire(struct expert_store *s, int layer, int expert, const struct mlp_weights **out,
                        struct colibri_err *err)
{
    return expert_store_acquire(((struct gate_ref *)s)->in, layer, expert, out, err);
}

static void gate_release(struct expert_store *s, int layer, int expert)
{
    expert_store_release(((struct gate_ref *)s)->in, layer, expert);
}

static void gate_prefetch(struct expert_store *s, int layer, const int *experts, int n) {}

static const struct expert_store_ops GATE_OPS = {
    .name = "gate-reference",
    .start = gate_start,
    .finish = model_expert_local_finish,
    .free = count_free,
    .acquire = gate_acquire,
    .release = gate_release,
    .prefetch = gate_prefetch,
    .predict = gate_predict,
    .expert_bytes = count_expert_bytes,
    .resident_bytes = count_resident_bytes,
};

/* On colibri-tiny (5 MoE layers, 16 experts, top-2): each prediction reads
 * exactly its experts whose rank's running precision in the reference is at
 * or above the gate, the session's precisions equal the reference's, a rank
 * forced below the gate withholds its experts while the other rank still
 * reads, every rank forced below withholds the whole step, and the logits
 * are the resident store's bit for bit throughout. */
static void test_prediction_gate(void)
{
    struct model m;
    if (load(TINY, &m)) return;
    const struct model_config *c = &m.cfg;
    int V = c->vocab_size, L = c->num_hidden_layers;
    int K = c->num_experts_per_tok;
    CHECK(L <= 8 && c->n_routed_experts <= 64 && K == 2, "fixture sizes");
    enum { STEPS = 24 };
    float *want = malloc((size_t)V * sizeof *want), *got = malloc((size_t)V * sizeof *got);
    struct gate_ref *g = calloc(1, sizeof *g);
    struct colibri_err err = { 0 };
    struct compute_ctx cc = base_compute_ctx_make(0);
    struct expert_store *resident = m.experts;
    struct fwd_state ref, st;
    int rc = fwd_state_init(&ref, &m, PROMPT + STEPS, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
    if (rc) goto done;
    if ((rc = fwd_state_init(&st, &m, PROMPT + STEPS, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err))) {
        fwd_state_free(&ref);
        goto done;
    }
    wrap(&g->base, &GATE_OPS, m.experts);
    g->in = m.experts;
    g->base.route_hook = gate_hook;
    g->base.route_user = g;
    g->b = &st.bufs;
    g->E = c->n_routed_experts;
    g->K = K;
    for (int l = 0; l < 8; l++)
        for (int r = 0; r < 8; r++) g->prec[l][r] = 1.0f;
    long reads_one_rank = -1;
    int32_t t[PROMPT + STEPS];
    for (int i = 0; i < PROMPT + STEPS; i++) t[i] = (int32_t)((i * 7919 + 13) % V);
    int same = 1;
    for (int p = 0; p <= STEPS && !rc; p++) {
        int n = p ? 1 : PROMPT, pos = p ? PROMPT + p - 1 : 0;
        const int32_t *tok = p ? t + PROMPT + p - 1 : t;
        enum fwd_mode mode = p ? FWD_ABSORBED : FWD_EXPANDED;
        g->decode = p > 0;
        if (p == STEPS / 3) {       /* rank 1 below the gate everywhere: only rank 0 reads */
            for (int l = 0; l < L; l++) st.bufs.moe_pred_prec[l * K + 1] = g->prec[l][1] = 0.0f;
            reads_one_rank = g->reads;
        }
        if (p == STEPS / 3 + 1) reads_one_rank = g->reads - reads_one_rank;
        if (p == 2 * STEPS / 3) {   /* every rank below the gate: the next predictions are withheld */
            for (int l = 0; l < L * K; l++) st.bufs.moe_pred_prec[l] = 0.0f;
            memset(g->prec, 0, sizeof g->prec);
        }
        m.experts = resident;
        struct fwd_out o = { .logits = want };
        rc = model_forward(&m, &ref, tok, n, pos, mode, &o, &err);
        m.experts = &g->base;
        o.logits = got;
        if (!rc) rc = model_forward(&m, &st, tok, n, pos, mode, &o, &err);
        same &= !rc && !memcmp(want, got, (size_t)V * sizeof *want);
    }
    CHECK(same, "the gated store's logits differ from the resident store's");
    CHECK(g->wrong == 0, "%ld predictions read other experts than the reference's gate lets through", g->wrong);
    CHECK(g->bad_ranks == 0, "%ld predicted experts without a rank in 1..K (or a decode step's ranks not 1..K once)",
          g->bad_ranks);
    CHECK(reads_one_rank > 0, "with rank 1 closed, rank 0 did not read (%ld reads)", reads_one_rank);
    CHECK(g->reads > 0 && g->withheld >= L - c->first_k_dense_replace - 1,
          "%ld predictions read, %ld withheld", g->reads, g->withheld);
    for (int l = 0; l < L; l++)
        for (int r = 0; r < K; r++)
            CHECK(fabsf(st.bufs.moe_pred_prec[l * K + r] - g->prec[l][r]) < 1e-6f,
                  "layer %d rank %d: precision %g, reference %g", l, r, st.bufs.moe_pred_prec[l * K + r],
                  g->prec[l][r]);
    fwd_state_free(&st);
    fwd_state_free(&ref);
done:
    CHECK(rc == 0, "%s", err.msg);
    m.experts = resident;
    free(g);
    free(want);
    free(got);
    model_free(&m);
}

static void test_stores_plug_in(void)
{
    seam_on(FIXTURE);
    seam_on(TINY);
}

/* model_expert_batch_rows gathers a batch's rows of one expert in row order;
 * model_expert_batch_add adds them weighted, element by element. */
static void test_batch_helpers(void)
{
    int idx[3 * 2] = { 4, 1, 1, 7, 2, 4 };
    float wts[3 * 2] = { 0.5f, 0.25f, 2.0f, 1.0f, 3.0f, 0.125f };
    struct expert_batch b = { .layer = 0, .n = 3, .K = 2, .hid = 2, .idx = idx, .wts = wts };
    int tok[3];
    float tw[3];
    CHECK(model_expert_batch_rows(&b, 4, tok, tw) == 2 && tok[0] == 0 && tok[1] == 2 && tw[0] == 0.5f &&
              tw[1] == 0.125f, "expert 4's rows");
    CHECK(model_expert_batch_rows(&b, 1, tok, tw) == 2 && tok[0] == 0 && tok[1] == 1 && tw[0] == 0.25f && tw[1] == 2.0f,
          "expert 1's rows");
    CHECK(model_expert_batch_rows(&b, 3, tok, tw) == 0, "an expert no row routes to");
    float out[3 * 2] = { 1, 1, 1, 1, 1, 1 }, res[2 * 2] = { 2, 4, 8, 16 };
    model_expert_batch_add(out, (int[]){ 0, 2 }, (float[]){ 0.5f, 0.25f }, res, 2, 2);
    const float expect[6] = { 2, 3, 1, 1, 3, 5 };
    CHECK(!memcmp(out, expect, sizeof out), "weighted add: %g %g %g %g %g %g", out[0], out[1], out[2], out[3], out[4],
          out[5]);
}

int main(void)
{
    RUN_TEST(test_batch_helpers);
    RUN_TEST(test_stores_plug_in);
    RUN_TEST(test_prediction_gate);
    return CHECK_SUMMARY();
}
