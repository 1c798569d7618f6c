/* test_grammar.c - constrained decoding (src/sample/grammar*.c) through the
 * public API on the bundled colibri-tiny tokenizer: compile errors by name,
 * what the matcher allows, and generation under random logits whose every
 * output must parse (json_object) and match its schema. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "colibri.h"
#include "sample/grammar.h"

static colibri_tokenizer *tk;

static int compile_rc(const char *gbnf, char *msg, size_t cap)
{
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    int rc = colibri_grammar_new(tk, gbnf, strlen(gbnf), &g, &err);
    snprintf(msg, cap, "%s", err.msg);
    colibri_grammar_free(g);
    return rc;
}

static void test_compile_errors(void)
{
    static const struct { const char *g, *needle; } E[] = {
        { "root ::= foo", "rule 'foo' is used but never defined" },
        { "start ::= \"a\"", "no 'root' rule" },
        { "root ::= root \"a\" | \"b\"", "left-recursive" },
        { "root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "left-recursive" },
        { "root ::= \"a\"\nroot ::= \"b\"", "defined twice" },
        { "root ::= \"\\q\"", "unknown escape" },
        { "root ::= [z-a]", "backwards" },
        { "root ::= (\"a\"", "missing ')'" },
        { "root ::= \"a\"{5,2}", "out of range" },
        { "root ::= \"unterminated", "unterminated string" },
        { "root ::= [^\\x00-\\U0010FFFF]", "cannot be satisfied" },
    };
    for (size_t i = 0; i < sizeof E / sizeof *E; i++) {
        char msg[1024];
        int rc = compile_rc(E[i].g, msg, sizeof msg);
        CHECK(rc == COLIBRI_EINVAL && strstr(msg, E[i].needle), "%s: rc %d '%s' (want '%s')", E[i].g, rc, msg, E[i].needle);
    }
    char msg[1024];
    CHECK(compile_rc("root ::= item+ # comment\nitem ::= [a-c] | \"é\"\n  | \"xyz\"{1,2}\n", msg, sizeof msg) == 0, "%s", msg);
}

/* tokens by their exact text */
static int32_t id_of(const char *text) { return colibri_tokenizer_token_id(tk, text); }

