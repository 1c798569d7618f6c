/* DeepSeek-V4 sessions on the fixture tests/oracle_v4/deepseek_v4_tiny (run
 * from the repo root): the per-session attention state (window ring,
 * compressors, indexer keys) gives the same logits however a prompt is cut
 * into forwards, after a reset to position 0, and batched with other
 * sessions; what it cannot do (rewind or copy elsewhere than at a snapshot)
 * is refused by name (test_v4_snapshots: going back to snapshots).
 * Agreement with transformers is tests/cli/oracle_v4.sh's job. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

#define FIXTURE "tests/oracle_v4/deepseek_v4_tiny"
#define T 30

static colibri_model *load(void)
{
    colibri_model *m = NULL;
    struct colibri_err err = { 0 };
    if (colibri_model_load(FIXTURE, NULL, &m, &err)) CHECK(0, "%s", err.msg);
    return m;
}

static void seq(int32_t *t, int n, int seed)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + seed * 11 + i * i) % 96);
}

/* Prefill in pieces (cut at positions crossing compressor blocks and the
 * window) and token by token give a one-shot prefill's last logits, bit for bit. */
static void test_pieces_equal_one_shot(void)
{
    colibri_model *m = load();
    if (!m) return;
    struct colibri_err err = { 0 };
    int V = colibri_model_vocab(m);
    int32_t tok[T];
    seq(tok, T, 1);
    struct colibri_session_opts so = { .n_ctx = 64 };
    colibri_session *a = NULL, *b = NULL;
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    CHECK(!colibri_session_new(m, &so, &a, &err) && !colibri_session_new(m, &so, &b, &err), "%s", err.msg);
    CHECK(!colibri_session_prefill(a, tok, T, la, 0, &err), "%s", err.msg);
    const int cuts[] = { 0, 3, 4, 9, 17, 18, 29, T };
    for (int i = 0; i + 1 < (int)(sizeof cuts / sizeof cuts[0]); i++)
        CHECK(!colibri_session_prefill(b, tok + cuts[i], cuts[i + 1] - cuts[i], lb, 0, &err), "%s", err.msg);
    CHECK(memcmp(la, lb, (size_t)V * sizeof *la) == 0, "pieces differ from one prefill");
    colibri_session_free(a);
    colibri_session_free(b);
    free(la);
    free(lb);
    colibri_model_free(m);
}

/* A session that held another prompt, reset through reuse_prefix, gives a
 * cold prefill's logits; a prompt that extends the session keeps it. */
static void test_reuse_resets_or_extends(void)
{
    colibri_model *m = load();
    if (!m) return;
    struct colibri_err err = { 0 };
    int V = colibri_model_vocab(m);
    int32_t a[T], b[T];
    seq(a, T, 2);
    seq(b, T, 3);
    memcpy(b, a, 10 * sizeof *a);   /* a common prefix shorter than what the session holds */
    struct colibri_session_opts so = { .n_ctx = 64 };
    colibri_session *cold = NULL, *s = NULL;
    float *lc = malloc((size_t)V * sizeof *lc), *ls = malloc((size_t)V * sizeof *ls);
    colibri_session_new(m, &so, &cold, &err);
    colibri_session_new(m, &so, &s, &err);
    CHECK(!colibri_session_prefill(cold, b, T, lc, 0, &err), "%s", err.msg);
    CHECK(!colibri_session_prefill(s, a, 20, NULL, 0, &err), "%s", err.msg);
    int keep = colibri_session_reuse_prefix(s, b, T, &err);
    CHECK(keep == 0 && colibri_session_pos(s) == 0, "reuse kept %d (pos %d), not a reset", keep,
          colibri_session_pos(s));
    CHECK(!colibri_session_prefill(s, b, T, ls, 0, &err), "%s", err.msg);
    CHECK(memcmp(lc, ls, (size_t)V * sizeof *lc) == 0, "after a reset the logits differ from a cold prefill");
    /* extends: the session holds b[0..15), the prompt is b */
    colibri_session *e = NULL;
    colibri_session_new(m, &so, &e, &err);
    colibri_session_prefill(e, b, 15, NULL, 0, &err);
    keep = colibri_session_reuse_prefix(e, b, T, &err);
    CHECK(keep == 15, "reuse kept %d, not the 15 held", keep);
    CHECK(!colibri_session_prefill(e, b + keep, T - keep, ls, 0, &err), "%s", err.msg);
    CHECK(memcmp(lc, ls, (size_t)V * sizeof *lc) == 0, "an extended session's logits differ from a cold prefill");
    /* refused by name: rewinding or copying elsewhere than a resume point
     * (position 0, the session's end, the end of the prefill of 15) */
    CHECK(colibri_session_resume_point(e, 5) == 0 && colibri_session_resume_point(e, 20) == 15,
          "resume points %d %d", colibri_session_resume_point(e, 5), colibri_session_resume_point(e, 20));
    CHECK(colibri_session_truncate(e, 5, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "does not rewind") &&
          strstr(err.msg, "at 0"), "truncate to 5: %s", err.msg);
    CHECK(colibri_session_copy_prefix(cold, e, 5, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "DeepSeek-V4"),
          "copy_prefix: %s", err.msg);
    colibri_session_free(cold);
    colibri_session_free(s);
    colibri_session_free(e);
    free(lc);
    free(ls);
    colibri_model_free(m);
}

/* Decoding several sessions in one forward gives each its lone decode. */
static void test_batch_decode_equals_solo(void)
{
    colibri_model *m = load();
    if (!m) return;
    struct colibri_err err = { 0 };
    int V = colibri_model_vocab(m);
    enum { B = 3 };
    int32_t p[B][T], lens[B] = { 11, 4, 19 }, next[B] = { 5, 77, 40 };
    colibri_session *bs[B], *solo[B];
    float *bl[B], *sl = malloc((size_t)V * sizeof *sl);
    struct colibri_session_opts so = { .n_ctx = 64 };
    for (int i = 0; i < B; i++) {
        seq(p[i], T, 10 + i);
        colibri_session_new(m, &so, &bs[i], &err);
        colibri_session_new(m, &so, &solo[i], &err);
        colibri_session_prefill(bs[i], p[i], lens[i], NULL, 0, &err);
        colibri_session_prefill(solo[i], p[i], lens[i], NULL, 0, &err);
        bl[i] = malloc((size_t)V * sizeof *bl[i]);
    }
    int done = -1;
    for (int step = 0; step < 6; step++) {
        CHECK(colibri_batch_decode(bs, next, B, bl, &done, &err) == 0 && done == B, "%s", err.msg);
        for (int i = 0; i < B; i++) {
            colibri_session_decode(solo[i], next[i], sl, &err);
            CHECK(memcmp(sl, bl[i], (size_t)V * sizeof *sl) == 0, "session %d step %d differs from a lone decode", i,
                  step);
            next[i] = (next[i] * 7 + 3) % 96;
        }
    }
    for (int i = 0; i < B; i++) {
        colibri_session_free(bs[i]);
        colibri_session_free(solo[i]);
        free(bl[i]);
    }
    free(sl);
    colibri_model_free(m);
}

int main(void)
{
    RUN_TEST(test_pieces_equal_one_shot);
    RUN_TEST(test_reuse_resets_or_extends);
    RUN_TEST(test_batch_decode_equals_solo);
    return CHECK_SUMMARY();
}
