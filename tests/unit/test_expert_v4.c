/* DeepSeek-V4's routed experts through the streamed store, on the oracle
 * fixture tests/oracle_v4/deepseek_v4_tiny (4 MoE layers, hash layers 0-1,
 * 8 f32 experts, top-2), with a recording wrapper around the store:
 *   - hash layers: in every forward slice, before the slice's first expert
 *     is acquired, the store is told each hash layer's experts, in layer
 *     order, as far as the cache holds them (model/parts.h tokens_known):
 *     exactly the union of the tid2eid rows of the slice's tokens, read
 *     here from the checkpoint's own tensor;
 *   - prefill: a cold store reads each routed expert at most once per
 *     forward slice (a 20-token prompt in slices of 8, 8 and 4 rows), and
 *     reads ahead: a slice's experts beyond the cache's slots are read as
 *     slots free up, so no acquire starts a read of its own (no misses);
 *   - the logits of the prefill and of decoded tokens are the resident
 *     store's bit for bit;
 * at the smallest budget (top-k slots) and at five slots; and again with a
 * store that takes next-layer predictions (model/moe.h), where moreover
 *   - every slice (all are at most MOE_PREDICT_ROWS rows) predicts each
 *     top-k layer after another layer (2 and 3) once, during the layer
 *     before it, naming exactly the experts transformers routes to from the
 *     streams before that layer's FFN collapsed by the predicted layer's
 *     own pre-mix (tests/unit/expert_v4_predict_ref.h), and the hash
 *     layers predict nothing;
 *   - the read check counts an expert a prediction named like an acquired
 *     one (a prediction may read an expert the routing then does not use);
 *   - the per-layer prediction counts add up to the store's totals. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/expert_store_stream.h"
#include "model/forward.h"
#include "model/moe.h"

#include "expert_glm53_predict_ref.h"
#include "expert_v4_predict_ref.h"

#define FIXTURE "tests/oracle_v4/deepseek_v4_tiny"
#define GLM53_FIXTURE "tests/oracle_glm53/glm53_kda_hc4"
#define PROMPT 20
#define SLICE 8
#define DECODE 4
#define MAX_EVENTS 4096

/* ---- a wrapper recording the per-expert calls of the store it holds ---- */

struct event {
    int acquire;                /* 1 acquire, 0 prefetch, 2 a prediction (all it named) */
    int layer;
    uint64_t experts;           /* bit e: expert e named (prefetch) or acquired */
    uint64_t reads, misses;     /* the inner store's reads and misses after the call */
};

struct rec {
    struct expert_store base;
    struct expert_store *in;
    struct event ev[MAX_EVENTS];
    int n_ev, overflow;
};


static void note(struct rec *r, int acquire, int layer, uint64_t experts)
{
    if (r->n_ev == MAX_EVENTS) {
        r->overflow = 1;
        return;
    }
    struct expert_store_stats st;
    expert_store_get_stats(r->in, &st);
    r->ev[r->n_ev++] = (struct event){ acquire, layer, experts, st.reads, st.misses };
}

static int rec_acquire(struct expert_store *s, int layer, int expert, const struct mlp_weights **out,
                       struct colibri_err *err)
{
    struct rec *r = (struct rec *)s;
    int rc = expert_store_acquire(r->in, layer, expert, out, err);
    note(r, 1, layer, 1ull << expert);
    return rc;
}

static void rec_release(struct expert_store *s, int layer, int expert)
{
    expert_store_release(((struct rec *)s)->in, layer, expert);
}

static void rec_prefetch(struct expert_store *s, int layer, const int *experts, int n)
{
    struct rec *r = (struct rec *)s;
    uint64_t set = 0;
    for (int i = 0; i < n; i++) set |= 1ull << experts[i];
    expert_store_prefetch(r->in, layer, experts, n);
    note(r, 0, layer, set);
}

/* Takes predictions: the route hook records all a prediction named, the
 * store's predict reads what the precision gate let through. */
static void rec_predict(struct expert_store *s, int layer, const int *experts, int n)
{
    struct expert_store *in = ((struct rec *)s)->in;
    in->ops->predict(in, layer, experts, n);
}

static void rec_hook(void *user, int layer, const int *experts, int n, int predicted)
{
    uint64_t set = 0;
    for (int i = 0; i < n; i++) set |= 1ull << experts[i];
    if (predicted) note(user, 2, layer, set);
}

/* The counts (reads and predictions alike) are the inner store's. */
static struct expert_store *rec_local(const struct expert_store *s) { return ((const struct rec *)s)->in; }

