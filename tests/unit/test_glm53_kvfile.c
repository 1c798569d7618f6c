/* GLM-5.3 KV files (version 3: kv/persist_state.h, docs/FORMATS.md) on the
 * indexed fixture of tests/oracle_glm53 (KDA and indexed attention layers;
 * run from the repo root): a session saved and reopened resumes at the
 * file's last chunk end, or, for a prompt that diverges earlier, at the
 * latest chunk end within the common prefix, and the positions it then
 * computes are bit for bit those of a session that never saw the file: a
 * cold one fed the same calls (KDA's chunked prefill depends on where feeds
 * are cut; test_glm53_snapshots holds that to a cold session), or, where a
 * chunk ends inside a call, one fed the saved session's calls and truncated
 * to that chunk end; a diverged save shrinks the file first; a file cut
 * short or damaged keeps its sound chunks; everything else is refused by
 * name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "check.h"
#include "colibri.h"

#define FIX "tests/oracle_glm53/glm53_indexed"
#define T 300

static char path[256];

static void seq(int32_t *t, int n, int seed, int vocab)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + seed * 11 + i * i * (seed + 1)) % vocab);
}

static colibri_session *sess(colibri_model *m)
{
    struct colibri_err err = { 0 };
    struct colibri_session_opts so = { .n_ctx = T + 8, .kv_snapshot_every = 64, .kv_snapshots = 8 };
    colibri_session *s = NULL;
    CHECK(!colibri_session_new(m, &so, &s, &err), "%s", err.msg);
    return s;
}

/* The logits of every position of p[0..T) of a session that never saw the
 * file: fed by steps (n > 0: a prefill of n tokens, n < 0: -n decodes, 0
 * ends), truncated to `at` when at >= 0, then the rest in one prefill. */
static float *cold(colibri_model *m, const int32_t *p, const int *steps, int at)
{
    struct colibri_err err = { 0 };
    int V = colibri_model_vocab(m), pos = 0;
    float *l = calloc((size_t)T * V, sizeof *l);
    colibri_session *s = sess(m);
    for (int i = 0; steps && steps[i] && !err.code; i++) {
        if (steps[i] > 0) colibri_session_prefill(s, p + pos, steps[i], NULL, 0, &err);
        for (int k = 0; k < -steps[i]; k++) colibri_session_decode(s, p[pos + k], NULL, &err);
        pos += steps[i] > 0 ? steps[i] : -steps[i];
    }
    if (at >= 0 && !err.code) colibri_session_truncate(s, pos = at, &err);
    if (!err.code) colibri_session_prefill(s, p + pos, T - pos, l + (size_t)pos * V, 1, &err);
    CHECK(!err.code, "the reference session: %s", err.msg);
    colibri_session_free(s);
    return l;
}

/* s, opened on the file, takes prompt p: it must keep `want` positions and
 * then give the logits of cold(m, p, steps, at). */
static void resume(colibri_model *m, colibri_session *s, const int32_t *p, int want, const int *steps, int at,
                   const char *what)
{
    struct colibri_err err = { 0 };
    int V = colibri_model_vocab(m);
    float *c = cold(m, p, steps, at), *l = malloc((size_t)T * V * sizeof *l);
    int keep = colibri_session_reuse_prefix(s, p, T, &err);
    CHECK(keep == want, "%s: kept %d, want %d (%s)", what, keep, want, err.msg);
    if (keep >= 0) {
        CHECK(!colibri_session_prefill(s, p + keep, T - keep, l + (size_t)keep * V, 1, &err), "%s", err.msg);
        for (int i = keep; i < T; i++)
            if (memcmp(c + (size_t)i * V, l + (size_t)i * V, (size_t)V * sizeof *l)) {
                CHECK(0, "%s: position %d differs from the reference session's", what, i);
                break;
            }
    }
    free(c);
    free(l);
}

