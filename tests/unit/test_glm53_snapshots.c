/* GLM-5.3 sessions going back to a snapshot of their layers' states
 * (api/snapshots.h: the KDA layers' convolution and recurrent states, the
 * indexed layers' position and open index pool), on every fixture of
 * tests/oracle_glm53 (run from the repo root).
 *
 * KDA's prefill runs its chunked form over the rows of each forward call
 * and its decode the recurrent form, so the bits depend on where the feeds
 * start and stop. What is compared: a session that held another prompt (or
 * was copied, or decoded), went back to a snapshot and was fed the rest
 * gives, at every position it recomputes, the logits bit for bit of a cold
 * session with the same snapshot interval fed the same tokens in the same
 * calls (prefills and decodes split at the same positions). That cold
 * session is the reference that tests/cli/oracle_glm53.sh holds to
 * transformers. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

static const char *const FIXTURES[] = { "tests/oracle_glm53/glm53_indexed", "tests/oracle_glm53/glm53_kda_hc4",
                                        "tests/oracle_glm53/glm53_kda_softplus" };
#define NF (int)(sizeof FIXTURES / sizeof FIXTURES[0])
#define T 300   /* several KDA chunks (64) and index pools */

static void seq(int32_t *t, int n, int seed, int vocab)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + seed * 11 + i * i * (seed + 1)) % vocab);
}

struct fx {
    colibri_model *m;
    int V;
    const char *tier;   /* the sessions' KV tier (NULL: f32) */
    int32_t b[T];       /* the prompt */
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
    return 1;
}

/* A cold session of opts so fed f->b by steps (n > 0: a prefill of n
 * tokens, n < 0: -n decodes, 0 ends; the rest to T in one prefill): the
 * logits of every position [T][V]. */
static float *cold(struct fx *f, int every, const int *steps)
{
    struct colibri_err err = { 0 };
    float *l = calloc((size_t)T * f->V, sizeof *l);
    struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = every, .kv_snapshots = 64,
                                       .kv_tier = f->tier };
    colibri_session *c = NULL;
    CHECK(!colibri_session_new(f->m, &so, &c, &err), "%s", err.msg);
    int p = 0;
    for (int i = 0; steps && steps[i] && !err.code; i++) {
        if (steps[i] > 0) colibri_session_prefill(c, f->b + p, steps[i], l + (size_t)p * f->V, 1, &err);
        for (int k = 0; k < -steps[i]; k++) colibri_session_decode(c, f->b[p + k], l + (size_t)(p + k) * f->V, &err);
        p += steps[i] > 0 ? steps[i] : -steps[i];
    }
    if (p < T) colibri_session_prefill(c, f->b + p, T - p, l + (size_t)p * f->V, 1, &err);
    CHECK(!err.code, "cold session: %s", err.msg);
    colibri_session_free(c);
    return l;
}

/* s held a prompt sharing a prefix with b; reuse_prefix must keep want, and
 * the rest fed in one prefill gives ref's logits at every position after. */
static void resume_and_check(struct fx *f, colibri_session *s, int want, const float *ref, const char *what,
                             const char *fix)
{
    struct colibri_err err = { 0 };
    float *l = malloc((size_t)T * f->V * sizeof *l);
    int keep = colibri_session_reuse_prefix(s, f->b, T, &err);
    CHECK(keep == want && colibri_session_pos(s) == want, "%s: %s: kept %d (pos %d), want %d (%s)", fix, what, keep,
          colibri_session_pos(s), want, err.msg);
    if (keep >= 0 && keep < T) {
        CHECK(!colibri_session_prefill(s, f->b + keep, T - keep, l + (size_t)keep * f->V, 1, &err), "%s: %s", fix,
              err.msg);
        for (int i = keep; i < T; i++)
            if (memcmp(ref + (size_t)i * f->V, l + (size_t)i * f->V, (size_t)f->V * sizeof *l)) {
                CHECK(0, "%s: %s: position %d differs from a cold session's", fix, what, i);
                break;
            }
    }
    free(l);
}