static int64_t rec_expert_bytes(const struct expert_store *s, int layer, int expert)
{
    return model_expert_bytes(((const struct rec *)s)->in, layer, expert);
}

static int64_t rec_resident_bytes(const struct expert_store *s)
{
    return model_expert_resident_bytes(((const struct rec *)s)->in);
}

static int rec_slots(const struct expert_store *s) { return expert_store_stream_slots(((const struct rec *)s)->in); }

static void rec_free(struct expert_store *s) { (void)s; }

static const struct expert_store_ops REC_OPS = {
    .name = "recording",
    .start = model_expert_local_start,
    .finish = model_expert_local_finish,
    .free = rec_free,
    .acquire = rec_acquire,
    .release = rec_release,
    .prefetch = rec_prefetch,
    .expert_bytes = rec_expert_bytes,
    .resident_bytes = rec_resident_bytes,
    .cache_slots = rec_slots,
};

static const struct expert_store_ops REC_PREDICT_OPS = {
    .name = "recording, predicting",
    .start = model_expert_local_start,
    .finish = model_expert_local_finish,
    .predict = rec_predict,
    .local = rec_local,
    .free = rec_free,
    .acquire = rec_acquire,
    .release = rec_release,
    .prefetch = rec_prefetch,
    .expert_bytes = rec_expert_bytes,
    .resident_bytes = rec_resident_bytes,
    .cache_slots = rec_slots,
};

/* ---- the runs ---- */

static int32_t token(int i, int V) { return (int32_t)((i * 37 + 11) % V); }

/* A prefill of PROMPT tokens in slices of `slice` rows, then DECODE tokens;
 * the logits of the prompt's last row and each decoded one, [(1 + DECODE)][V]. */