static colibri_kv_file *open_file(colibri_session *s, struct colibri_kv_info *ki)
{
    struct colibri_err err = { 0 };
    colibri_kv_file *f = NULL;
    CHECK(!colibri_kv_file_open(s, path, &f, ki, &err), "open: %s", err.msg);
    return f;
}

static void test_save_reopen_resume(void)
{
    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    if (colibri_model_load(FIX, NULL, &m, &err)) { CHECK(0, "%s", err.msg); return; }
    int V = colibri_model_vocab(m);
    int32_t b[T];
    seq(b, T, 3, V);
    unlink(path);
    struct colibri_kv_info ki;
    colibri_session *s = sess(m);
    colibri_kv_file *f = open_file(s, &ki);
    CHECK(ki.created && ki.restored == 0, "created %d restored %d", ki.created, ki.restored);
    colibri_session_prefill(s, b, 200, NULL, 0, &err);
    CHECK(!colibri_kv_file_save(f, &err), "save: %s", err.msg);
    for (int i = 200; i < 230; i++) colibri_session_decode(s, b[i], NULL, &err);
    CHECK(!colibri_kv_file_save(f, &err), "save: %s", err.msg);
    colibri_kv_file_close(f);
    colibri_session_free(s);

    /* reopened: at 230, its tokens, and the rest gives the cold logits */
    s = sess(m);
    f = open_file(s, &ki);
    CHECK(ki.restored == 230 && colibri_session_pos(s) == 230 && !ki.created && ki.trimmed == 0,
          "restored %d pos %d", ki.restored, colibri_session_pos(s));
    CHECK(memcmp(colibri_session_tokens(s), b, 230 * sizeof *b) == 0, "restored tokens differ");
    static const int saved[] = { 200, -30, 0 }, first[] = { 200, 0 };
    resume(m, s, b, 230, saved, -1, "reopened, extending");
    colibri_kv_file_close(f);
    colibri_session_free(s);

    /* a prompt diverging at 215 resumes from the chunk end at 200; saving
     * the diverged session shrinks the file, then appends */
    int32_t c2[T];
    memcpy(c2, b, sizeof c2);
    c2[215] = (c2[215] + 1) % V;
    s = sess(m);
    f = open_file(s, &ki);
    resume(m, s, c2, 200, first, -1, "reopened, diverging at 215");
    CHECK(!colibri_kv_file_save(f, &err), "save: %s", err.msg);
    colibri_kv_file_close(f);
    colibri_session_free(s);
    s = sess(m);
    f = open_file(s, &ki);
    CHECK(ki.restored == T && memcmp(colibri_session_tokens(s), c2, sizeof c2) == 0, "after the diverged save: %d",
          ki.restored);
    c2[250] = (c2[250] + 1) % V;
    resume(m, s, c2, 200, first, -1, "the diverged file, diverging at 250");
    colibri_kv_file_close(f);
    colibri_session_free(s);
    colibri_model_free(m);
}

/* The file's bytes; rewritten with put. */
static unsigned char *slurp(long *n)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    *n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*n);
    if (fread(b, 1, (size_t)*n, fp) != (size_t)*n) *n = 0;
    fclose(fp);
    return b;
}

static void put(const unsigned char *b, long n)
{
    FILE *fp = fopen(path, "wb");
    fwrite(b, 1, (size_t)n, fp);
    fclose(fp);
}

static void le64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i); }

/* A file cut short in its last chunk, or with a damaged byte there, keeps
 * the chunks before it; damaged headers and tables, other models, tiers
 * and layouts, and files of another version are refused by name and left
 * as they were. */
