/* DeepSeek-V4 sessions going back to a snapshot of their attention state
 * (api/snapshots.h), on every fixture of tests/oracle_v4 (run from the repo
 * root): a session that held another prompt, truncated to a snapshot within
 * the common prefix and fed the rest, gives a cold prefill's logits at every
 * position it recomputes, bit for bit; so does a session copied from
 * another at a snapshot, one that went back into tokens it decoded, and one
 * whose ring was full and thinned, and one given the same prompt again
 * (all but the last token kept). The cold prefill is the reference that
 * tests/cli/oracle_v4.sh holds to transformers. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

static const char *const FIXTURES[] = { "tests/oracle_v4/deepseek_v4_tiny", "tests/oracle_v4/deepseek_v4_hc4",
                                        "tests/oracle_v4/deepseek_v4_official" };
#define NF (int)(sizeof FIXTURES / sizeof FIXTURES[0])
#define T 300   /* past the official fixture's window (128) and HCA block (128) */

static void seq(int32_t *t, int n, int seed, int vocab)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + seed * 11 + i * i * (seed + 1)) % vocab);
}

/* Rows [from, to) of a and b (vocab V each) are the same bits. */
static int same_rows(const float *a, const float *b, int from, int to, int V, const char *what, const char *fix)
{
    for (int i = from; i < to; i++)
        if (memcmp(a + (size_t)i * V, b + (size_t)i * V, (size_t)V * sizeof *a)) {
            CHECK(0, "%s: %s: position %d differs from a cold prefill", fix, what, i);
            return 0;
        }
    return 1;
}

struct fx {
    colibri_model *m;
    int V;
    int32_t b[T];       /* the prompt */
    float *cold;        /* [T][V]: every position of a cold prefill of b */
};

static int fx_load(struct fx *f, const char *dir)
{
    struct colibri_err err = { 0 };
    memset(f, 0, sizeof *f);
    if (colibri_model_load(dir, NULL, &f->m, &err)) {
        CHECK(0, "%s: %s", dir, err.msg);
        return 0;
    }
    f->V = colibri_model_vocab(f->m);
    seq(f->b, T, 3, f->V);
    f->cold = malloc((size_t)T * f->V * sizeof *f->cold);
    struct colibri_session_opts so = { .n_ctx = T + 8 };
    colibri_session *c = NULL;
    CHECK(!colibri_session_new(f->m, &so, &c, &err) && !colibri_session_prefill(c, f->b, T, f->cold, 1, &err),
          "%s: %s", dir, err.msg);
    colibri_session_free(c);
    return 1;
}

static void fx_free(struct fx *f)
{
    free(f->cold);
    colibri_model_free(f->m);
}

/* s held a prompt sharing P positions with b; reuse_prefix must keep
 * want, and the rest fed gives the cold logits. */
static void resume_and_check(struct fx *f, colibri_session *s, int want, const char *what, const char *fix)
{
    struct colibri_err err = { 0 };
    float *l = malloc((size_t)T * f->V * sizeof *l);
    int keep = colibri_session_reuse_prefix(s, f->b, T, &err);
    CHECK(keep == want && colibri_session_pos(s) == want, "%s: %s: kept %d (pos %d), want %d (%s)", fix, what, keep,
          colibri_session_pos(s), want, err.msg);
    if (keep >= 0 && keep < T) {
        CHECK(!colibri_session_prefill(s, f->b + keep, T - keep, l + (size_t)keep * f->V, 1, &err), "%s: %s", fix,
              err.msg);
        same_rows(f->cold, l, keep, T, f->V, what, fix);
    }
    free(l);
}

/* Prefilled another prompt (common prefix P), with snapshots every E:
 * resumes from the last multiple of E within P. */
static void test_truncate_refeed(void)
{
    for (int k = 0; k < NF; k++) {
        struct fx f;
        if (!fx_load(&f, FIXTURES[k])) continue;
        struct colibri_err err = { 0 };
        static const int cases[][2] = { { 7, 5 }, { 190, 40 }, { 261, 64 }, { 131, 129 } };   /* P, E */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int P = cases[c][0], E = cases[c][1];
            int32_t a[T];
            seq(a, T, 5, f.V);
            memcpy(a, f.b, (size_t)P * sizeof *a);
            a[P] = (f.b[P] + 1) % f.V;
            struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = E, .kv_snapshots = 64 };
            colibri_session *s = NULL;
            CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
            CHECK(!colibri_session_prefill(s, a, T, NULL, 0, &err), "%s", err.msg);
            char what[64];
            snprintf(what, sizeof what, "prefix %d, snapshots every %d", P, E);
            resume_and_check(&f, s, P / E * E, what, FIXTURES[k]);
            colibri_session_free(s);
        }
        fx_free(&f);
    }
}

