/* test_mtp_gen: speculative decoding with the MTP layer is lossless. On the
 * oracle fixture tests/oracle/deepseek_v3_mtp (random weights, an MTP layer,
 * tokenizer tests/tok/tiny) the generator's output with n_draft = 1, 2, 3 is
 * token for token the output without drafts, for greedy decoding and for
 * seeded sampling, in every KV tier and with streamed experts; the session
 * then holds the same positions. The MTP layer of a random model rarely
 * guesses right, so the draft hook also forces drafts: the known
 * continuation with every fifth-or-so draft wrong, which makes every draft
 * position accept and reject. Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

#define FIXTURE "tests/oracle/deepseek_v3_mtp"
#define TOKDIR "tests/tok/tiny"
#define N_CTX 512
#define N_PREDICT 300

static colibri_tokenizer *tok;
/* the tokenizer's end-of-generation ids, banned so that every run is
 * N_PREDICT tokens long */
static struct colibri_logit_bias no_eog[16];
static size_t n_no_eog;

struct run {
    int32_t toks[N_PREDICT + 8];
    int n, pos, rc;
    struct colibri_gen_stats st;
};

/* The forced drafts: the reference continuation, wrong where the hash says. */
struct forcing {
    const struct run *ref;
    int n_prompt;
    int wrong_every;            /* 0: never wrong */
};

static void force_drafts(void *user, int pos, int32_t *drafts, int n)
{
    const struct forcing *f = user;
    for (int j = 0; j < n; j++) {
        int i = pos + j - f->n_prompt;  /* generated token i sits at position n_prompt + i */
        int32_t want = i >= 0 && i < f->ref->n ? f->ref->toks[i] : 0;
        if (f->wrong_every && (unsigned)(pos * 7 + j * 3) % (unsigned)f->wrong_every == 0) want = (want + 1) % 400;
        drafts[j] = want;
    }
}

static void generate(colibri_model *m, const char *tier, const int32_t *prompt, int n_prompt, float temp,
                     int n_draft, struct forcing *force, struct run *r)
{
    memset(r, 0, sizeof *r);
    struct colibri_err err = { 0 };
    struct colibri_session_opts so = { .n_ctx = N_CTX, .kv_tier = tier };
    colibri_session *s = NULL;
    colibri_gen *g = NULL;
    colibri_sampler *smp = NULL;
    struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
    sopt.temperature = temp;
    sopt.seed = 1234;
    sopt.logit_bias = no_eog;
    sopt.n_logit_bias = n_no_eog;
    r->rc = colibri_session_new(m, &so, &s, &err);
    if (!r->rc) r->rc = colibri_sampler_new(&sopt, colibri_model_vocab(m), &smp, &err);
    if (!r->rc) r->rc = colibri_gen_new(m, s, tok, &g, &err);
    struct colibri_gen_opts o = { .sampler = smp, .n_predict = N_PREDICT, .n_draft = n_draft };
    if (force) {
        o.draft_hook = force_drafts;
        o.draft_user = force;
    }
    if (!r->rc) r->rc = colibri_gen_start(g, prompt, n_prompt, &o, &err);
    while (!r->rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL) {
        int left = colibri_gen_prefill(g, 3, &err);   /* chunks: the MTP rows span them */
        if (left < 0) r->rc = left;
    }
    while (!r->rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE) {
        struct colibri_gen_step st;
        if ((r->rc = colibri_gen_sample(g, &st, &err))) break;
        CHECK(st.n_tokens >= 1 && st.n_tokens <= n_draft + 1, "a step of %d tokens with %d drafts", st.n_tokens,
              n_draft);
        for (int k = 0; k < st.n_tokens && r->n < N_PREDICT + 8; k++) r->toks[r->n++] = st.tokens[k];
        if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED) r->rc = colibri_gen_decode(g, &err);
    }
    CHECK(r->rc == 0, "tier %s, %d drafts: %s", tier ? tier : "f32", n_draft, err.msg);
    colibri_gen_get_stats(g, &r->st);
    r->pos = colibri_session_pos(s);
    colibri_gen_free(g);
    colibri_sampler_free(smp);
    colibri_session_free(s);
}