/* Prefilled another prompt (common prefix P) with snapshots every E:
 * resumes from the last multiple of E within P, some of them inside an
 * index pool (4 positions) and a KDA chunk; the indexed fixture also with
 * its latents in the int8r and bf16 tiers. */
static void test_truncate_refeed(void)
{
    static const char *const tiers[] = { NULL, "int8r", "bf16" };
    for (int k = 0; k < NF + 2; k++) {
        struct fx f;
        if (!fx_load(&f, FIXTURES[k < NF ? k : 0])) continue;
        f.tier = tiers[k < NF ? 0 : k - NF + 1];
        struct colibri_err err = { 0 };
        static const int cases[][2] = { { 7, 5 }, { 190, 7 }, { 250, 100 }, { 131, 129 } };   /* P, E */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int P = cases[c][0], E = cases[c][1];
            int32_t a[T];
            seq(a, T, 5, f.V);
            memcpy(a, f.b, (size_t)P * sizeof *a);
            a[P] = (f.b[P] + 1) % f.V;
            struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = E, .kv_snapshots = 64,
                                               .kv_tier = f.tier };
            colibri_session *s = NULL;
            CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
            CHECK(!colibri_session_prefill(s, a, T, NULL, 0, &err), "%s", err.msg);
            char what[80];
            snprintf(what, sizeof what, "prefix %d, snapshots every %d, kv %s", P, E, f.tier ? f.tier : "f32");
            float *ref = cold(&f, E, NULL);
            resume_and_check(&f, s, P / E * E, ref, what, FIXTURES[k < NF ? k : 0]);
            free(ref);
            colibri_session_free(s);
        }
        colibri_model_free(f.m);
    }
}

/* Snapshots at the end of a prefill call and taken while decoding; the same
 * prompt again; a truncation between snapshots is refused naming the
 * resume point. */
static void test_decoded_and_prefill_end(void)
{
    for (int k = 0; k < NF; k++) {
        struct fx f;
        if (!fx_load(&f, FIXTURES[k])) continue;
        struct colibri_err err = { 0 };
        struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 50, .kv_snapshots = 64 };
        colibri_session *s = NULL;
        CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
        CHECK(!colibri_session_prefill(s, f.b, 123, NULL, 0, &err), "%s", err.msg);   /* snapshots 50, 100, 122, 123 */
        for (int i = 123; i < 260; i++) colibri_session_decode(s, (f.b[i] + 7) % f.V, NULL, &err);   /* 150 .. 250 */
        CHECK(colibri_session_resume_point(s, 149) == 123 && colibri_session_resume_point(s, 222) == 200,
              "%s: resume points %d %d", FIXTURES[k], colibri_session_resume_point(s, 149),
              colibri_session_resume_point(s, 222));
        CHECK(colibri_session_truncate(s, 222, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "at 200"), "%s: %s",
              FIXTURES[k], err.msg);
        CHECK(colibri_session_pos(s) == 260, "a refused truncation moved the session");
        static const int end123[] = { 123, 0 };
        float *ref = cold(&f, 50, end123);
        resume_and_check(&f, s, 123, ref, "the end of a prefill call", FIXTURES[k]);
        free(ref);
        colibri_session_free(s);
        /* the same prompt again keeps all but its last token (a snapshot before it) */
        CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
        colibri_session_prefill(s, f.b, T, NULL, 0, &err);
        ref = cold(&f, 50, NULL);
        resume_and_check(&f, s, T - 1, ref, "the same prompt again", FIXTURES[k]);
        free(ref);
        colibri_session_free(s);
        /* a session that decoded b itself goes back to a snapshot it took while decoding */
        CHECK(!colibri_session_new(f.m, &so, &s, &err), "%s", err.msg);
        colibri_session_prefill(s, f.b, 21, NULL, 0, &err);
        for (int i = 21; i < 240; i++) colibri_session_decode(s, f.b[i], NULL, &err);
        colibri_session_decode(s, (f.b[240] + 1) % f.V, NULL, &err);
        static const int dec[] = { 21, -(200 - 21), 0 };
        ref = cold(&f, 50, dec);
        resume_and_check(&f, s, 200, ref, "a snapshot taken while decoding", FIXTURES[k]);
        free(ref);
        colibri_session_free(s);
        colibri_model_free(f.m);
    }
}

