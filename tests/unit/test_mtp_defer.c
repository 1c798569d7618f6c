/* test_mtp_defer: the deferred MTP prompt pass of `--mtp auto` (api/spec.c
 * (3)) on the bundled models/colibri-tiny, whose MTP head is trained.
 *  - A prompt no longer than the kept window, prefilled deferred (whole or in
 *    slices), drafts exactly what the eager prefill drafts: the first draft
 *    computes the same MTP rows the eager pass would have.
 *  - Under auto the generator's deterministic first probe (after the plain
 *    forwards that give the plain rate) drafts from the deferred rows, over
 *    prompts longer than the window, and those drafts are kept often; the
 *    tokens are the ones without drafts. (The first check is the one a
 *    broken pass fails: stale rows cost colibri-tiny's drafts little.)
 *  - Positions then decoded without drafts under auto join the window: the
 *    next probe drafts what the eager path drafts.
 *  - In a batch (the server's slots), auto generators probe one at a time:
 *    three generations started together reach their first probe in the same
 *    iteration, and only the first of them drafts while its probe runs; the
 *    tokens are the ones without drafts.
 * Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "check.h"
#include "colibri.h"

#define TINY "models/colibri-tiny"
#define N_CTX 256
#define K 3

static colibri_model *model;
static colibri_tokenizer *tok;

static colibri_session *new_session(void)
{
    struct colibri_session_opts so = { .n_ctx = N_CTX };
    colibri_session *s = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_session_new(model, &so, &s, &err) == 0, "session: %s", err.msg);
    CHECK(colibri_spec_enable(s, &err) == 0, "spec: %s", err.msg);
    return s;
}

/* Prefills p[0..n) in slices of `slice` (deferred or not), then drafts K
 * after x. Returns the number of drafts. */
static int prefill_draft(const int32_t *p, int n, int slice, int defer, int32_t x, int32_t *drafts)
{
    colibri_session *s = new_session();
    struct colibri_err err = { 0 };
    for (int i = 0; i < n; i += slice) {
        int k = n - i < slice ? n - i : slice;
        CHECK(colibri_spec_prefill(s, p + i, k, NULL, defer, &err) == 0, "prefill: %s", err.msg);
    }
    int nd = colibri_spec_draft(s, x, K, colibri_tokenizer_n_vocab(tok), drafts, &err);
    CHECK(nd >= 0, "draft: %s", err.msg);
    colibri_session_free(s);
    return nd;
}

static void test_deferred_drafts_equal_eager(void)
{
    int differ = 0, n_cases = 0;
    for (int c = 0; c < 12; c++) {
        int32_t p[32];
        int n = 4 + (c * 7) % 28;                       /* 4..31: inside the window */
        for (int i = 0; i < n; i++) p[i] = (int32_t)((i * 53 + c * 31 + 7) % 380 + 10);
        int32_t x = p[(c * 5) % n], eager[K], whole[K], sliced[K];
        int ne = prefill_draft(p, n, n, 0, x, eager);
        int nw = prefill_draft(p, n, n, 1, x, whole);
        int ns = prefill_draft(p, n, 3, 1, x, sliced);   /* slices: the window joins them */
        CHECK(ne == K && nw == K && ns == K, "case %d: %d, %d, %d drafts", c, ne, nw, ns);
        differ += memcmp(eager, whole, sizeof eager) != 0 || memcmp(eager, sliced, sizeof eager) != 0;
        n_cases++;
    }
    CHECK(differ == 0, "%d of %d prompts drafted differently deferred than eager", differ, n_cases);
}

/* A prompt p[0..n) then `steps` tokens fed one by one without drafts, then
 * K drafts after x. mode 0: eager (--mtp on: the prefill fills the MTP rows
 * and a draft before each step fills the step's row); mode 1: auto
 * (deferred prefill, plain steps: the rows wait in the window). */
static int decode_draft(const int32_t *p, int n, const int32_t *steps, int n_steps, int mode, int32_t x,
                        int32_t *drafts)
{
    colibri_session *s = new_session();
    struct colibri_err err = { 0 };
    int n_text = colibri_tokenizer_n_vocab(tok);
    CHECK(colibri_spec_prefill(s, p, n, NULL, mode, &err) == 0, "prefill: %s", err.msg);
    for (int i = 0; i < n_steps; i++) {
        int32_t d[1];
        if (!mode) CHECK(colibri_spec_draft(s, steps[i], 1, n_text, d, &err) >= 0, "draft: %s", err.msg);
        CHECK(colibri_spec_verify(s, steps[i], d, 0, NULL, &err) == 0, "step %d: %s", i, err.msg);
        colibri_spec_keep(s, n + i, 1);
    }
    int nd = colibri_spec_draft(s, x, K, n_text, drafts, &err);
    CHECK(nd >= 0, "draft: %s", err.msg);
    colibri_session_free(s);
    return nd;
}