static int same(const struct run *a, const struct run *b)
{
    return a->n == b->n && a->pos == b->pos && !memcmp(a->toks, b->toks, (size_t)a->n * sizeof a->toks[0]);
}

static int first_diff(const struct run *a, const struct run *b)
{
    int i = 0;
    while (i < a->n && i < b->n && a->toks[i] == b->toks[i]) i++;
    return i;
}

/* Without drafts, with the MTP layer's drafts and with forced ones for
 * k = 1..k_max, then with every draft right: the same tokens. */
static void check_lossless(colibri_model *m, const char *tier, float temp, const int32_t *prompt, int n_prompt,
                           int k_min, int verbose)
{
    static struct run ref, r;
    generate(m, tier, prompt, n_prompt, temp, 0, NULL, &ref);
    CHECK(ref.n == N_PREDICT, "reference: %d tokens", ref.n);
    CHECK(ref.st.n_forwards == N_PREDICT - 1, "reference: %d forwards for %d tokens", ref.st.n_forwards, ref.n);
    const char *tn = tier ? tier : "f32";
    for (int k = k_min; k <= COLIBRI_GEN_MAX_DRAFT; k++) {
        generate(m, tier, prompt, n_prompt, temp, k, NULL, &r);
        CHECK(same(&ref, &r), "%s T=%.1f, %d drafts (MTP): differs at token %d (pos %d vs %d)", tn, temp, k,
              first_diff(&ref, &r), ref.pos, r.pos);
        struct forcing f = { &ref, n_prompt, 5 };
        generate(m, tier, prompt, n_prompt, temp, k, &f, &r);
        CHECK(same(&ref, &r), "%s T=%.1f, %d forced drafts: differs at token %d (pos %d vs %d)", tn, temp, k,
              first_diff(&ref, &r), ref.pos, r.pos);
        int acc = 0;
        for (int j = 0; j < k; j++) {
            CHECK(r.st.n_accepted[j] > 0 && r.st.n_accepted[j] < r.st.n_drafted[j],
                  "%s, %d forced drafts: position %d kept %d of %d", tn, k, j, r.st.n_accepted[j], r.st.n_drafted[j]);
            acc += r.st.n_accepted[j];
        }
        /* the first token comes from the prefill; a forward gives its kept
         * drafts and the sampler's token after them (unless the last kept
         * draft ended the generation) */
        CHECK(r.st.n_forwards + acc == r.n - 1 || r.st.n_forwards + acc == r.n, "%s: %d forwards + %d kept "
              "drafts for %d tokens", tn, r.st.n_forwards, acc, r.n);
        if (verbose)
            printf("  %s T=%.1f k=%d forced: %.2f tokens per forward, kept %d/%d %d/%d %d/%d\n", tn, temp, k,
                   (double)r.n / r.st.n_forwards, r.st.n_accepted[0], r.st.n_drafted[0], r.st.n_accepted[1],
                   r.st.n_drafted[1], r.st.n_accepted[2], r.st.n_drafted[2]);
    }
    /* all drafts right: k + 1 tokens per forward */
    struct forcing f = { &ref, n_prompt, 0 };
    generate(m, tier, prompt, n_prompt, temp, 3, &f, &r);
    CHECK(same(&ref, &r) && r.st.n_accepted[2] == r.st.n_drafted[2] && r.st.n_forwards <= (N_PREDICT + 3) / 4,
          "%s: all drafts right: %d forwards for %d tokens", tn, r.st.n_forwards, r.n);
}

static colibri_model *load(const char *ram)
{
    struct colibri_model_opts mo = { .ram = ram, .n_threads = 1 };
    colibri_model *m = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_model_load(FIXTURE, &mo, &m, &err) == 0, "%s: %s", FIXTURE, err.msg);
    return m;
}