/* copy_prefix at a snapshot and at the source's end: the copy goes on as a
 * cold session; between snapshots it is refused, the target untouched; the
 * snapshots copied with the prefix are resume points. The indexed fixture
 * also with its latents in the q8-sized int8r tier (rows of another size). */
static void test_copy_prefix(void)
{
    for (int k = 0; k < NF + 1; k++) {
        struct fx f;
        if (!fx_load(&f, FIXTURES[k < NF ? k : 0])) continue;
        f.tier = k < NF ? NULL : "int8r";
        const char *fix = FIXTURES[k < NF ? k : 0];
        struct colibri_err err = { 0 };
        struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 60, .kv_snapshots = 4,
                                           .kv_tier = f.tier };
        colibri_session *src = NULL, *dst = NULL;
        CHECK(!colibri_session_new(f.m, &so, &src, &err) && !colibri_session_new(f.m, &so, &dst, &err), "%s",
              err.msg);
        colibri_session_prefill(src, f.b, 250, NULL, 0, &err);
        colibri_session_prefill(dst, f.b + 1, 30, NULL, 0, &err);
        CHECK(colibri_session_copy_prefix(dst, src, 201, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "at 180") &&
                  colibri_session_pos(dst) == 30,
              "%s: copy at 201: %s (pos %d)", fix, err.msg, colibri_session_pos(dst));
        /* 250 first: dst never held b's index keys of the open pool [248, 250) */
        static const int whole[] = { 250, 0 };
        const int at[] = { 250, 180 };
        for (int i = 0; i < 2; i++) {
            CHECK(colibri_session_copy_prefix(dst, src, at[i], &err) == 0, "%s: %s", fix, err.msg);
            char what[48];
            snprintf(what, sizeof what, "a copy at %d", at[i]);
            float *ref = cold(&f, 60, i ? NULL : whole);
            resume_and_check(&f, dst, at[i], ref, what, fix);
            free(ref);
        }
        f.b[130] = (f.b[130] + 1) % f.V;
        float *ref = cold(&f, 60, NULL);
        resume_and_check(&f, dst, 120, ref, "a snapshot copied with the prefix", fix);
        free(ref);
        colibri_session_free(src);
        colibri_session_free(dst);
        colibri_model_free(f.m);
    }
}

/* The snapshot sizes are what the layers' states hold. */
static void test_bytes(void)
{
    struct fx f;
    if (!fx_load(&f, FIXTURES[0])) return;
    struct colibri_err err = { 0 };
    struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshots = 1 };
    colibri_session *s1 = NULL, *s2 = NULL;
    CHECK(!colibri_session_new(f.m, &so, &s1, &err), "%s", err.msg);
    so.kv_snapshots = 2;
    CHECK(!colibri_session_new(f.m, &so, &s2, &err), "%s", err.msg);
    /* glm53_indexed: KDA layers 0 and 3 (3 heads x 16^2 recurrent, 3 conv
     * rows of 3 x 48 floats, 16-byte header), indexed layers 1 (full: 3 rows
     * of index keys and of gates, 8 floats each) and 2 (shared), 48-byte
     * headers; the ring's position and slot pointer */
    int64_t kda = 16 + 4 * (3 * 16 * 16 + 3 * 3 * 48), full = 48 + 4 * 2 * 3 * 8, shared = 48;
    int64_t one = 2 * kda + full + shared + (int64_t)sizeof(int) + (int64_t)sizeof(void *);
    CHECK(colibri_session_bytes(s2) - colibri_session_bytes(s1) == one, "a snapshot costs %lld bytes, want %lld",
          (long long)(colibri_session_bytes(s2) - colibri_session_bytes(s1)), (long long)one);
    colibri_session_free(s1);
    colibri_session_free(s2);
    colibri_model_free(f.m);
}

int main(void)
{
    RUN_TEST(test_truncate_refeed);
    RUN_TEST(test_decoded_and_prefill_end);
    RUN_TEST(test_copy_prefix);
    RUN_TEST(test_bytes);
    return CHECK_SUMMARY();
}
