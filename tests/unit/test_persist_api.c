/* KV files through the public API on the oracle fixture deepseek_v3_tiny:
 * logits after a restore equal a cold run of the same tokens (bit for bit, in
 * f32 and in each quantized tier against that tier's cold run), prefix reuse
 * with divergence, refusals naming tier / model / weights, the f32 upgrade. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "colibri.h"

#define FIXTURE "tests/oracle/deepseek_v3_tiny"
#define OTHER_FIXTURE "tests/oracle/kimi_k2_tiny"
#define NCTX 64
#define N1 16   /* positions saved */
#define N2 8    /* positions fed after the restore */

static colibri_model *M;
static int V;
static int32_t T[N1 + N2];
static char dir[256];

static const char *path_of(const char *name)
{
    static char p[4][320];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static colibri_session *new_session(colibri_model *m, const char *tier)
{
    struct colibri_session_opts so = { .n_ctx = NCTX, .kv_tier = tier };
    colibri_session *s = NULL;
    struct colibri_err err = { 0 };
    if (colibri_session_new(m, &so, &s, &err)) {
        fprintf(stderr, "session %s: %s\n", tier ? tier : "f32", err.msg);
        exit(1);
    }
    return s;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

/* Writes T[0..N1) through a session of `tier` into path. */
static void save_prefix(const char *path, const char *tier)
{
    unlink(path);
    colibri_session *s = new_session(M, tier);
    colibri_kv_file *f = NULL;
    struct colibri_kv_info info;
    struct colibri_err err = { 0 };
    CHECK(colibri_kv_file_open(s, path, &f, &info, &err) == 0 && info.created && info.restored == 0, "%s", err.msg);
    CHECK(colibri_session_prefill(s, T, N1, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(colibri_kv_file_save(f, &err) == 0, "%s", err.msg);
    colibri_kv_file_close(f);
    colibri_session_free(s);
}

/* Restore from path, feed T[N1..N1+N2) (prefill) and one decode step; the
 * same on a cold session that prefilled T[0..N1) itself. Bit-identical. */
static void restore_vs_cold(const char *tier)
{
    const char *path = path_of("rc.ckv");
    save_prefix(path, tier);
    float *lr = malloc((size_t)(N2 + 1) * V * sizeof *lr), *lc = malloc((size_t)(N2 + 1) * V * sizeof *lc);
    struct colibri_err err = { 0 };

    colibri_session *r = new_session(M, tier);
    colibri_kv_file *f = NULL;
    struct colibri_kv_info info;
    CHECK(colibri_kv_file_open(r, path, &f, &info, &err) == 0, "%s: %s", tier, err.msg);
    CHECK(info.restored == N1 && info.in_file == N1 && info.trimmed == 0 && !info.created && !info.upgraded &&
              colibri_session_pos(r) == N1 && !memcmp(colibri_session_tokens(r), T, N1 * sizeof *T),
          "%s: restored %d", tier, info.restored);
    CHECK(colibri_session_prefill(r, T + N1, N2, lr, 1, &err) == 0, "%s", err.msg);
    CHECK(colibri_session_decode(r, T[0], lr + (size_t)N2 * V, &err) == 0, "%s", err.msg);

    colibri_session *c = new_session(M, tier);
    CHECK(colibri_session_prefill(c, T, N1, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(colibri_session_prefill(c, T + N1, N2, lc, 1, &err) == 0, "%s", err.msg);
    CHECK(colibri_session_decode(c, T[0], lc + (size_t)N2 * V, &err) == 0, "%s", err.msg);

    size_t diff = 0;
    for (size_t i = 0; i < (size_t)(N2 + 1) * V; i++) diff += memcmp(&lr[i], &lc[i], sizeof(float)) != 0;
    CHECK(diff == 0, "%s: %zu of %zu logits differ from the cold run", tier, diff, (size_t)(N2 + 1) * V);
    /* The logits are not trivially equal: they depend on the prefix. */
    colibri_session *e = new_session(M, tier);
    float *le = malloc((size_t)N2 * V * sizeof *le);
    CHECK(colibri_session_prefill(e, T + N1, N2, le, 1, &err) == 0, "%s", err.msg);
    CHECK(memcmp(le, lc, (size_t)N2 * V * sizeof *le) != 0, "%s: logits do not depend on the prefix", tier);
    colibri_session_free(e);
    free(le);

    colibri_kv_file_close(f);
    colibri_session_free(r);
    colibri_session_free(c);
    free(lr);
    free(lc);
}

static void test_restore_f32_bit_identical(void) { restore_vs_cold("f32"); }

/* Every tier the library names, f32 (the test above) aside. */
static void test_restore_quantized_equals_cold(void)
{
    char list[256];
    colibri_kv_tier_names(list, sizeof list, ",");
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "f32")) continue;
        restore_vs_cold(t);
        n++;
    }
    CHECK(n >= 9, "%d quantized tiers", n);
}

/* A new prompt sharing 10 tokens with the file: 10 reused, 6 prefilled; the
 * logits equal a cold run of the new prompt; the save cuts the file back to
 * the common prefix and writes the new positions from there. */
static void test_reuse_prefix_and_diverge(void)
{
    const char *path = path_of("reuse.ckv");
    save_prefix(path, "tq4");
    int32_t P[N1];
    memcpy(P, T, sizeof P);
    for (int i = 10; i < N1; i++) P[i] = (T[i] + 17) % V;
    struct colibri_err err = { 0 };
    colibri_session *s = new_session(M, "tq4");
    colibri_kv_file *f = NULL;
    struct colibri_kv_info info;
    CHECK(colibri_kv_file_open(s, path, &f, &info, &err) == 0 && info.restored == N1, "%s", err.msg);
    int kept = colibri_session_reuse_prefix(s, P, N1, &err);
    CHECK(kept == 10 && colibri_session_pos(s) == 10, "reused %d", kept);
    float *lr = malloc((size_t)V * sizeof *lr), *lc = malloc((size_t)V * sizeof *lc);
    CHECK(colibri_session_prefill(s, P + kept, N1 - kept, lr, 0, &err) == 0, "%s", err.msg);
    colibri_session *c = new_session(M, "tq4");
    CHECK(colibri_session_prefill(c, P, 10, NULL, 0, &err) == 0 &&
              colibri_session_prefill(c, P + 10, N1 - 10, lc, 0, &err) == 0,
          "%s", err.msg);
    CHECK(!memcmp(lr, lc, (size_t)V * sizeof *lr), "logits after reuse differ from the cold run");
    size_t n0;
    uint8_t *b0 = slurp(path, &n0);
    CHECK(colibri_kv_file_save(f, &err) == 0, "%s", err.msg);
    colibri_kv_file_close(f);
    size_t n1;
    uint8_t *b1 = slurp(path, &n1);
    struct colibri_kv_file_stat st;
    CHECK(colibri_kv_file_stat(path, &st, &err) == 0 && st.published == N1 && st.valid == N1 && st.first_bad == -1,
          "%s", err.msg);
    size_t rec = (size_t)st.record_bytes;
    CHECK(n0 == n1 && n1 == 4096 + N1 * rec, "file of %zu bytes, was %zu", n1, n0);
    CHECK(!memcmp(b0 + 4096, b1 + 4096, 10 * rec), "the 10 shared positions were rewritten");
    CHECK(memcmp(b0 + 4096 + 10 * rec, b1 + 4096 + 10 * rec, rec) != 0, "position 10 was not rewritten");
    /* Reopen: the file now holds the new prompt. */
    colibri_session *d = new_session(M, "tq4");
    CHECK(colibri_kv_file_open(d, path, &f, &info, &err) == 0 && info.restored == N1 &&
              !memcmp(colibri_session_tokens(d), P, sizeof P),
          "%s", err.msg);
    /* The same prompt again: everything but the last token is reused. */
    CHECK(colibri_session_reuse_prefix(d, P, N1, &err) == N1 - 1, "full match");
    colibri_kv_file_close(f);
    colibri_session_free(d);
    colibri_session_free(s);
    colibri_session_free(c);
    free(lr);
    free(lc);
    free(b0);
    free(b1);
}

static void expect_refused(colibri_model *m, const char *tier, const char *path, const char *needle)
{
    size_t n0, n1;
    uint8_t *b0 = slurp(path, &n0);
    colibri_session *s = new_session(m, tier);
    colibri_kv_file *f = NULL;
    struct colibri_kv_info info;
    struct colibri_err err = { 0 };
    int rc = colibri_kv_file_open(s, path, &f, &info, &err);
    CHECK(rc == COLIBRI_EMISMATCH && f == NULL && strstr(err.msg, needle), "%s: rc %d: %s", needle, rc, err.msg);
    CHECK(colibri_session_pos(s) == 0, "the session is not empty after a refusal");
    uint8_t *b1 = slurp(path, &n1);
    CHECK(b0 && b1 && n0 == n1 && !memcmp(b0, b1, n0), "the refused file was modified");
    colibri_session_free(s);
    free(b0);
    free(b1);
}

static void test_refusals(void)
{
    const char *path = path_of("refuse.ckv");
    save_prefix(path, "tq4");
    expect_refused(M, "bf16", path, "saved with --kv tq4; run with --kv tq4 to reuse it");
    expect_refused(M, "f32", path, "saved with --kv tq4; run with --kv tq4 to reuse it");
    colibri_model *other = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_model_load(OTHER_FIXTURE, NULL, &other, &err) == 0, "%s", err.msg);
    if (other) expect_refused(other, "tq4", path, "model: saved by another model");
    colibri_model_free(other);
    colibri_model *q = NULL;
    struct colibri_model_opts mo = { .dense_fmt = "bf16" };
    CHECK(colibri_model_load(FIXTURE, &mo, &q, &err) == 0, "%s", err.msg);
    if (q) expect_refused(q, "tq4", path, "weights: saved with weights 'experts=stored dense=stored embed=stored'");
    colibri_model_free(q);
    /* A session that already holds tokens cannot open a file. */
    colibri_session *s = new_session(M, "tq4");
    colibri_kv_file *f = NULL;
    CHECK(colibri_session_prefill(s, T, 2, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(colibri_kv_file_open(s, path, &f, NULL, &err) == COLIBRI_EINVAL, "opened into a non-empty session");
    colibri_session_free(s);
}

/* f32 file, tq4 session: restored (re-encoded), the file untouched until
 * the save, then a tq4 file that a tq4 session restores bit for bit. */
static void test_upgrade(void)
{
    const char *path = path_of("up.ckv");
    save_prefix(path, "f32");
    size_t n0, n1;
    uint8_t *b0 = slurp(path, &n0);
    struct colibri_err err = { 0 };
    colibri_session *s = new_session(M, "tq4");
    colibri_kv_file *f = NULL;
    struct colibri_kv_info info;
    CHECK(colibri_kv_file_open(s, path, &f, &info, &err) == 0 && info.upgraded && info.restored == N1, "%s", err.msg);
    uint8_t *b1 = slurp(path, &n1);
    CHECK(n0 == n1 && !memcmp(b0, b1, n0), "the f32 file changed before the save");
    float *ls = malloc((size_t)V * sizeof *ls), *lt = malloc((size_t)V * sizeof *lt);
    CHECK(colibri_kv_file_save(f, &err) == 0, "%s", err.msg);
    colibri_kv_file_close(f);
    struct colibri_kv_file_stat st;
    CHECK(colibri_kv_file_stat(path, &st, &err) == 0 && !strcmp(st.tier, "tq4") && st.valid == N1, "%s %s", err.msg,
          st.tier);
    CHECK(st.file_bytes < (int64_t)n0, "a tq4 file (%lld B) should be smaller than the f32 one (%zu B)",
          (long long)st.file_bytes, n0);
    CHECK(colibri_session_prefill(s, T + N1, N2, ls, 0, &err) == 0, "%s", err.msg);
    colibri_session *t = new_session(M, "tq4");
    CHECK(colibri_kv_file_open(t, path, &f, &info, &err) == 0 && !info.upgraded && info.restored == N1, "%s", err.msg);
    CHECK(colibri_session_prefill(t, T + N1, N2, lt, 0, &err) == 0, "%s", err.msg);
    CHECK(!memcmp(ls, lt, (size_t)V * sizeof *ls), "the rewritten tq4 file restores other rows than the upgrade");
    colibri_kv_file_close(f);
    colibri_session_free(s);
    colibri_session_free(t);
    free(ls);
    free(lt);
    free(b0);
    free(b1);
}

int main(void)
{
    struct colibri_err err = { 0 };
    if (colibri_model_load(FIXTURE, NULL, &M, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    V = colibri_model_vocab(M);
    srand(7);
    for (int i = 0; i < N1 + N2; i++) T[i] = rand() % V;
    snprintf(dir, sizeof dir, "%s/colibri_persist_api_XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir)) return 1;
    RUN_TEST(test_restore_f32_bit_identical);
    RUN_TEST(test_restore_quantized_equals_cold);
    RUN_TEST(test_reuse_prefix_and_diverge);
    RUN_TEST(test_refusals);
    RUN_TEST(test_upgrade);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    colibri_model_free(M);
    return CHECK_SUMMARY();
}