/* Under auto, the rows of positions decoded without drafts are filled by
 * the next probe (within the window): its drafts are the eager ones. */
static void test_window_follows_plain_decode(void)
{
    int differ = 0, n_cases = 0;
    for (int c = 0; c < 8; c++) {
        int32_t p[8], steps[22];
        int n = 4 + c % 5, ns = 14 + (c * 3) % 9;       /* n + ns <= 30: inside the window */
        for (int i = 0; i < n; i++) p[i] = (int32_t)((i * 61 + c * 17 + 5) % 380 + 10);
        for (int i = 0; i < ns; i++) steps[i] = (int32_t)((i * 37 + c * 11 + 3) % 380 + 10);
        int32_t x = steps[(c * 5) % ns], eager[K], deferred[K];
        int ne = decode_draft(p, n, steps, ns, 0, x, eager);
        int nw = decode_draft(p, n, steps, ns, 1, x, deferred);
        CHECK(ne == K && nw == K, "case %d: %d and %d drafts", c, ne, nw);
        differ += memcmp(eager, deferred, sizeof eager) != 0;
        n_cases++;
    }
    CHECK(differ == 0, "%d of %d decodes drafted differently under auto than eager", differ, n_cases);
}

/* My own sentences, in the manner of the model's training text. */
static const char *const texts[] = {
    "The morning was fine, and the whole party walked down to the village together, talking of the ball that "
    "was to be given at the great house before the end of the month, and of who would dance with whom.",
    "She had never been so much in the habit of thinking of her own comfort as of the comfort of others, and "
    "when her sister came to her with the letter in her hand, she put aside her work at once and listened.",
    "It was not until the evening that the captain returned, and then he said very little, only that the "
    "weather had been against them and that the ship would not sail again before the spring.",
    "Her father was a man of good fortune and of very good opinion of himself, who could not imagine that "
    "any part of the world was better ordered than his own house and his own family.",
    "They sat together for an hour after dinner, and he told her of his travels, of the towns he had seen "
    "and of the people he had met, while she wondered whether he would ever speak of what she wished to hear.",
    "Mrs Smith had been a widow for some years, and her health was poor, but her spirits were so good and her "
    "conversation so lively that her friends were always glad to be in her company.",
};

static void test_auto_probe_keeps_drafts(void)
{
    int drafted = 0, kept = 0, long_prompts = 0;
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        int32_t *ids = NULL;
        size_t n = 0;
        struct colibri_err err = { 0 };
        CHECK(colibri_tokenizer_encode(tok, texts[t], strlen(texts[t]), COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n, NULL,
                                       &err) == 0, "encode: %s", err.msg);
        long_prompts += n > 32;
        int32_t out[2][24];
        int n_out[2] = { 0, 0 };
        for (int mode = 0; mode < 2; mode++) {   /* 0: no drafts, 1: auto */
            colibri_session *s = NULL;
            struct colibri_session_opts so = { .n_ctx = N_CTX };
            CHECK(colibri_session_new(model, &so, &s, &err) == 0, "session: %s", err.msg);
            struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
            sopt.temperature = 0;
            colibri_sampler *smp = NULL;
            CHECK(colibri_sampler_new(&sopt, colibri_model_vocab(model), &smp, &err) == 0, "sampler: %s", err.msg);
            colibri_gen *g = NULL;
            CHECK(colibri_gen_new(model, s, tok, &g, &err) == 0, "gen: %s", err.msg);
            struct colibri_gen_opts o = { .sampler = smp, .n_predict = 24, .n_draft = mode ? 2 : 0,
                                          .draft_auto = mode };
            CHECK(colibri_gen_start(g, ids, (int)n, &o, &err) == 0, "start: %s", err.msg);
            while (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL)
                CHECK(colibri_gen_prefill(g, 0, &err) >= 0, "prefill: %s", err.msg);
            struct colibri_gen_step st;
            while (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE) {
                CHECK(colibri_gen_sample(g, &st, &err) == 0, "sample: %s", err.msg);
                for (int j = 0; j < st.n_tokens && n_out[mode] < 24; j++) out[mode][n_out[mode]++] = st.tokens[j];
                if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED)
                    CHECK(colibri_gen_decode(g, &err) == 0, "decode: %s", err.msg);
            }
            struct colibri_gen_stats gs;
            colibri_gen_get_stats(g, &gs);
            if (mode) {
                drafted += gs.n_drafted[0];
                kept += gs.n_accepted[0];
            }
            colibri_gen_free(g);
            colibri_sampler_free(smp);
            colibri_session_free(s);
        }
        CHECK(n_out[0] == n_out[1] && !memcmp(out[0], out[1], (size_t)n_out[0] * sizeof out[0][0]),
              "text %zu: auto generated other tokens than off", t);
        free(ids);
    }
    CHECK(long_prompts >= 4, "only %d prompts longer than the window", long_prompts);
    CHECK(drafted >= 6, "auto drafted %d times in 6 generations (each probes once)", drafted);
    /* the first probes' drafts are deterministic: 3 of the 6 are kept */
    CHECK(kept >= 2, "auto kept %d of %d first drafts (colibri-tiny keeps about half)", kept, drafted);
}

