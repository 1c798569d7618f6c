/* test_mtp_gen: speculative decoding with the MTP layer is lossless. On the
 * oracle fixture tests/oracle/deepseek_v3_mtp (random weights, an MTP layer,
 * tokenizer tests/tok/tiny) the generator's output with n_draft = 1, 2, 3 is
 * token for token the output without drafts, for greedy decoding and for
 * seeded sampling, in every KV tier and with streamed experts; the session
 * then holds the same positions. The MTP layer of a random model rarely
 * guesses right, so the draft hook also forces drafts: the known
 * continuation with every fifth-or-so draft wrong, which makes every draft
 * position accept and reject. The batched path (colibri_gen_batch_decode, the
 * server's) is checked the same way with generators drafting and not side by
 * side. Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

#define FIXTURE "tests/oracle/deepseek_v3_mtp"
#define TOKDIR "tests/tok/tiny"
#define N_CTX 512
#define N_PREDICT 160

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
    /* make test: f32 and one tier of each kind of consumer (a float, the
     * integer, the rotated); make test-full: every tier */
    static const char *const quick[] = { "f32", "bf16", "int8r", "q4_0", "tq3" };
    int ran = 0, all = 0;
    for (char *t = strtok(names, " "); t; t = strtok(NULL, " ")) {
        int on = check_full();
        for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++) on |= !strcmp(t, quick[i]);
        all++;
        if (!on) continue;
        check_lossless(m, t, 0.0f, p, n, first ? 1 : COLIBRI_GEN_MAX_DRAFT, first);
        first = 0;
        ran++;
    }
    if (ran < all) printf("  %d of %d KV tiers (make test-full: all)\n", ran, all);
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

/* The server's path: three generators on three sessions decode together in
 * colibri_gen_batch_decode, one drafting with forced drafts (K 3, some
 * wrong), one with the MTP layer's drafts (K 2, sampled), one without
 * drafts; each gives its own tokens without drafts, token for token, and its
 * session holds the same positions. Kept drafts come one per step. */
static void check_batched(colibri_model *m, const char *tier)
{
    enum { NG = 3 };
    static struct run ref[NG];
    const float temp[NG] = { 0.0f, 0.8f, 1.2f };
    const int n_draft[NG] = { 3, 2, 0 };
    int32_t p[NG][16];
    int n_p[NG];
    for (int i = 0; i < NG; i++) {
        n_p[i] = 6 + 3 * i;
        for (int j = 0; j < n_p[i]; j++) p[i][j] = (int32_t)((j * 31 + 7 * i + 3) % 400);
        generate(m, tier, p[i], n_p[i], temp[i], 0, NULL, &ref[i]);
    }
    struct forcing f = { &ref[0], n_p[0], 5 };
    struct colibri_err err = { 0 };
    colibri_session *s[NG] = { 0 };
    colibri_gen *g[NG] = { 0 };
    colibri_sampler *smp[NG] = { 0 };
    static struct run got[NG];
    int rc = 0;
    for (int i = 0; i < NG && !rc; i++) {
        memset(&got[i], 0, sizeof got[i]);
        struct colibri_session_opts so = { .n_ctx = N_CTX, .kv_tier = tier };
        struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
        sopt.temperature = temp[i];
        sopt.seed = 1234;
        sopt.logit_bias = no_eog;
        sopt.n_logit_bias = n_no_eog;
        rc = colibri_session_new(m, &so, &s[i], &err) || colibri_sampler_new(&sopt, colibri_model_vocab(m), &smp[i], &err) ||
             colibri_gen_new(m, s[i], tok, &g[i], &err);
        struct colibri_gen_opts o = { .sampler = smp[i], .n_predict = N_PREDICT, .n_draft = n_draft[i],
                                      .draft_hook = i == 0 ? force_drafts : NULL, .draft_user = &f };
        if (!rc) rc = colibri_gen_start(g[i], p[i], n_p[i], &o, &err);
        while (!rc && colibri_gen_phase(g[i]) == COLIBRI_GEN_PHASE_PREFILL)
            rc = colibri_gen_prefill(g[i], 0, &err) < 0;
    }
    int steps = 0;
    while (!rc) {
        colibri_gen *feed[NG];
        int n = 0;
        for (int i = 0; i < NG && !rc; i++) {
            while (!rc && colibri_gen_phase(g[i]) == COLIBRI_GEN_PHASE_SAMPLE) {
                struct colibri_gen_step st;
                if ((rc = colibri_gen_sample(g[i], &st, &err))) break;
                CHECK(st.n_tokens == 1 && st.logits, "generator %d: a step of %d tokens", i, st.n_tokens);
                if (st.n_tokens && got[i].n < N_PREDICT + 8) got[i].toks[got[i].n++] = st.tokens[0];
            }
            if (colibri_gen_phase(g[i]) == COLIBRI_GEN_PHASE_FEED) feed[n++] = g[i];
        }
        if (rc || n == 0) break;
        int done = 0;
        rc = colibri_gen_batch_decode(feed, n, &done, &err);
        CHECK(rc || done == n, "%d of %d advanced", done, n);
        steps++;
    }
    const char *tn = tier ? tier : "f32";
    CHECK(rc == 0, "%s batched: %s", tn, err.msg);
    for (int i = 0; i < NG; i++) {
        colibri_gen_get_stats(g[i], &got[i].st);
        got[i].pos = colibri_session_pos(s[i]);
        CHECK(same(&ref[i], &got[i]), "%s batched generator %d (T %.1f, %d drafts): differs at token %d (pos %d vs %d)",
              tn, i, temp[i], n_draft[i], first_diff(&ref[i], &got[i]), ref[i].pos, got[i].pos);
        for (int j = 0; j < n_draft[i]; j++)
            CHECK(got[i].st.n_drafted[j] > 0, "%s batched generator %d: no drafts at position %d", tn, i, j);
        colibri_gen_free(g[i]);
        colibri_sampler_free(smp[i]);
        colibri_session_free(s[i]);
    }
    CHECK(got[0].st.n_accepted[0] > 0 && got[0].st.n_accepted[2] < got[0].st.n_drafted[2] &&
          got[0].st.n_forwards < N_PREDICT / 2 && steps == N_PREDICT - 1, "%s batched: %d steps, generator 0 %d "
          "forwards, forced drafts kept %d/%d at position 1", tn, steps, got[0].st.n_forwards, got[0].st.n_accepted[0],
          got[0].st.n_drafted[0]);
}