/* Snapshots taken while decoding, a rewind into the decoded tokens; the
 * end of a prefill call is a snapshot too; and a truncation elsewhere is
 * refused naming the resume point. */
static void test_decoded_and_prefill_end(void)
{
    for (int k = 0; k < NF; k++) {
        struct fx f;
        if (!fx_load(&f, FIXTURES[k])) continue;
        struct colibri_err err = { 0 };
        struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 50, .kv_snapshots = 64 };
        colibri_session *s = NULL;
        CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
        CHECK(!colibri_session_prefill(s, f.b, 123, NULL, 0, &err), "%s", err.msg);   /* snapshots 50, 100, 123 */
        for (int i = 123; i < 260; i++) colibri_session_decode(s, (f.b[i] + 7) % f.V, NULL, &err);   /* 150 .. 250 */
        CHECK(colibri_session_resume_point(s, 149) == 123 && colibri_session_resume_point(s, 222) == 200,
              "%s: resume points %d %d", FIXTURES[k], colibri_session_resume_point(s, 149),
              colibri_session_resume_point(s, 222));
        CHECK(colibri_session_truncate(s, 222, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "at 200"), "%s: %s",
              FIXTURES[k], err.msg);
        CHECK(colibri_session_pos(s) == 260, "a refused truncation moved the session");
        /* into the decoded tokens: they are b's with 7 added, so b shares 123 */
        resume_and_check(&f, s, 123, "the end of a prefill call", FIXTURES[k]);
        colibri_session_free(s);
        /* the same prompt again keeps all but its last token (a snapshot before it) */
        CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
        colibri_session_prefill(s, f.b, T, NULL, 0, &err);
        resume_and_check(&f, s, T - 1, "the same prompt again", FIXTURES[k]);
        colibri_session_free(s);
        /* a session that decoded b itself goes back to a snapshot it took while decoding */
        CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
        colibri_session_prefill(s, f.b, 20, NULL, 0, &err);
        for (int i = 20; i < 240; i++) colibri_session_decode(s, f.b[i], NULL, &err);
        colibri_session_decode(s, (f.b[240] + 1) % f.V, NULL, &err);
        resume_and_check(&f, s, 200, "a snapshot taken while decoding", FIXTURES[k]);
        colibri_session_free(s);
        fx_free(&f);
    }
}

/* copy_prefix at a snapshot and at the source's end: the copy's logits are
 * a cold prefill's; between snapshots it is refused, the target untouched. */
static void test_copy_prefix(void)
{
    for (int k = 0; k < NF; k++) {
        struct fx f;
        if (!fx_load(&f, FIXTURES[k])) continue;
        struct colibri_err err = { 0 };
        struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 60, .kv_snapshots = 4 };
        colibri_session *src = NULL, *dst = NULL;
        CHECK(!colibri_session_new(f.m, &so, &src, &err) && !colibri_session_new(f.m, &so, &dst, &err), "%s",
              err.msg);
        colibri_session_prefill(src, f.b, 250, NULL, 0, &err);
        colibri_session_prefill(dst, f.b + 1, 30, NULL, 0, &err);
        CHECK(colibri_session_copy_prefix(dst, src, 200, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "at 180") &&
                  colibri_session_pos(dst) == 30,
              "%s: copy at 200: %s (pos %d)", FIXTURES[k], err.msg, colibri_session_pos(dst));
        const int at[] = { 180, 250 };
        for (int i = 0; i < 2; i++) {
            CHECK(colibri_session_copy_prefix(dst, src, at[i], &err) == 0, "%s: %s", FIXTURES[k], err.msg);
            char what[48];
            snprintf(what, sizeof what, "a copy at %d", at[i]);
            resume_and_check(&f, dst, at[i], what, FIXTURES[k]);
        }
        /* the copy carried src's snapshots: dst goes back to 120 */
        int32_t keep[T];
        memcpy(keep, f.b, sizeof keep);
        f.b[130] = (f.b[130] + 1) % f.V;
        float *cold = f.cold;
        f.cold = malloc((size_t)T * f.V * sizeof *f.cold);
        colibri_session *c = NULL;
        colibri_session_new(f.m, &so, &c, &err);
        colibri_session_prefill(c, f.b, T, f.cold, 1, &err);
        colibri_session_free(c);
        resume_and_check(&f, dst, 120, "a snapshot copied with the prefix", FIXTURES[k]);
        free(f.cold);
        f.cold = cold;
        memcpy(f.b, keep, sizeof keep);
        colibri_session_free(src);
        colibri_session_free(dst);
        fx_free(&f);
    }
}