static int run(const struct model *m, int slice, float *logits)
{
    struct colibri_err err = { 0 };
    struct compute_ctx cc = base_compute_ctx_make(1);
    struct fwd_state st;
    int rc = fwd_state_init(&st, m, PROMPT + DECODE, slice, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) return rc;
    int V = m->cfg.vocab_size;
    int32_t t[PROMPT + DECODE];
    for (int i = 0; i < PROMPT + DECODE; i++) t[i] = token(i, V);
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

static int popcount64(uint64_t x)
{
    int n = 0;
    for (; x; x &= x - 1) n++;
    return n;
}

/* The union of the hash layer's table rows over tokens [lo, hi), from the
 * checkpoint's tensor (I64 [vocab][K], unaligned in the mapping). */
static uint64_t hash_set(const struct model *m, int layer, int lo, int hi)
{
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.ffn.gate.tid2eid", layer);
    const struct st_tensor *t = st_find(&m->st, name);
    CHECK(t && t->dtype == ST_I64, "%s: not in the fixture as I64", name);
    if (!t) return 0;
    int K = m->cfg.num_experts_per_tok, V = m->cfg.vocab_size;
    uint64_t set = 0;
    for (int i = lo; i < hi; i++)
        for (int k = 0; k < K; k++) {
            int64_t e;
            memcpy(&e, (const char *)t->data + ((size_t)token(i, V) * K + k) * sizeof e, sizeof e);
            set |= 1ull << e;
        }
    return set;
}

/* Checks the events of one slice (tokens [lo, hi), events [a, b)) against
 * what the slice must have named and read. */
static void check_slice(const struct model *m, const struct rec *r, int slots, int lo, int hi, int a, int b,
                        int *early_seen)
{
    int H = 0;
    while (H < m->cfg.num_hidden_layers && m->cfg.hash_layer[H]) H++;
    /* the expected early hints: hash layers in order while the cache holds them all */
    struct event want[8];
    int n_want = 0, room = slots;
    for (int h = 0; h < H; h++) {
        uint64_t set = hash_set(m, h, lo, hi);
        if (popcount64(set) > room) break;
        room -= popcount64(set);
        want[n_want++] = (struct event){ 0, h, set, 0 };
    }
    want[n_want++] = (struct event){ 0, 0, hash_set(m, 0, lo, hi), 0 };   /* layer 0's own start */
    int first_acq = a;
    while (first_acq < b && r->ev[first_acq].acquire != 1) first_acq++;
    CHECK(first_acq - a == n_want, "tokens [%d, %d): %d prefetch calls before the first acquire, want %d", lo, hi,
          first_acq - a, n_want);
    for (int i = 0; i < n_want && i < first_acq - a; i++)
        CHECK(r->ev[a + i].layer == want[i].layer && r->ev[a + i].experts == want[i].experts,
              "tokens [%d, %d): prefetch %d named layer %d experts %#llx, want layer %d experts %#llx", lo, hi, i,
              r->ev[a + i].layer, (unsigned long long)r->ev[a + i].experts, want[i].layer,
              (unsigned long long)want[i].experts);
    *early_seen += n_want > 2;
    /* reads: at most one per (layer, expert) acquired in the slice, all
     * started ahead (no misses); with a prediction in the slice, one per
     * expert acquired or predicted, plus the misses: a predicted read holds
     * its slot until its layer's routing is known, so the read-ahead may
     * find no slot and an acquire read (again) what it displaced */
    uint64_t acq[64] = { 0 };
    int distinct = 0;
    for (int i = a; i < b; i++)
        for (uint64_t e = r->ev[i].acquire ? r->ev[i].experts & ~acq[r->ev[i].layer] : 0; e; e &= e - 1) {
            acq[r->ev[i].layer] |= e & -e;
            distinct++;
        }
    int predicted = 0;
    for (int i = a; i < b; i++) predicted += r->ev[i].acquire == 2;
    uint64_t reads = r->ev[b - 1].reads - (a ? r->ev[a - 1].reads : 0);
    uint64_t misses = r->ev[b - 1].misses - (a ? r->ev[a - 1].misses : 0);
    CHECK(predicted || misses == 0, "tokens [%d, %d): %llu misses with no prediction", lo, hi,
          (unsigned long long)misses);
    CHECK(reads <= (uint64_t)distinct + misses, "tokens [%d, %d): %llu expert reads (%llu misses) for %d experts "
          "acquired or predicted", lo, hi, (unsigned long long)reads, (unsigned long long)misses, distinct);
}

/* A fixture's next-layer prediction reference (tools/expert_predict_ref.py):
 * per layer predicted, the experts it routes to per token. */
struct predict_ref {
    int n_layers;
    const int *layer;
    const unsigned (*sets)[PROMPT + DECODE];
};
_Static_assert(V4_PREDICT_TOKENS == PROMPT + DECODE && GLM53_PREDICT_TOKENS == PROMPT + DECODE, "reference length");
static const struct predict_ref V4_REF = { V4_PREDICT_LAYERS, V4_PREDICT_LAYER, V4_PREDICT };
static const struct predict_ref GLM53_REF = { GLM53_PREDICT_LAYERS, GLM53_PREDICT_LAYER, GLM53_PREDICT };

static int ref_index(const struct predict_ref *ref, int layer)
{
    for (int j = 0; j < ref->n_layers; j++)
        if (ref->layer[j] == layer) return j;
    return -1;
}

/* m's experts streamed with slots_wanted cache slots behind the recorder r
 * (taking predictions or not); m's store becomes r's, *s the inner one. */
static int wrap_streamed(struct model *m, struct rec *r, int slots_wanted, int predicting, struct expert_store **s,
                         struct colibri_err *err)
{
    /* the slot size: a store holding every expert */
    int K = m->cfg.num_experts_per_tok, rc;
    if ((rc = expert_store_stream_new(&m->st, m->experts, (int64_t)1 << 30, K, NULL, s, err))) return rc;
    int64_t slot = model_expert_resident_bytes(*s) / expert_store_stream_slots(*s);
    expert_store_free(*s);
    *s = NULL;
    if ((rc = expert_store_stream_new(&m->st, m->experts, slot * slots_wanted, K, NULL, s, err))) return rc;
    CHECK(expert_store_stream_slots(*s) == slots_wanted, "%d slots, want %d", expert_store_stream_slots(*s),
          slots_wanted);
    r->base = (struct expert_store){ .ops = predicting ? &REC_PREDICT_OPS : &REC_OPS, .n_layers = (*s)->n_layers,
                                     .first_moe_layer = (*s)->first_moe_layer, .n_experts = (*s)->n_experts };
    if (predicting) {
        r->base.route_hook = rec_hook;
        r->base.route_user = r;
    }
    r->in = *s;
    m->experts = &r->base;
    return 0;
}

/* Every slice of at most MOE_PREDICT_ROWS rows (run's slices of `slice`
 * rows, then the decode's) predicted each of ref's layers once, naming the
 * union of the reference's experts over its tokens; no other layer (a hash
 * layer, the first) predicted; the layers' counts add up to the store's. */
static void check_predictions(const struct model *m, const struct rec *r, const struct expert_store *s,
                              const struct predict_ref *ref, int slice, int predicting)
{
    int small = slice <= MOE_PREDICT_ROWS ? (PROMPT + slice - 1) / slice : 0, n_small = small + DECODE;
    for (int j = 0; j < ref->n_layers; j++) {
        int L = ref->layer[j], seen = 0;
        for (int i = 0; i < r->n_ev; i++) {
            if (r->ev[i].acquire != 2 || r->ev[i].layer != L) continue;
            int lo = seen < small ? seen * slice : PROMPT + seen - small;
            int hi = seen < small ? (lo + slice < PROMPT ? lo + slice : PROMPT) : lo + 1;
            uint64_t want = 0;
            for (int t = lo; t < hi && t < PROMPT + DECODE; t++) want |= ref->sets[j][t];
            CHECK(r->ev[i].experts == want, "tokens [%d, %d): layer %d predicted %#llx, transformers %#llx", lo, hi,
                  L, (unsigned long long)r->ev[i].experts, (unsigned long long)want);
            seen++;
        }
        CHECK(seen == (predicting ? n_small : 0), "layer %d predicted %d times, want %d", L, seen,
              predicting ? n_small : 0);
    }
    for (int i = 0; i < r->n_ev; i++)
        if (r->ev[i].acquire == 2)
            CHECK(ref_index(ref, r->ev[i].layer) >= 0, "layer %d predicted (a hash layer, or the first)",
                  r->ev[i].layer);
    struct expert_store_stats es;
    expert_store_get_stats(s, &es);
    struct expert_layer_reads sum = { 0 };
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
        struct expert_layer_reads lr;
        model_expert_layer_stats(s, l, &lr);
        int want_steps = predicting && ref_index(ref, l) >= 0 ? n_small : 0;
        CHECK(lr.predict_steps == (uint64_t)want_steps && lr.predict_withheld <= lr.predict_steps &&
                  lr.predicted_hits <= lr.predicted && (lr.predicted > 0) == (want_steps > 0),
              "layer %d: %llu prediction steps (%llu withheld), want %d; %llu of %llu routed experts predicted", l,
              (unsigned long long)lr.predict_steps, (unsigned long long)lr.predict_withheld, want_steps,
              (unsigned long long)lr.predicted_hits, (unsigned long long)lr.predicted);
        sum.predicted += lr.predicted;
        sum.predicted_hits += lr.predicted_hits;
        sum.predict_steps += lr.predict_steps;
        sum.predict_withheld += lr.predict_withheld;
    }
    CHECK(sum.predicted == es.predicted && sum.predicted_hits == es.predicted_hits &&
              sum.predict_steps == es.predict_steps && sum.predict_withheld == es.predict_withheld,
          "the layers' prediction counts do not add up to the store's");
}

