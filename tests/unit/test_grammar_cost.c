/* test_grammar_cost.c - what the grammar matcher (src/sample/grammar_match.c)
 * does per token on grammars whose stacks grow deep or many, counted in
 * elementary steps (sample_grammar_stats) rather than timed: a step's work
 * per stack must not grow with the nesting depth or the number of stacks,
 * and the kept stacks must share their tails. Each walk also checks every
 * mask against a hand-written recognizer of the grammar's language, over a
 * vocabulary of single bytes plus a few multi-byte pieces (as fuzz_grammar
 * uses), calling the mask and allows() for every id at each step the way
 * fuzz_grammar does (its 64-token walk on the deep grammar below hit
 * libFuzzer's 10 s timeout). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sample/grammar_internal.h"

#define N_VOCAB (256 + 3)
#define EOG (N_VOCAB - 1)

static char bytes[256][2];
static const char *piece[N_VOCAB];
static uint32_t plen[N_VOCAB];
static uint8_t eog[N_VOCAB];

static void vocab_init(void)
{
    for (int i = 0; i < 256; i++) {
        bytes[i][0] = (char)i;
        piece[i] = bytes[i];
        plen[i] = 1;
    }
    piece[256] = "true";
    plen[256] = 4;
    piece[257] = ", ";
    plen[257] = 2;
    piece[EOG] = NULL;
    eog[EOG] = 1;
}

static struct grammar *compile(const char *src)
{
    struct grammar_vocab v = { N_VOCAB, piece, plen, eog };
    struct grammar *g = NULL;
    struct colibri_err err = { 0 };
    int rc = sample_grammar_compile(src, strlen(src), &v, &g, &err);
    CHECK(rc == 0, "compile: %s", err.msg);
    return rc ? NULL : g;
}

/* A language's next-token rule: whether id may follow the text t[0..n). */
typedef int (*lang_fn)(const char *t, int n, int32_t id);

static int is_lower(int c) { return c >= 'a' && c <= 'z'; }

/* root ::= item ("," item)*, item ::= [a-z]+ | "[" root "]": after a
 * letter come letters, ',' and (inside brackets) ']'; after '[' or ',' or
 * at the start, a letter or '['; after ']' a ',' or another ']'. */
static int lists_next(const char *t, int n, int32_t id)
{
    int depth = 0;
    for (int i = 0; i < n; i++) depth += t[i] == '[' ? 1 : t[i] == ']' ? -1 : 0;
    int last = n ? t[n - 1] : 0;
    int word = is_lower(last), closed = last == ']';
    if (id == EOG) return depth == 0 && (word || closed);
    if (id == 256) return !closed;               /* "true": four letters */
    if (id == 257 || id > 255) return 0;         /* ", " has a space */
    if (is_lower(id)) return !closed;
    if (id == '[') return !word && !closed;
    if (id == ',') return word || closed;
    if (id == ']') return (word || closed) && depth > 0;
    return 0;
}

/* root ::= item ("," item)*, item ::= [a-z]+ root: an item never ends, so
 * only letters ever come. */
static int letters_next(const char *t, int n, int32_t id)
{
    (void)t, (void)n;
    return id == 256 || (id < 256 && is_lower(id));
}

/* ([a-z][a-z])+ spelled through a chain of rules that reach the last one by
 * 2^depth paths: letters always, the end after an even count. */
static int pairs_next(const char *t, int n, int32_t id)
{
    (void)t;
    if (id == EOG) return n >= 2 && n % 2 == 0;
    return id == 256 || (id < 256 && is_lower(id));
}

static char *chain_grammar(int depth)
{
    char *s = malloc(64 + (size_t)depth * 48);
    if (!s) return NULL;
    int k = sprintf(s, "root ::= [a-z] r0\n");
    for (int i = 0; i < depth; i++) k += sprintf(s + k, "r%d ::= r%d | r%d \"\"\n", i, i + 1, i + 1);
    sprintf(s + k, "r%d ::= [a-z] | [a-z] root\n", depth);
    return s;
}

/* Per step, as fuzz_grammar does: the mask, allows() for every id (each
 * compared with the language), then the pick (from `text`, or a random
 * allowed id when text runs out: next of the LCG in *seed). work_per_stack
 * gets each step's work over the stacks it started from. Returns the steps
 * done. */