static void test_allows(void)
{
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    const char *src = "root ::= \"ab\" [0-9]+ \"é\"";
    CHECK(colibri_grammar_new(tk, src, strlen(src), &g, &err) == 0, "%s", err.msg);
    if (!g) return;
    struct grammar_state *st = NULL;
    CHECK(sample_grammar_state_new(g->g, &st, &err) == 0, "%s", err.msg);
    int32_t a = id_of("a"), b = id_of("b"), one = id_of("1"), eos = colibri_tokenizer_eos(tk);
    CHECK(a >= 0 && b >= 0 && one >= 0 && eos >= 0, "tiny vocabulary has a, b, 1 and EOS");
    CHECK(sample_grammar_allows(st, a) && !sample_grammar_allows(st, b) && !sample_grammar_allows(st, eos), "start: only 'a'");
    CHECK(sample_grammar_accept(st, a) == 0 && sample_grammar_allows(st, b) && !sample_grammar_allows(st, a), "after a: b");
    sample_grammar_accept(st, b);
    CHECK(sample_grammar_allows(st, one) && !sample_grammar_allows(st, eos), "digits, not the end");
    sample_grammar_accept(st, one);
    /* é is two bytes: the byte tokens of the byte-level vocabulary can spell it one at a time */
    int32_t c3 = -1, a9 = -1;
    for (int32_t i = 0; i < colibri_tokenizer_n_vocab(tk); i++) {
        char *t = NULL;
        size_t len = 0;
        if (colibri_tokenizer_decode(tk, &i, 1, 0, &t, &len, &err) == 0 && len == 1) {
            if ((unsigned char)t[0] == 0xc3) c3 = i;
            if ((unsigned char)t[0] == 0xa9) a9 = i;
        }
        free(t);
    }
    CHECK(c3 >= 0 && a9 >= 0, "byte tokens for 0xc3 0xa9");
    CHECK(sample_grammar_allows(st, c3), "the first byte of é is allowed");
    CHECK(sample_grammar_accept(st, c3) == 0 && !sample_grammar_allows(st, eos) && sample_grammar_allows(st, a9), "then its second");
    sample_grammar_accept(st, a9);
    CHECK(sample_grammar_allows(st, eos) && sample_grammar_done(st), "complete: only the end");
    /* ED A0..BF would begin a surrogate, which UTF-8 never encodes: after ED, 9F may come, B0 may not
     * (a negated class holds U+D800..DFFF as numbers, yet no text can reach them) */
    {
        int32_t ed = -1, b0 = -1, x9f = -1;
        for (int32_t i = 0; i < colibri_tokenizer_n_vocab(tk); i++) {
            char *t = NULL;
            size_t len = 0;
            if (colibri_tokenizer_decode(tk, &i, 1, 0, &t, &len, &err) == 0 && len == 1) {
                if ((unsigned char)t[0] == 0xed) ed = i;
                if ((unsigned char)t[0] == 0xb0) b0 = i;
                if ((unsigned char)t[0] == 0x9f) x9f = i;
            }
            free(t);
        }
        colibri_grammar *gn = NULL;
        const char *neg = "root ::= [^a]+";
        struct grammar_state *sn = NULL;
        CHECK(ed >= 0 && b0 >= 0 && x9f >= 0 && colibri_grammar_new(tk, neg, strlen(neg), &gn, &err) == 0 &&
              sample_grammar_state_new(gn->g, &sn, &err) == 0, "setup: %s", err.msg);
        if (sn) {
            CHECK(sample_grammar_allows(sn, ed) && sample_grammar_accept(sn, ed) == 0, "ED starts U+D000..D7FF");
            CHECK(sample_grammar_allows(sn, x9f) && !sample_grammar_allows(sn, b0), "ED B0 is a surrogate's start");
        }
        sample_grammar_state_free(sn);
        colibri_grammar_free(gn);
    }
    /* [^À-ßà-ÿ]: two excluded ranges that only together cover U+00C0..U+00FF, all that lead byte C3
     * starts, so C3 is not allowed (it would lead nowhere); C2 (U+0080..U+00BF) and 'a' are */
    {
        int32_t c2 = -1, c3b = -1;
        for (int32_t i = 0; i < colibri_tokenizer_n_vocab(tk); i++) {
            char *t = NULL;
            size_t len = 0;
            if (colibri_tokenizer_decode(tk, &i, 1, 0, &t, &len, &err) == 0 && len == 1) {
                if ((unsigned char)t[0] == 0xc2) c2 = i;
                if ((unsigned char)t[0] == 0xc3) c3b = i;
            }
            free(t);
        }
        colibri_grammar *gu = NULL;
        const char *two = "root ::= [^\u00C0-\u00DF\u00E0-\u00FF]";
        struct grammar_state *su = NULL;
        CHECK(c2 >= 0 && c3b >= 0 && colibri_grammar_new(tk, two, strlen(two), &gu, &err) == 0 &&
              sample_grammar_state_new(gu->g, &su, &err) == 0, "setup: %s", err.msg);
        if (su) CHECK(!sample_grammar_allows(su, c3b) && sample_grammar_allows(su, c2) && sample_grammar_allows(su, a),
                      "a union of excluded ranges covering C3's block excludes C3");
        sample_grammar_state_free(su);
        colibri_grammar_free(gu);
    }
    uint8_t *mask = malloc((size_t)colibri_tokenizer_n_vocab(tk));
    int32_t k = sample_grammar_mask(st, mask);
    CHECK(k >= 1 && mask[eos], "mask at the end holds EOS (%d ids)", k);
    CHECK(sample_grammar_accept(st, a) == COLIBRI_EINVAL, "a token past the end is refused");
    free(mask);
    sample_grammar_state_free(st);
    colibri_grammar_free(g);
}