static void test_streamed(int slots_wanted, int slice, int predicting)
{
    struct model m;
    struct colibri_err err = { 0 };
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 0, 0, 0 };
    int rc = model_load(FIXTURE, &lo, &m, &err);
    CHECK(rc == 0, "%s: %s", FIXTURE, err.msg);
    if (rc) return;
    int V = m.cfg.vocab_size, K = m.cfg.num_experts_per_tok;
    CHECK(m.cfg.hash_layer[0] && m.cfg.hash_layer[1] && m.cfg.n_routed_experts <= 64, "fixture shape");
    size_t nl = (size_t)(1 + DECODE) * V;
    float *want = malloc(nl * sizeof *want), *got = malloc(nl * sizeof *got);
    struct rec *r = calloc(1, sizeof *r);
    struct expert_store *resident = m.experts, *s = NULL;
    if (!want || !got || !r || run(&m, SLICE, want)) goto done;
    if ((rc = wrap_streamed(&m, r, slots_wanted, predicting, &s, &err))) goto done;
    int slots = expert_store_stream_slots(s);
    rc = run(&m, slice, got);
    m.experts = resident;
    if (rc) goto done;
    CHECK(!memcmp(want, got, nl * sizeof *want), "%d slots: the logits differ from the resident store's", slots);
    /* read-ahead: every read was started by a prefetch before its acquire */
    struct expert_store_stats es;
    expert_store_get_stats(s, &es);
    CHECK(!predicting || es.predict_steps > 0, "no prediction");
    CHECK((predicting || es.misses == 0) && es.reads == es.misses + es.prefetch_reads, "%d slots: %llu of %llu reads started by an acquire (a "
          "miss), %llu by a prefetch", slots, (unsigned long long)es.misses, (unsigned long long)es.reads,
          (unsigned long long)es.prefetch_reads);
    CHECK(!r->overflow, "more than %d events", MAX_EVENTS);
    /* slices begin where layer 0 is named after a later layer's acquire */
    int starts[PROMPT + DECODE + 1], n_starts = 0, later = 1;
    for (int i = 0; i < r->n_ev; i++) {
        if (r->ev[i].acquire == 0 && r->ev[i].layer == 0 && later) starts[n_starts++] = i;
        later = r->ev[i].acquire == 1 ? r->ev[i].layer > 0 : later && r->ev[i].layer > 0;
    }
    int n_prefill = (PROMPT + slice - 1) / slice, n_slices = n_prefill + DECODE, early = 0;
    CHECK(n_starts == n_slices, "%d slices seen, want %d", n_starts, n_slices);
    for (int j = 0; j < n_starts && j < n_slices; j++) {
        int tlo = j < n_prefill ? j * slice : PROMPT + (j - n_prefill);
        int thi = j < n_prefill ? (tlo + slice < PROMPT ? tlo + slice : PROMPT) : tlo + 1;
        check_slice(&m, r, slots, tlo, thi, starts[j], j + 1 < n_starts ? starts[j + 1] : r->n_ev, &early);
    }
    /* with room for two layers' experts the decode names layer 1's ahead */
    if (slots >= 2 * K) CHECK(early >= DECODE, "%d slices named a later hash layer early", early);
    check_predictions(&m, r, s, &V4_REF, slice, predicting);