/* Three generators over one prompt, batch decoded together, greedy, with
 * auto drafting (mode 1) or none (mode 0); 12 tokens each, so that the
 * first probe (the 9th forward) cannot end with a win (a block is
 * AUTO_PROBE forwards, a win takes two): while generator 0 probes, 1 and 2
 * must not, whatever the timings say. */
static void test_auto_batch_probes_one_at_a_time(void)
{
    enum { NG = 3, NP = 12 };
    int32_t *ids = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    CHECK(colibri_tokenizer_encode(tok, texts[0], strlen(texts[0]), COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n, NULL,
                                   &err) == 0, "encode: %s", err.msg);
    int32_t out[2][NG][NP];
    int drafted[NG] = { 0 };
    for (int mode = 0; mode < 2; mode++) {
        colibri_session *s[NG];
        colibri_sampler *smp[NG];
        colibri_gen *g[NG];
        int n_out[NG] = { 0 };
        for (int i = 0; i < NG; i++) {
            struct colibri_session_opts so = { .n_ctx = N_CTX };
            CHECK(colibri_session_new(model, &so, &s[i], &err) == 0, "session: %s", err.msg);
            struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
            sopt.temperature = 0;
            CHECK(colibri_sampler_new(&sopt, colibri_model_vocab(model), &smp[i], &err) == 0, "sampler: %s", err.msg);
            CHECK(colibri_gen_new(model, s[i], tok, &g[i], &err) == 0, "gen: %s", err.msg);
            struct colibri_gen_opts o = { .sampler = smp[i], .n_predict = NP, .n_draft = mode ? 2 : 0,
                                          .draft_auto = mode };
            CHECK(colibri_gen_start(g[i], ids, (int)n, &o, &err) == 0, "start: %s", err.msg);
            while (colibri_gen_phase(g[i]) == COLIBRI_GEN_PHASE_PREFILL)
                CHECK(colibri_gen_prefill(g[i], 0, &err) >= 0, "prefill: %s", err.msg);
        }
        for (;;) {
            colibri_gen *feed[NG];
            int nf = 0;
            for (int i = 0; i < NG; i++) {
                struct colibri_gen_step st;
                while (colibri_gen_phase(g[i]) == COLIBRI_GEN_PHASE_SAMPLE) {
                    CHECK(colibri_gen_sample(g[i], &st, &err) == 0, "sample: %s", err.msg);
                    for (int j = 0; j < st.n_tokens && n_out[i] < NP; j++) out[mode][i][n_out[i]++] = st.tokens[j];
                }
                if (colibri_gen_phase(g[i]) == COLIBRI_GEN_PHASE_FEED) feed[nf++] = g[i];
            }
            if (!nf) break;
            int done = 0;
            CHECK(colibri_gen_batch_decode(feed, nf, &done, &err) == 0 && done == nf, "batch: %s", err.msg);
            if (done != nf) break;
        }
        for (int i = 0; i < NG; i++) {
            CHECK(n_out[i] == NP, "mode %d generator %d: %d tokens", mode, i, n_out[i]);
            struct colibri_gen_stats gs;
            colibri_gen_get_stats(g[i], &gs);
            if (mode) drafted[i] = gs.n_forwards_drafted;
            colibri_gen_free(g[i]);
            colibri_sampler_free(smp[i]);
            colibri_session_free(s[i]);
        }
    }
    for (int i = 0; i < NG; i++)
        CHECK(!memcmp(out[0][i], out[1][i], sizeof out[0][i]), "generator %d: auto generated other tokens than off", i);
    CHECK(drafted[0] >= 1, "generator 0 never probed (%d drafted forwards)", drafted[0]);
    CHECK(drafted[1] == 0 && drafted[2] == 0, "generators 1 and 2 drafted %d and %d times while 0 probed",
          drafted[1], drafted[2]);
    free(ids);
}

int main(void)
{
    struct colibri_err err = { 0 };
    struct colibri_model_opts mo = { .n_threads = 1 };
    if (colibri_model_load(TINY, &mo, &model, &err) || colibri_tokenizer_load(TINY, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", TINY, err.msg);
        return 1;
    }
    RUN_TEST(test_deferred_drafts_equal_eager);
    RUN_TEST(test_window_follows_plain_decode);
    RUN_TEST(test_auto_probe_keeps_drafts);
    RUN_TEST(test_auto_batch_probes_one_at_a_time);
    colibri_tokenizer_free(tok);
    colibri_model_free(model);
    return CHECK_SUMMARY();
}