/* Generates under grammar g with seeded random logits; after `pressure`
 * steps, tokens that close things and EOS are pushed up so the text ends. */
static char *generate(colibri_grammar *g, uint64_t seed, int pressure, float temp, int *n_steps)
{
    struct colibri_err err = { 0 };
    int32_t n = colibri_tokenizer_n_vocab(tk);
    struct colibri_sampler_opts o = colibri_sampler_default_opts();
    o.temperature = temp;
    o.top_k = 0;
    o.top_p = 1;
    o.min_p = 0;
    o.seed = seed;
    o.grammar = g;
    colibri_sampler *s = NULL;
    if (colibri_sampler_new(&o, n, &s, &err)) { CHECK(0, "%s", err.msg); return NULL; }
    float *l = malloc((size_t)n * sizeof *l);
    uint8_t *closer = calloc((size_t)n, 1);
    for (int32_t i = 0; i < n; i++) {
        char *t = NULL;
        size_t len = 0;
        if (colibri_tokenizer_decode(tk, &i, 1, 0, &t, &len, &err) == 0)
            closer[i] = len > 0 && (strchr(t, '}') || strchr(t, ']') || strchr(t, '"'));
        free(t);
    }
    int32_t *ids = malloc(4096 * sizeof *ids);
    int m = 0;
    uint64_t x = seed * 2654435761u + 1;
    for (; m < 4000; m++) {
        for (int32_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            l[i] = (float)((x >> 11) * 0x1.0p-53) * 8.0f;
            if (m > pressure && (closer[i] || colibri_tokenizer_is_eog(tk, i))) l[i] += 40.0f;
        }
        int32_t t = colibri_sampler_sample(s, l, &err);
        CHECK(t >= 0, "step %d: %s", m, err.msg);
        if (t < 0 || colibri_tokenizer_is_eog(tk, t)) break;
        colibri_sampler_accept(s, t);
        ids[m] = t;
    }
    char *text = NULL;
    size_t len = 0;
    colibri_tokenizer_decode(tk, ids, (size_t)m, 0, &text, &len, &err);
    *n_steps = m;
    free(ids);
    free(l);
    free(closer);
    colibri_sampler_free(s);
    return text;
}

/* Whitespace between JSON tokens stays within llama.cpp's bound: one space,
 * or one newline and at most 20 blanks of indent. 1 when text keeps it. */
static int blanks_bounded(const char *text)
{
    int in_str = 0, run = 0, nl = 0;
    for (const char *p = text; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '"') in_str = 0;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            run++;
            nl += *p == '\n';
            if (nl > 1 || *p == '\r' || run > 21 || (run > 1 && !nl)) return 0;
            continue;
        }
        run = nl = 0;
        if (*p == '"') in_str = 1;
    }
    return 1;
}

static void test_json_object_always_parses(void)
{
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    CHECK(colibri_grammar_from_json_schema(tk, NULL, &g, &err) == 0, "%s", err.msg);
    if (!g) return;
    int ok = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        int steps = 0;
        char *text = generate(g, seed, 30, seed % 2 ? 1.0f : 0.0f, &steps);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        CHECK(j && cJSON_IsObject(j), "seed %llu (%d tokens): not a JSON object: %s", (unsigned long long)seed, steps,
              text ? text : "(null)");
        ok += j != NULL;
        CHECK(!text || blanks_bounded(text), "seed %llu: unbounded blanks: %s", (unsigned long long)seed, text);
        cJSON_Delete(j);
        free(text);
    }
    printf("     json_object: %d/20 parse\n", ok);
    colibri_grammar_free(g);
}

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"minItems\":1,\"maxItems\":3},"
    "\"address\":{\"$ref\":\"#/$defs/Address\"},"
    "\"kind\":{\"anyOf\":[{\"const\":\"x\"},{\"type\":\"null\"}]},"
    "\"when\":{\"type\":\"string\",\"format\":\"date\"}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"address\"],"
    "\"$defs\":{\"Address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"city\"]}}}";