static void test_lossless_batched(void)
{
    colibri_model *m = load(NULL);
    if (!m) return;
    check_batched(m, NULL);
    check_batched(m, "int8r");
    check_batched(m, "tq3");
    colibri_model_free(m);
    m = load("3M");   /* streamed experts */
    if (!m) return;
    check_batched(m, NULL);
    colibri_model_free(m);
}

/* The token distribution with drafts is the model's own, by a statistical
 * test with seeds the runs without drafts do not use (the identity checks
 * above use the same seed on both sides). Plain sampling (T 1, no top-k,
 * top-p or min-p); drafts forced to the greedy continuation, so that the
 * first drafted position keeps its draft with probability p(draft) and draws
 * otherwise. Per arm N = 1500 runs; the token at generated position 1 (the
 * first after a verify) is compared (a) by a two-sample chi-square over the
 * ids with at least 10 draws in both arms together, the rest pooled, at alpha
 * 1e-3 (critical value by the Wilson-Hilferty approximation), and (b) by a
 * two-proportion z-test on how often it is the draft, at alpha 1e-3 (|z| <
 * 3.29), since a verification fault shows there first.
 * Power: here p(draft) is about 0.3 (T 0.25). A fault that moves it by 0.1
 * (0.3 -> 0.4) gives z = 0.1 / sqrt(0.35 * 0.65 * 2 / 1500) = 5.7 on average:
 * found by (b) with probability about 0.99. A verifier that keeps every draft
 * moves it to 1 (z > 30); one that draws again after a rejection, keeping the
 * draft if that draw is it, moved it 0.33 -> 0.42 when put in by hand (N 500:
 * z 3.1, chi2 39 > 34.7; N 1500: z 5.9, chi2 101 > 75). (a) is the omnibus check of
 * the other ids. */
#define N_STAT 1500

static double chi2_crit(int df, double z)   /* z: the normal quantile of 1 - alpha */
{
    double a = 2.0 / (9.0 * df);
    return df * pow(1 - a + z * sqrt(a), 3);
}