static int prompt(int32_t *p)
{
    for (int i = 0; i < 9; i++) p[i] = (int32_t)((i * 37 + 5) % 400);
    return 9;
}

static void test_lossless_greedy_every_tier(void)
{
    colibri_model *m = load(NULL);
    if (!m) return;
    struct colibri_model_info info;
    colibri_model_get_info(m, &info);
    CHECK(info.n_mtp_layers == 1 && info.mtp_bytes > 0, "MTP layers %d, %lld bytes", info.n_mtp_layers,
          (long long)info.mtp_bytes);
    char names[256];
    colibri_kv_tier_names(names, sizeof names, " ");
    int32_t p[16];
    int n = prompt(p), first = 1;
    for (char *t = strtok(names, " "); t; t = strtok(NULL, " ")) {
        check_lossless(m, t, 0.0f, p, n, first ? 1 : COLIBRI_GEN_MAX_DRAFT, first);
        first = 0;
    }
    colibri_model_free(m);
}

static void test_lossless_sampled(void)
{
    colibri_model *m = load(NULL);
    if (!m) return;
    int32_t p[16];
    int n = prompt(p);
    check_lossless(m, NULL, 0.8f, p, n, 1, 1);
    check_lossless(m, "int8r", 1.2f, p, n, COLIBRI_GEN_MAX_DRAFT, 0);
    colibri_model_free(m);
}

static void test_lossless_streamed_experts(void)
{
    colibri_model *m = load("3M");
    if (!m) return;
    struct colibri_model_info info;
    colibri_model_get_info(m, &info);
    CHECK(!strcmp(info.expert_store, "streamed"), "expert store %s", info.expert_store);
    int32_t p[16];
    int n = prompt(p);
    check_lossless(m, NULL, 0.0f, p, n, COLIBRI_GEN_MAX_DRAFT, 0);
    struct colibri_expert_stats es;
    colibri_model_expert_stats(m, &es);
    CHECK(es.misses > 0, "no expert was read from disk");
    colibri_model_free(m);
}

/* n_draft on a model without an MTP layer, and out of range, are refused. */
static void test_refusals(void)
{
    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    CHECK(colibri_model_load("tests/oracle/deepseek_v3_tiny", NULL, &m, &err) == 0, "%s", err.msg);
    if (!m) return;
    struct colibri_session_opts so = { .n_ctx = 64 };
    colibri_session *s = NULL;
    colibri_gen *g = NULL;
    colibri_sampler *smp = NULL;
    struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
    CHECK(colibri_session_new(m, &so, &s, &err) == 0 && colibri_sampler_new(&sopt, 512, &smp, &err) == 0 &&
          colibri_gen_new(m, s, tok, &g, &err) == 0, "%s", err.msg);
    int32_t p[4] = { 5, 6, 7, 8 };
    struct colibri_gen_opts o = { .sampler = smp, .n_predict = 4, .n_draft = 2 };
    CHECK(colibri_gen_start(g, p, 4, &o, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "MTP"), "%s", err.msg);
    o.n_draft = COLIBRI_GEN_MAX_DRAFT + 1;
    CHECK(colibri_gen_start(g, p, 4, &o, &err) == COLIBRI_EINVAL && strstr(err.msg, "draft"), "%s", err.msg);
    colibri_gen_free(g);
    colibri_sampler_free(smp);
    colibri_session_free(s);
    colibri_model_free(m);
}

int main(void)
{
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load(TOKDIR, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", TOKDIR, err.msg);
        return 1;
    }
    for (int32_t id = 0; id < colibri_tokenizer_n_vocab(tok) && n_no_eog < 16; id++)
        if (colibri_tokenizer_is_eog(tok, id)) no_eog[n_no_eog++] = (struct colibri_logit_bias){ id, -1000.0f };
    RUN_TEST(test_lossless_greedy_every_tier);
    RUN_TEST(test_lossless_sampled);
    RUN_TEST(test_lossless_streamed_experts);
    RUN_TEST(test_refusals);
    colibri_tokenizer_free(tok);
    return CHECK_SUMMARY();
}