static void test_json_schema_instances(void)
{
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    CHECK(colibri_grammar_from_json_schema(tk, SCHEMA, &g, &err) == 0, "%s", err.msg);
    if (!g) return;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        int steps = 0;
        char *text = generate(g, seed, 40, 1.0f, &steps);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        CHECK(j != NULL, "seed %llu: not JSON: %s", (unsigned long long)seed, text ? text : "");
        if (j) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name"), *age = cJSON_GetObjectItemCaseSensitive(j, "age"),
                        *tags = cJSON_GetObjectItemCaseSensitive(j, "tags"), *addr = cJSON_GetObjectItemCaseSensitive(j, "address"),
                        *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
            CHECK(cJSON_IsString(name) && strlen(name->valuestring) <= 12 * 6, "name: %s", text);
            CHECK(cJSON_IsNumber(age) && age->valuedouble == floor(age->valuedouble), "age: %s", text);
            int nt = cJSON_GetArraySize(tags);
            CHECK(cJSON_IsArray(tags) && nt >= 1 && nt <= 3, "tags count: %s", text);
            const cJSON *t;
            cJSON_ArrayForEach(t, tags) CHECK(cJSON_IsString(t) && strlen(t->valuestring) == 1 &&
                                              strchr("abc", t->valuestring[0]), "tag: %s", text);
            CHECK(cJSON_IsObject(addr) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(addr, "city")), "address: %s", text);
            CHECK(!kind || cJSON_IsNull(kind) || (cJSON_IsString(kind) && !strcmp(kind->valuestring, "x")), "kind: %s", text);
            int keys = cJSON_GetArraySize(j);
            CHECK(keys >= 4 && keys <= 6, "keys: %s", text);
        }
        cJSON_Delete(j);
        free(text);
    }
    colibri_grammar_free(g);
}

/* string formats: every instance has the form (checked field by field) */
static void test_string_formats(void)
{
    static const char *const F[] = { "date-time", "date", "uuid" };
    for (int f = 0; f < 3; f++) {
        char schema[128];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"format\":\"%s\"}", F[f]);
        struct colibri_err err = { 0 };
        colibri_grammar *g = NULL;
        CHECK(colibri_grammar_from_json_schema(tk, schema, &g, &err) == 0, "%s: %s", F[f], err.msg);
        if (!g) continue;
        for (uint64_t seed = 1; seed <= 4; seed++) {
            int steps = 0;
            char *text = generate(g, seed, 1000, 1.0f, &steps);
            cJSON *j = text ? cJSON_Parse(text) : NULL;
            const char *v = cJSON_IsString(j) ? j->valuestring : "";
            int y, mo, d, h, mi, sec, n = 0, ok;
            if (f == 0) ok = sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) == 6 && n == 19 &&
                             mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 && sec <= 59 &&
                             (v[n] == 'Z' || v[n] == '+' || v[n] == '-' || v[n] == '.');
            else if (f == 1) ok = sscanf(v, "%4d-%2d-%2d%n", &y, &mo, &d, &n) == 3 && n == 10 && !v[n] && mo >= 1 &&
                                  mo <= 12 && d >= 1 && d <= 31;
            else ok = strlen(v) == 36 && v[8] == '-' && v[13] == '-' && v[18] == '-' && v[23] == '-';
            CHECK(ok, "%s instance %llu: %s", F[f], (unsigned long long)seed, text ? text : "");
            cJSON_Delete(j);
            free(text);
        }
        colibri_grammar_free(g);
    }
}