static void test_damage_and_refusals(void)
{
    struct colibri_err err = { 0 };
    colibri_model *m = NULL, *other = NULL, *mla = NULL;
    if (colibri_model_load(FIX, NULL, &m, &err) || colibri_model_load("tests/oracle_glm53/glm53_kda_hc4", NULL, &other, &err) ||
        colibri_model_load("tests/oracle/deepseek_v3_tiny", NULL, &mla, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    int V = colibri_model_vocab(m);
    int32_t b[T];
    seq(b, T, 4, V);
    unlink(path);
    colibri_session *s = sess(m);
    colibri_kv_file *f = open_file(s, NULL);
    colibri_session_prefill(s, b, 100, NULL, 0, &err);
    colibri_kv_file_save(f, &err);
    colibri_session_prefill(s, b + 100, 60, NULL, 0, &err);
    colibri_kv_file_save(f, &err);
    colibri_kv_file_close(f);
    colibri_session_free(s);
    long n = 0;
    unsigned char *whole = slurp(&n), *w = malloc((size_t)n);
    CHECK(whole && n > 8192, "file of %ld bytes", n);
    if (!whole || n <= 8192) return;
    struct colibri_kv_info ki;
    /* the chunks: each starts with its size at offset 24 and ends at p1 (offset 16) */
    long start[64], p1[64];
    int nc = 0;
    for (long off = 8192; off + 32 <= n && nc < 64; nc++) {
        uint64_t sz = 0, e = 0;
        for (int i = 7; i >= 0; i--) sz = sz << 8 | whole[off + 24 + i], e = e << 8 | whole[off + 16 + i];
        start[nc] = off;
        p1[nc] = (long)e;
        off += (long)sz;
        if (sz == 0) break;
    }
    start[nc] = n;
    CHECK(nc >= 2 && p1[nc - 1] == 160, "%d chunks, the last ending at %ld", nc, nc ? p1[nc - 1] : -1L);
    /* each chunk cut short or with a byte flipped: the chunks before it are kept */
    for (int k = 0; k < nc; k++)
        for (int how = 0; how < 3; how++) {
            memcpy(w, whole, (size_t)n);
            long len = n, mid = (start[k] + start[k + 1]) / 2;
            if (how == 0) len = mid;
            else if (how == 1) w[mid] ^= 0x10;
            else len = start[k] + 1;
            put(w, len);
            long want = k ? p1[k - 1] : 0;
            struct colibri_kv_file_stat st;
            CHECK(colibri_kv_file_stat(path, &st, &err) == 0 && st.read_version == 3 && st.first_bad == want &&
                      st.chunks == nc && st.chunks_valid == k,
                  "chunk %d case %d: stat: first_bad %lld, %lld of %lld chunks sound (%s)", k, how,
                  (long long)st.first_bad, (long long)st.chunks_valid, (long long)st.chunks, err.msg);
            s = sess(m);
            f = open_file(s, &ki);
            char tag[16];
            snprintf(tag, sizeof tag, "chunk %d", k);
            CHECK(ki.restored == want && ki.trimmed == nc - k && strstr(ki.message, tag), "chunk %d case %d: restored %d "
                  "trimmed %d: %s", k, how, ki.restored, ki.trimmed, ki.message);
            colibri_kv_file_close(f);
            /* the writer published what it kept and dropped the rest */
            CHECK(colibri_kv_file_stat(path, &st, &err) == 0 && st.first_bad == -1 && st.chunks == k &&
                      st.tail_bytes == 0,
                  "chunk %d case %d: after opening: %lld chunks, first_bad %lld, %lld tail bytes", k, how,
                  (long long)st.chunks, (long long)st.first_bad, (long long)st.tail_bytes);
            static const int calls[] = { 100, 60, 0 };
            resume(m, s, b, (int)want, calls, (int)want, "after a damaged chunk");
            colibri_session_free(s);
        }
    /* random damage anywhere (flipped bytes, cuts, in any number): the file
     * is refused or restores a sound prefix, a chunk end, with its tokens */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int it = 0; it < 120; it++) {
        memcpy(w, whole, (size_t)n);
        long len = n;
        for (int d = 0; d < 1 + it % 3; d++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            long at = (long)((x >> 33) % (uint64_t)len);
            if ((x >> 20) % 4 == 0) len = at;
            else w[at] ^= (unsigned char)(1 + (x >> 8) % 255);
        }
        put(w, len);
        s = sess(m);
        f = NULL;
        int rc = colibri_kv_file_open(s, path, &f, &ki, &err), pos = colibri_session_pos(s), ok = pos == 0;
        for (int k = 0; k < nc; k++) ok |= pos == p1[k];
        CHECK(rc ? pos == 0 : ok && ki.restored == pos && !memcmp(colibri_session_tokens(s), b, (size_t)pos * sizeof *b),
              "damage %d: rc %d, restored %d: %s", it, rc, pos, rc ? err.msg : ki.message);
        colibri_kv_file_close(f);
        colibri_session_free(s);
    }
    /* refusals, each naming what differs; the file stays as it was */
    struct { const char *what, *want; int off; unsigned char x; int fix_table; } cases[] = {
        { "read_version 4", "read_version 4", 10, 4 ^ 3, 0 },
        { "damaged header", "header_checksum", 60, 1, -1 },
        { "tier", "saved with --kv", 104, 'g' ^ 'f', 0 },
        { "a layer's row bytes", "layer 1: its row_bytes", 4096 + 32 + 16, 1, 1 },
        { "damaged table", "table_checksum", 4096 + 32 + 16, 1, -1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(w, whole, (size_t)n);
        w[cases[i].off] ^= cases[i].x;
        if (cases[i].fix_table == 1) le64(w + 120, XXH64(w + 4096, 4 * 32, 0));
        if (cases[i].fix_table >= 0) le64(w + 248, XXH64(w, 248, 0));
        put(w, n);
        s = sess(m);
        f = NULL;
        int rc = colibri_kv_file_open(s, path, &f, NULL, &err);
        CHECK(rc != 0 && strstr(err.msg, cases[i].want) && colibri_session_pos(s) == 0, "%s: rc %d: %s",
              cases[i].what, rc, err.msg);
        long n2 = 0;
        unsigned char *after = slurp(&n2);
        CHECK(n2 == n && !memcmp(after, w, (size_t)n), "%s: the refused file was changed", cases[i].what);
        free(after);
        colibri_kv_file_close(f);
        colibri_session_free(s);
    }
    put(whole, n);
    /* another GLM-5.3 model; an MLA model's session; a GLM-5.3 session on a row file */
    s = sess(other);
    CHECK(colibri_kv_file_open(s, path, &f, NULL, &err) == COLIBRI_EMISMATCH && strstr(err.msg, "model"),
          "another model: %s", err.msg);
    colibri_session_free(s);
    struct colibri_session_opts so = { .n_ctx = 64 };
    colibri_session_new(mla, &so, &s, &err);
    CHECK(colibri_kv_file_open(s, path, &f, NULL, &err) != 0 && strstr(err.msg, "read_version 3"),
          "an MLA session: %s", err.msg);
    colibri_session_free(s);
    unlink(path);
    colibri_session_new(mla, &so, &s, &err);
    f = open_file(s, NULL);
    int32_t t8[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    colibri_session_prefill(s, t8, 8, NULL, 0, &err);
    colibri_kv_file_save(f, &err);
    colibri_kv_file_close(f);
    colibri_session_free(s);
    s = sess(m);
    CHECK(colibri_kv_file_open(s, path, &f, NULL, &err) == COLIBRI_EMISMATCH && strstr(err.msg, "read_version 1"),
          "a row file: %s", err.msg);
    colibri_session_free(s);
    unlink(path);
    free(whole);
    free(w);
    colibri_model_free(m);
    colibri_model_free(other);
    colibri_model_free(mla);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/colibri_test_glm53_kvfile_%d.ckv", (int)getpid());
    RUN_TEST(test_save_reopen_resume);
    RUN_TEST(test_damage_and_refusals);
    unlink(path);
    return CHECK_SUMMARY();
}