static double two_sample_chi2(const int *a, const int *b, int n_bins, int *df)
{
    double na = 0, nb = 0, chi = 0;
    for (int i = 0; i < n_bins; i++) { na += a[i]; nb += b[i]; }
    int k = 0, pa = 0, pb = 0;
    for (int i = 0; i <= n_bins; i++) {
        int x, y;
        if (i < n_bins && a[i] + b[i] < 10) { pa += a[i]; pb += b[i]; continue; }
        if (i < n_bins) { x = a[i]; y = b[i]; } else { x = pa; y = pb; }
        if (x + y == 0) continue;
        double ea = (x + y) * na / (na + nb), eb = (x + y) * nb / (na + nb);
        chi += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
        k++;
    }
    *df = k - 1;
    return chi;
}

static void test_sampled_distribution(void)
{
    colibri_model *m = load(NULL);
    if (!m) return;
    int32_t p[16];
    int n = prompt(p);
    static struct run greedy;
    generate(m, NULL, p, n, 0.0f, 0, NULL, &greedy);
    struct forcing f = { &greedy, n, 0 };
    static int count[2][2][512];
    int kept = 0, drafted = 0;
    for (int arm = 0; arm < 2; arm++)
        for (int i = 0; i < N_STAT; i++) {
            struct colibri_err err = { 0 };
            struct colibri_session_opts so = { .n_ctx = 64 };
            colibri_session *s = NULL;
            colibri_gen *g = NULL;
            colibri_sampler *smp = NULL;
            struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
            sopt.temperature = 0.25f;   /* this random model's distribution is flat at 1 */
            sopt.top_k = 0;
            sopt.top_p = 1.0f;
            sopt.min_p = 0.0f;
            sopt.seed = (uint64_t)(arm * N_STAT + i + 1);
            sopt.logit_bias = no_eog;
            sopt.n_logit_bias = n_no_eog;
            int rc = colibri_session_new(m, &so, &s, &err) || colibri_sampler_new(&sopt, 512, &smp, &err) ||
                     colibri_gen_new(m, s, tok, &g, &err);
            struct colibri_gen_opts o = { .sampler = smp, .n_predict = 3, .n_draft = arm ? 2 : 0,
                                          .draft_hook = arm ? force_drafts : NULL, .draft_user = &f };
            /* the drafts follow the greedy text, whatever was sampled before */
            if (!rc) rc = colibri_gen_run(g, p, n, &o, NULL, NULL, &err);
            struct colibri_gen_stats st;
            colibri_gen_get_stats(g, &st);
            kept += st.n_accepted[0];
            drafted += st.n_drafted[0];
            const int32_t *ct = colibri_session_tokens(s);
            int pos = colibri_session_pos(s);
            CHECK(rc == 0 && pos == n + 2, "run %d: %s (pos %d)", i, err.msg, pos);
            if (!rc && pos == n + 2) {
                count[arm][0][ct[n + 1]]++;   /* generated position 1 is cached at n + 1 */
            }
            colibri_gen_free(g);
            colibri_sampler_free(smp);
            colibri_session_free(s);
        }
    int df;
    double chi = two_sample_chi2(count[0][0], count[1][0], 512, &df), crit = chi2_crit(df, 3.0902);
    printf("  position 1: chi2 %.1f, df %d, critical %.1f at alpha 1e-3; first drafts kept %d of %d\n", chi, df, crit,
           kept, drafted);
    CHECK(df >= 2 && chi < crit, "the sampled distribution with drafts differs: chi2 %.1f > %.1f (df %d)", chi, crit,
          df);
    int32_t d = greedy.toks[1];
    double pa = count[0][0][d] / (double)N_STAT, pb = count[1][0][d] / (double)N_STAT, pp = 0.5 * (pa + pb);
    double z = pp > 0 && pp < 1 ? (pb - pa) / sqrt(pp * (1 - pp) * 2.0 / N_STAT) : 0;
    printf("  the draft at position 1: %.3f of runs without drafts, %.3f with, z %.2f\n", pa, pb, z);
    CHECK(fabs(z) < 3.29, "the draft's frequency at position 1 differs: %.3f vs %.3f (z %.2f)", pa, pb, z);
    CHECK(kept > N_STAT / 20 && kept < drafted, "first drafts kept %d of %d: the test does not reach both paths", kept,
          drafted);
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
    RUN_TEST(test_lossless_batched);
    RUN_TEST(test_sampled_distribution);
    RUN_TEST(test_refusals);
    colibri_tokenizer_free(tok);
    return CHECK_SUMMARY();
}