done:
    CHECK(rc == 0, "%s", err.msg);
    m.experts = resident;
    expert_store_free(s);
    free(r);
    free(want);
    free(got);
    model_free(&m);
}

/* GLM-5.3 (plain MoE layers under hyper-connections, a dense layer 0, MoE
 * layers 1 and 2): the logits under a predicting streamed store are the
 * resident store's, and layers 1 and 2 predict transformers' experts. */
static void test_glm53_predicted(int slots_wanted, int slice)
{
    struct model m;
    struct colibri_err err = { 0 };
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 0, 0, 0 };
    int rc = model_load(GLM53_FIXTURE, &lo, &m, &err);
    CHECK(rc == 0, "%s: %s", GLM53_FIXTURE, err.msg);
    if (rc) return;
    CHECK(m.cfg.n_routed_experts <= 64 && m.layers[0].parts.ffn->predict == NULL, "fixture shape");
    size_t nl = (size_t)(1 + DECODE) * m.cfg.vocab_size;
    float *want = malloc(nl * sizeof *want), *got = malloc(nl * sizeof *got);
    struct rec *r = calloc(1, sizeof *r);
    struct expert_store *resident = m.experts, *s = NULL;
    /* sliced alike: KDA's prefill bits depend on where a feed is cut */
    if (!want || !got || !r || run(&m, slice, want)) goto done;
    if ((rc = wrap_streamed(&m, r, slots_wanted, 1, &s, &err))) goto done;
    rc = run(&m, slice, got);
    m.experts = resident;
    if (rc) goto done;
    CHECK(!memcmp(want, got, nl * sizeof *want), "%d slots: the logits differ from the resident store's",
          slots_wanted);
    CHECK(!r->overflow, "more than %d events", MAX_EVENTS);
    check_predictions(&m, r, s, &GLM53_REF, slice, 1);
done:
    CHECK(rc == 0, "%s", err.msg);
    m.experts = resident;
    expert_store_free(s);
    free(r);
    free(want);
    free(got);
    model_free(&m);
}

_Static_assert(SLICE <= MOE_PREDICT_ROWS && PROMPT > MOE_PREDICT_ROWS, "the slices must straddle MOE_PREDICT_ROWS");

static void test_smallest_budget(void) { test_streamed(2, SLICE, 0); }
static void test_five_slots(void) { test_streamed(5, SLICE, 0); }
/* the prompt in one slice above MOE_PREDICT_ROWS: predictions in decode only */
static void test_predicted_smallest_budget(void) { test_streamed(2, PROMPT, 1); }
static void test_predicted_five_slots(void) { test_streamed(5, SLICE, 1); }
static void test_glm53_smallest_budget(void) { test_glm53_predicted(2, PROMPT); }
static void test_glm53_five_slots(void) { test_glm53_predicted(5, SLICE); }

int main(void)
{
    RUN_TEST(test_smallest_budget);
    RUN_TEST(test_five_slots);
    RUN_TEST(test_predicted_smallest_budget);
    RUN_TEST(test_predicted_five_slots);
    RUN_TEST(test_glm53_smallest_budget);
    RUN_TEST(test_glm53_five_slots);
    return CHECK_SUMMARY();
}