static void test_schema_refusals(void)
{
    static const struct { const char *schema, *needle; int code; } R[] = {
        { "{\"type\":\"string\",\"pattern\":\"^(?=a)\"}", "lookaround", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreferences", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "group the alternatives", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "'pattern' beside", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"minimum\":0.5}}}",
          "at .properties.n: bounds of a 'number': a bound that is not a whole number", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"integer\",\"minimum\":3,\"maximum\":2}", "no integer lies between", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"integer\",\"multipleOf\":5}", "'multipleOf' 5", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"integer\",\"not\":{}}", "unsupported keyword 'not'", COLIBRI_EUNSUPPORTED },
        { "{\"$ref\":\"#/$defs/A\",\"$defs\":{\"A\":{\"$ref\":\"#/$defs/B\"},\"B\":{\"$ref\":\"#/$defs/A\"}}}",
          "$ref loop", COLIBRI_EINVAL },
        { "{\"$ref\":\"#/$defs/Missing\"}", "points at nothing", COLIBRI_EINVAL },
        { "{\"type\":\"string\",\"format\":\"hostname\"}", "unsupported string format 'hostname'", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"tuple\"}", "unsupported type 'tuple'", COLIBRI_EUNSUPPORTED },
        { "{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}}},{\"properties\":{\"a\":{\"type\":\"integer\"}}}]}",
          "'allOf': property 'a' has different schemas in two members", COLIBRI_EUNSUPPORTED },
        { "{\"allOf\":[{\"type\":\"object\"},{\"type\":\"array\",\"items\":{}}]}", "allOf[1] has 'items'",
          COLIBRI_EUNSUPPORTED },
        { "{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},{\"properties\":{\"b\":{}},"
          "\"required\":[\"b\"]}]}", "'b' is required, but a member with additionalProperties false", COLIBRI_EUNSUPPORTED },
        { "{\"allOf\":[{\"type\":\"string\"},{\"minLength\":2}]}", "allOf[0] is not of type object", COLIBRI_EUNSUPPORTED },
        { "{\"type\":\"object\",\"required\":[\"x\"]}", "not in 'properties'", COLIBRI_EUNSUPPORTED },
        { "[1,2", "not valid JSON", COLIBRI_EINVAL },
    };
    for (size_t i = 0; i < sizeof R / sizeof *R; i++) {
        struct colibri_err err = { 0 };
        colibri_grammar *g = NULL;
        int rc = colibri_grammar_from_json_schema(tk, R[i].schema, &g, &err);
        CHECK(rc == R[i].code && strstr(err.msg, R[i].needle), "%s: rc %d '%s' (want '%s')", R[i].schema, rc, err.msg,
              R[i].needle);
        colibri_grammar_free(g);
    }
    /* a recursive schema that does reach values is fine */
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    const char *tree = "{\"$ref\":\"#/$defs/Node\",\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{"
                       "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Node\"}}},"
                       "\"required\":[\"v\"]}}}";
    CHECK(colibri_grammar_from_json_schema(tk, tree, &g, &err) == 0, "recursive tree: %s", err.msg);
    colibri_grammar_free(g);
}

/* A grammar of 200 alternatives sharing first letters (sets of hundreds of
 * stacks, states that recur): along a seeded walk the mask must say exactly
 * what grammar_allows says, token by token (every allowed id and every 13th
 * other), and a mask served again from the state's cache must be the same. */