static int walk(struct grammar *g, lang_fn lang, const char *text, int steps, uint32_t seed, double *work_per_stack,
                struct grammar_stats *end)
{
    struct grammar_state *st = NULL;
    struct colibri_err err = { 0 };
    CHECK(sample_grammar_state_new(g, &st, &err) == 0, "state: %s", err.msg);
    if (!st) return 0;
    /* the whole-vocabulary walk, which the mask cache falls back to (and is
     * checked against in test_grammar_mcache), so the counts measure it */
    sample_grammar_mask_flags(st, MASK_NO_CACHE);
    char t[1024];
    int n = 0, step = 0, bad = 0;
    uint8_t allowed[N_VOCAB];
    for (; step < steps && !bad; step++) {
        struct grammar_stats s0, s1;
        sample_grammar_stats(st, &s0);
        int32_t k = sample_grammar_mask(st, allowed), seen = 0;
        for (int32_t id = 0; id < N_VOCAB; id++) {
            int want = lang(t, n, id);
            if (!bad && (allowed[id] != want || (sample_grammar_allows(st, id) != 0) != want)) {
                CHECK(0, "after '%.*s': id %d mask %d allows %d, the language says %d", n, t, id, allowed[id],
                      sample_grammar_allows(st, id), want);
                bad = 1;
            }
            seen += allowed[id];
        }
        CHECK(seen == k, "mask count %d, %d ids set", k, seen);
        int32_t pick = -1;
        if (text && *text) pick = (unsigned char)*text++;
        else {
            seed = seed * 1103515245u + 12345u;
            int32_t want = k > 1 ? (int32_t)((seed >> 16) % (uint32_t)(k - allowed[EOG])) : 0;
            for (int32_t id = 0, i = 0; id < EOG && pick < 0; id++) if (allowed[id] && i++ == want) pick = id;
        }
        if (pick < 0 || n + 4 >= (int)sizeof t) break;
        CHECK(sample_grammar_accept(st, pick) == 0, "accept %d after '%.*s'", pick, n, t);
        memcpy(t + n, piece[pick], plen[pick]);
        n += (int)plen[pick];
        sample_grammar_stats(st, &s1);
        if (work_per_stack) work_per_stack[step] = (double)(s1.work - s0.work) / s0.stacks;
    }
    if (end) sample_grammar_stats(st, end);
    sample_grammar_state_free(st);
    return step;
}

/* Nested brackets 64 deep: a stack is compared, hashed and kept in one
 * step whatever its depth, so of a step's work only the mask cache's key
 * (one number per node) grows with the depth: at depth 60 it is under 3
 * times what it is at depth 4 (15 times if the 262 queries per step each
 * paid the depth). Random walks agree with the language. */
static void test_deep_nesting(void)
{
    struct grammar *g = compile("root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"[\" root \"]\"\n");
    if (!g) return;
    char text[80];
    memset(text, '[', 64);
    text[64] = 0;
    double w[64] = { 0 };
    struct grammar_stats end;
    CHECK(walk(g, lists_next, text, 64, 0, w, &end) == 64, "64 brackets");
    CHECK(w[60] <= 3.0 * w[4], "work per stack at depth 60: %.0f, at depth 4: %.0f", w[60], w[4]);
    CHECK(end.nodes <= 2 * 64 + 16, "%u nodes kept for %u stacks 64 deep", end.nodes, end.stacks);
    for (uint32_t seed = 1; seed <= 20; seed++) walk(g, lists_next, "[[[[[[[[", 48, seed, NULL, NULL);
    sample_grammar_free(g);
}

/* The fuzz_grammar input that timed out: an item that never ends makes one
 * more stack per letter, each a level deeper (128 stacks 65 deep after 64
 * letters). The work per stack stays flat and the stacks share their tails. */
static void test_many_deep_stacks(void)
{
    struct grammar *g = compile("root ::= item (\",\" item)*\nitem ::= [a-z]+ root\n");
    if (!g) return;
    double w[64] = { 0 };
    struct grammar_stats end;
    CHECK(walk(g, letters_next, NULL, 64, 7, w, &end) == 64, "64 letters");
    CHECK(end.stacks >= 64, "%u stacks (the grammar makes one more per letter)", end.stacks);
    CHECK(w[63] <= 2.0 * w[7], "work per stack after 64 letters: %.0f, after 8: %.0f", w[63], w[7]);
    CHECK(end.nodes <= 3 * end.stacks, "%u nodes kept for %u stacks", end.nodes, end.stacks);
    sample_grammar_free(g);
}

/* One rule reached by 2^depth paths: expanding it costs the rules, not the
 * paths (2^14 paths would be 128 times the work of 2^7). */
static void test_many_paths(void)
{
    double per[2] = { 0 };
    const int depth[2] = { 7, 14 };
    for (int i = 0; i < 2; i++) {
        char *src = chain_grammar(depth[i]);
        struct grammar *g = src ? compile(src) : NULL;
        free(src);
        if (!g) return;
        double w[24] = { 0 };
        CHECK(walk(g, pairs_next, NULL, 24, 3, w, NULL) == 24, "24 letters at depth %d", depth[i]);
        for (int s = 0; s < 24; s++) per[i] = w[s] > per[i] ? w[s] : per[i];
        sample_grammar_free(g);
    }
    CHECK(per[1] <= 3.0 * per[0], "worst work per stack: %.0f with 2^%d paths, %.0f with 2^%d", per[1], depth[1], per[0],
          depth[0]);
}

int main(void)
{
    vocab_init();
    RUN_TEST(test_deep_nesting);
    RUN_TEST(test_many_deep_stacks);
    RUN_TEST(test_many_paths);
    return CHECK_SUMMARY();
}