/* A ring of 3 over many snapshots keeps them spread (the newest kept), and
 * every resume point it offers is exact. */
static void test_thinned_ring(void)
{
    struct fx f;
    if (!fx_load(&f, FIXTURES[2])) return;
    struct colibri_err err = { 0 };
    struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 10, .kv_snapshots = 3 };
    colibri_session *s = NULL;
    CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
    int64_t small = colibri_session_bytes(s);
    so.kv_snapshots = 4;
    colibri_session *s4 = NULL;
    colibri_session_new(f.m, &so, &s4, &err);
    CHECK(colibri_session_bytes(s4) > small, "a fourth snapshot costs no bytes");
    colibri_session_free(s4);
    colibri_session_prefill(s, f.b, 290, NULL, 0, &err);
    /* held: the end (290) and two earlier ones, not crowded at the end as
     * first-in-first-out would leave them (270, 280) */
    int p1 = colibri_session_resume_point(s, 289), p0 = colibri_session_resume_point(s, p1 - 1);
    CHECK(p0 > 0 && p1 <= 260 && p1 - p0 >= 50 && colibri_session_resume_point(s, p0 - 1) == 0,
          "the ring of 3 is not spread: %d %d", p0, p1);
    int want[3] = { 290, p1, p0 };
    for (int i = 0; i < 3; i++) {
        int32_t keep = f.b[want[i]];
        colibri_session *t = NULL;
        colibri_session_new(f.m, &so, &t, &err);
        colibri_session_copy_prefix(t, s, 290, &err);
        f.b[want[i]] = (f.b[want[i]] + 1) % f.V;   /* diverge right after the resume point */
        float *cold = f.cold;
        f.cold = malloc((size_t)T * f.V * sizeof *f.cold);
        colibri_session *c = NULL;
        colibri_session_new(f.m, &so, &c, &err);
        colibri_session_prefill(c, f.b, T, f.cold, 1, &err);
        colibri_session_free(c);
        resume_and_check(&f, t, want[i], "a thinned ring", FIXTURES[2]);
        free(f.cold);
        f.cold = cold;
        f.b[want[i]] = keep;
        colibri_session_free(t);
    }
    colibri_session_free(s);
    fx_free(&f);
}

/* A prefill cut at snapshots still takes all of its tokens or none: a bad id
 * late in it, or too many tokens, leave the session where it was. */
static void test_all_or_nothing(void)
{
    struct fx f;
    if (!fx_load(&f, FIXTURES[0])) return;
    struct colibri_err err = { 0 };
    struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 16 };
    colibri_session *s = NULL;
    CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
    colibri_session_prefill(s, f.b, 10, NULL, 0, &err);
    int32_t bad[T];
    memcpy(bad, f.b, sizeof bad);
    bad[100] = f.V;
    CHECK(colibri_session_prefill(s, bad + 10, 120, NULL, 0, &err) == COLIBRI_ERANGE && strstr(err.msg, "index 90") &&
              colibri_session_pos(s) == 10,
          "a bad id: %s, pos %d", err.msg, colibri_session_pos(s));
    CHECK(colibri_session_prefill(s, f.b, T, NULL, 0, &err) == COLIBRI_ERANGE && colibri_session_pos(s) == 10,
          "past the context: %s, pos %d", err.msg, colibri_session_pos(s));
    resume_and_check(&f, s, 10, "after refused prefills", FIXTURES[0]);
    colibri_session_free(s);
    fx_free(&f);
}

int main(void)
{
    RUN_TEST(test_truncate_refeed);
    RUN_TEST(test_decoded_and_prefill_end);
    RUN_TEST(test_copy_prefix);
    RUN_TEST(test_thinned_ring);
    RUN_TEST(test_all_or_nothing);
    return CHECK_SUMMARY();
}