static void test_mask_many_alternatives(void)
{
    char src[4096] = "root ::= x*\nx ::= [a-z]";
    for (int i = 0; i < 199; i++) {
        size_t n = strlen(src);
        snprintf(src + n, sizeof src - n, " | \"%c%c\"", 'a' + i / 26, 'a' + i % 26);
    }
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    CHECK(colibri_grammar_new(tk, src, strlen(src), &g, &err) == 0, "%s", err.msg);
    if (!g) return;
    struct grammar_state *st = NULL;
    CHECK(sample_grammar_state_new(g->g, &st, &err) == 0, "%s", err.msg);
    int32_t V = colibri_tokenizer_n_vocab(tk);
    uint8_t *m1 = malloc((size_t)V), *m2 = malloc((size_t)V);
    uint64_t rng = 7;
    int bad = 0;
    for (int step = 0; st && step < 10 && !bad; step++) {
        int32_t k = sample_grammar_mask(st, m1), k2 = sample_grammar_mask(st, m2);
        CHECK(k > 0 && k == k2 && !memcmp(m1, m2, (size_t)V), "step %d: cached mask differs (%d vs %d ids)", step,
              k, k2);
        int32_t n_allowed = 0;
        for (int32_t i = 0; i < V && !bad; i++) {
            n_allowed += m1[i];
            if (!m1[i] && i % 13) continue;
            if (sample_grammar_allows(st, i) != m1[i]) {
                CHECK(0, "step %d: id %d mask %d, allows %d", step, i, m1[i], !m1[i]);
                bad = 1;
            }
        }
        CHECK(n_allowed == k, "step %d: mask count %d, %d set", step, k, n_allowed);
        /* the next token: a seeded pick among the allowed, end of text excluded */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int32_t pick = (int32_t)((rng >> 33) % (uint64_t)k), t = -1;
        for (int32_t i = 0; i < V && t < 0; i++)
            if (m1[i] && pick-- == 0) t = i;
        if (t == colibri_tokenizer_eos(tk) || colibri_tokenizer_is_eog(tk, t)) continue;
        CHECK(sample_grammar_accept(st, t) == 0, "step %d: allowed id %d refused", step, t);
    }
    free(m1);
    free(m2);
    sample_grammar_state_free(st);
}

/* Whether grammar g accepts exactly text (its tokens one by one, then the end). */
static int accepts(colibri_grammar *g, const char *text)
{
    struct colibri_err err = { 0 };
    struct grammar_state *st = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (sample_grammar_state_new(g->g, &st, &err) ||
        colibri_tokenizer_encode(tk, text, strlen(text), COLIBRI_ENCODE_NO_PARSE_SPECIAL, &ids, &n, NULL, &err)) {
        CHECK(0, "%s", err.msg);
        sample_grammar_state_free(st);
        return -1;
    }
    int ok = 1;
    for (size_t i = 0; ok && i < n; i++) ok = sample_grammar_allows(st, ids[i]) && !sample_grammar_accept(st, ids[i]);
    ok = ok && sample_grammar_allows(st, colibri_tokenizer_eos(tk));
    free(ids);
    sample_grammar_state_free(st);
    return ok;
}

static colibri_grammar *schema_grammar(const char *schema)
{
    struct colibri_err err = { 0 };
    colibri_grammar *g = NULL;
    CHECK(colibri_grammar_from_json_schema(tk, schema, &g, &err) == 0, "%s: %s", schema, err.msg);
    return g;
}

/* format date: for years that cover every leap-year branch, each month 00-13
 * and day 00-32 is accepted exactly when it is a date. The month lengths are
 * Python's (calendar.monthrange); year 0000 is none (datetime.MINYEAR is 1). */
static void test_date_exhaustive(void)
{
    static const struct { int year; int days[12]; } Y[] = {
        { 1, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 4, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 100, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 400, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 1600, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 1700, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 1900, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 2000, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 2023, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 2024, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 2100, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 2400, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 9996, { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 9999, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 } },
        { 0, { 0 } },
    };
    colibri_grammar *g = schema_grammar("{\"type\":\"string\",\"format\":\"date\"}");
    if (!g) return;
    int bad = 0, n = 0;
    for (size_t y = 0; y < sizeof Y / sizeof *Y; y++)
        for (int mo = 0; mo <= 13; mo++)
            for (int d = 0; d <= 32 && bad < 5; d++) {
                char text[32];
                snprintf(text, sizeof text, "\"%04d-%02d-%02d\"", Y[y].year, mo, d);
                int want = mo >= 1 && mo <= 12 && d >= 1 && d <= Y[y].days[mo - 1];
                int got = accepts(g, text);
                n++;
                if (got != want) bad++;
                CHECK(got == want, "date %s %s", text, want ? "refused" : "accepted");
            }
    printf("     date: %d strings\n", n);
    colibri_grammar_free(g);
}

/* allOf of object schemas: an instance is accepted exactly when it is valid
 * under every member (instances and verdicts by hand, from the JSON Schema
 * definition of allOf and additionalProperties). */
static void test_allof_merge(void)
{
    static const struct { const char *schema, *json; int valid; } A[] = {
#define BASE "{\"$defs\":{\"Base\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}}," \
             "\"allOf\":[{\"$ref\":\"#/$defs/Base\"},{\"properties\":{\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}]}"
        { BASE, "{\"a\":\"x\",\"b\":1}", 1 },
        { BASE, "{\"a\":\"x\"}", 0 },
        { BASE, "{\"b\":1}", 0 },
        { BASE, "{\"a\":2,\"b\":1}", 0 },
#define CLOSED "{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false}," \
               "{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}]}"
        { CLOSED, "{\"a\":1}", 1 },
        { CLOSED, "{}", 1 },
        { CLOSED, "{\"a\":1,\"b\":2}", 0 },
#define OWN "{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"boolean\"}},\"required\":[\"c\"]," \
            "\"allOf\":[{\"properties\":{\"a\":{\"type\":\"null\"}},\"required\":[\"a\"]}]}"
        { OWN, "{\"a\":null,\"c\":true}", 1 },
        { OWN, "{\"c\":true}", 0 },
        { OWN, "{\"a\":null}", 0 },
    };
    for (size_t i = 0; i < sizeof A / sizeof *A; i++) {
        colibri_grammar *g = schema_grammar(A[i].schema);
        if (g) CHECK(accepts(g, A[i].json) == A[i].valid, "%s on %s: want %d", A[i].schema, A[i].json, A[i].valid);
        colibri_grammar_free(g);
    }
#undef BASE
#undef CLOSED
#undef OWN
}

/* minimum / maximum / exclusive*: every integer near the bounds is accepted
 * exactly when it lies in the range, as the definition says; numbers with
 * fractions at and around the bounds too. */
static void test_number_ranges(void)
{
    static const struct { const char *schema; int integer; double lo, hi; int lo_x, hi_x, has_lo, has_hi; } R[] = {
        { "{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}", 1, 0, 150, 0, 0, 1, 1 },
        { "{\"type\":\"integer\",\"exclusiveMinimum\":0}", 1, 0, 0, 1, 0, 1, 0 },
        { "{\"type\":\"integer\",\"minimum\":-20,\"exclusiveMaximum\":7}", 1, -20, 7, 0, 1, 1, 1 },
        { "{\"type\":\"integer\",\"maximum\":-3}", 1, 0, -3, 0, 0, 0, 1 },
        { "{\"type\":\"integer\",\"minimum\":95,\"maximum\":1005}", 1, 95, 1005, 0, 0, 1, 1 },
        { "{\"type\":\"number\",\"minimum\":0,\"maximum\":150}", 0, 0, 150, 0, 0, 1, 1 },
        { "{\"type\":\"number\",\"exclusiveMinimum\":0}", 0, 0, 0, 1, 0, 1, 0 },
        { "{\"type\":\"number\",\"minimum\":-5,\"exclusiveMaximum\":5}", 0, -5, 5, 0, 1, 1, 1 },
        { "{\"type\":\"number\",\"exclusiveMinimum\":-2,\"maximum\":-1}", 0, -2, -1, 1, 0, 1, 1 },
    };
    static const char *const FRAC[] = { "", ".0", ".5", ".25", ".000", ".001", ".999" };
    for (size_t r = 0; r < sizeof R / sizeof *R; r++) {
        colibri_grammar *g = schema_grammar(R[r].schema);
        if (!g) continue;
        int bad = 0;
        for (int v = -160; v <= 1100 && bad < 3; v += (v > -30 && v < 160) || (v > 80 && v < 1020) ? 1 : 7)
            for (size_t f = 0; f < (R[r].integer ? 1 : sizeof FRAC / sizeof *FRAC) && bad < 3; f++) {
                char text[48];
                snprintf(text, sizeof text, "%s%d%s", v < 0 ? "-" : "", v < 0 ? -v : v, FRAC[f]);
                double x = strtod(text, NULL);
                int in = (!R[r].has_lo || (R[r].lo_x ? x > R[r].lo : x >= R[r].lo)) &&
                         (!R[r].has_hi || (R[r].hi_x ? x < R[r].hi : x <= R[r].hi));
                int got = accepts(g, text);
                if (got != in) bad++;
                CHECK(got == in, "%s: %s %s", R[r].schema, text, in ? "refused" : "accepted");
            }
        colibri_grammar_free(g);
    }
}

/* pattern: strings matched by the definition of each regular expression
 * (checked by hand), written as JSON text. */
static void test_patterns(void)
{
    static const struct { const char *pattern, *json; int match; } P[] = {
        { "^[A-Z][a-z]+$", "\"Paris\"", 1 }, { "^[A-Z][a-z]+$", "\"paris\"", 0 }, { "^[A-Z][a-z]+$", "\"P\"", 0 },
        { "^\\d{3}-\\d{4}$", "\"555-1234\"", 1 }, { "^\\d{3}-\\d{4}$", "\"55-1234\"", 0 },
        { "b.d", "\"xxabcdxx\"", 1 }, { "b.d", "\"xxabdxx\"", 0 }, { "^ab", "\"abzz\"", 1 }, { "^ab", "\"zab\"", 0 },
        { "^(foo|bar)+$", "\"foobarfoo\"", 1 }, { "^(?:foo|bar)+$", "\"fob\"", 0 },
        { "^[^0-9]*$", "\"no digits\"", 1 }, { "^[^0-9]*$", "\"a1\"", 0 },
        { "^\"q\"\\\\$", "\"\\\"q\\\"\\\\\"", 1 },
        { "^a\\sb$", "\"a\\tb\"", 1 }, { "^a\\sb$", "\"a-b\"", 0 },
        { "^[\\w.-]+@x\\.org$", "\"jo.e-1@x.org\"", 1 }, { "^[\\w.-]+@x\\.org$", "\"jo e@x.org\"", 0 },
        { "^\\u00e9{2,3}$", "\"\u00e9\u00e9\"", 1 }, { "^\\u00e9{2,3}$", "\"\u00e9\"", 0 },
        { "^colou?r$", "\"color\"", 1 }, { "^colou?r$", "\"colouur\"", 0 },
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
        cJSON *pat = cJSON_CreateString(P[i].pattern);
        char *pj = cJSON_PrintUnformatted(pat);
        char schema[256];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":%s}", pj);
        colibri_grammar *g = schema_grammar(schema);
        if (g) CHECK(accepts(g, P[i].json) == P[i].match, "pattern %s on %s: want %d", P[i].pattern, P[i].json, P[i].match);
        colibri_grammar_free(g);
        free(pj);
        cJSON_Delete(pat);
    }
    colibri_grammar *g = schema_grammar("{\"type\":\"string\",\"format\":\"email\"}");
    if (g) CHECK(accepts(g, "\"a.b+c@mail.example.org\"") == 1 && accepts(g, "\"a@b\"") == 0, "email");
    colibri_grammar_free(g);
}

int main(void)
{
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load("models/colibri-tiny", &tk, &err)) {
        printf("cannot load models/colibri-tiny: %s\n0 passed, 1 failed\n", err.msg);
        return 1;
    }
    RUN_TEST(test_compile_errors);
    RUN_TEST(test_allows);
    RUN_TEST(test_json_object_always_parses);
    RUN_TEST(test_json_schema_instances);
    RUN_TEST(test_string_formats);
    RUN_TEST(test_schema_refusals);
    RUN_TEST(test_mask_many_alternatives);
    RUN_TEST(test_number_ranges);
    RUN_TEST(test_patterns);
    RUN_TEST(test_date_exhaustive);
    RUN_TEST(test_allof_merge);
    colibri_tokenizer_free(tk);
    return CHECK_SUMMARY();
}
