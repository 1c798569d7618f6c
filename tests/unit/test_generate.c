/* test_generate: the generator (colibri_gen_* in include/colibri.h) on the
 * bundled model models/colibri-tiny: greedy and seeded generation equal a
 * hand-run prefill/decode/sample loop token for token; stop strings cut the
 * text exactly; an end-of-generation id, n_predict, a full context and the
 * cancel callback each end it with their reason and the cache holds what the
 * contract says; the step API fed through colibri_batch_decode equals the
 * convenience loop; streamed pieces concatenate to the decoded text and never
 * split a UTF-8 character; bad arguments are refused by name. The padded
 * vocabulary (never sampled) is checked on the oracle fixture, whose model
 * has 512 ids and whose tokenizer (tests/tok/tiny) 400. A session's rows
 * copied into another (colibri_session_copy_prefix) give the same logits as
 * computing them. Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "tok/tok_utf8.h"

#define TINY "models/colibri-tiny"
#define MAXTOK 512

static colibri_model *model;
static colibri_tokenizer *tok;
static int vocab;

/* What one generation produced, collected through the step API. */
struct result {
    int32_t toks[MAXTOK];
    int n;
    char text[16384];
    size_t len;
    int n_pieces;
    int split;                  /* a non-final piece ended inside a character */
    int invalid;                /* a piece was not valid UTF-8 */
    struct colibri_gen_stats st;
    int rc;
};

static void add_piece(struct result *r, const char *p, size_t n, int final)
{
    if (!n) return;
    if (!final && tok_utf8_complete_len(p, n) != n) r->split = 1;
    if (tok_utf8_count_invalid(p, n)) r->invalid = 1;
    if (r->len + n < sizeof r->text) {
        memcpy(r->text + r->len, p, n);
        r->len += n;
        r->text[r->len] = 0;
    }
    r->n_pieces++;
}

/* start, prefill in chunks of `chunk`, then sample/decode; the optional
 * force(user, logits, step) may edit the logits before each sample. */
static void collect(colibri_gen *g, const int32_t *prompt, int n, const struct colibri_gen_opts *o, int chunk,
                    void (*force)(float *logits, int step), struct result *r)
{
    memset(r, 0, sizeof *r);
    struct colibri_err err = { 0 };
    r->rc = colibri_gen_start(g, prompt, n, o, &err);
    while (!r->rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL) {
        int left = colibri_gen_prefill(g, chunk, &err);
        if (left < 0) r->rc = left;
    }
    while (!r->rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE) {
        if (force) force(colibri_gen_logits(g), r->n);
        struct colibri_gen_step st;
        r->rc = colibri_gen_sample(g, &st, &err);
        if (r->rc) break;
        for (int k = 0; k < st.n_tokens && r->n < MAXTOK; k++) r->toks[r->n++] = st.tokens[k];
        add_piece(r, st.text, st.len, 0);
        add_piece(r, st.tail, st.tail_len, 1);
        CHECK(!st.tail_len || st.end != COLIBRI_GEN_END_NONE, "a tail before the end");
        if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED) r->rc = colibri_gen_decode(g, &err);
    }
    CHECK(r->rc == 0, "generation failed: %s", err.msg);
    colibri_gen_get_stats(g, &r->st);
}

static colibri_session *new_session(int n_ctx)
{
    struct colibri_session_opts so = { .n_ctx = n_ctx };
    colibri_session *s = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_session_new(model, &so, &s, &err) == 0, "session: %s", err.msg);
    return s;
}

static colibri_sampler *new_sampler(float temp, uint64_t seed)
{
    struct colibri_sampler_opts so = colibri_sampler_default_opts();
    so.temperature = temp;
    so.seed = seed;
    colibri_sampler *smp = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_sampler_new(&so, vocab, &smp, &err) == 0, "sampler: %s", err.msg);
    return smp;
}

static int encode(const char *text, int32_t *ids)
{
    int32_t *p = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    CHECK(colibri_tokenizer_encode(tok, text, strlen(text), COLIBRI_ENCODE_ADD_SPECIAL, &p, &n, NULL, &err) == 0,
          "encode: %s", err.msg);
    memcpy(ids, p, n * sizeof *ids);
    free(p);
    return (int)n;
}

/* The text of ids (special tokens and end-of-generation ids give none). */
static size_t decode(const int32_t *ids, int n, char *out, size_t cap)
{
    char *t = NULL;
    size_t len = 0;
    CHECK(colibri_tokenizer_decode(tok, ids, (size_t)n, 1, &t, &len, NULL) == 0, "decode");
    if (len >= cap) len = cap - 1;
    memcpy(out, t ? t : "", len);
    out[len] = 0;
    free(t);
    return len;
}

/* The loop by hand, on the session and sampler API alone: prefill, then
 * sample; stop on an end-of-generation id, at n_predict, or when the
 * context is full; every other token is decoded. */
static int hand_loop(colibri_session *s, colibri_sampler *smp, const int32_t *prompt, int n, int n_predict,
                     int in_history, int32_t *out)
{
    float *logits = malloc((size_t)vocab * sizeof *logits);
    struct colibri_err err = { 0 };
    int k = 0;
    if (in_history)
        for (int i = 0; i < n; i++) colibri_sampler_accept(smp, prompt[i]);
    CHECK(colibri_session_prefill(s, prompt, n, logits, 0, &err) == 0, "prefill: %s", err.msg);
    while (k < n_predict) {
        int32_t t = colibri_sampler_sample(smp, logits, &err);
        colibri_sampler_accept(smp, t);
        out[k++] = t;
        if (colibri_tokenizer_is_eog(tok, t) || k == n_predict) break;
        if (colibri_session_pos(s) >= colibri_session_n_ctx(s)) break;
        CHECK(colibri_session_decode(s, t, logits, &err) == 0, "decode: %s", err.msg);
    }
    free(logits);
    return k;
}

/* colibri_gen_run's text callback: appends to a struct sink. */
struct sink { char t[16384]; size_t n; };
static void on_text(void *user, const char *text, size_t len)
{
    struct sink *k = user;
    if (k->n + len < sizeof k->t) {
        memcpy(k->t + k->n, text, len);
        k->n += len;
    }
}

static int same_tokens(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

static const char *const PROMPTS[] = { "The license", "It was a dark and stormy night", "She said",
                                       "Once upon a time, in a house" };

/* Greedy (argmax) and seeded sampling through the generator give the hand
 * loop's tokens; the text is the decoded tokens; the cache holds the prompt
 * and every generated token but the last. */
static void test_equals_hand_loop(void)
{
    struct colibri_err err = { 0 };
    for (int pi = 0; pi < 2; pi++)
        for (int mode = 0; mode < 3; mode++) {
            float temp = mode == 0 ? 0.0f : 1.0f;
            uint64_t seed = (uint64_t)(7 + mode);
            int in_history = mode != 2;
            int32_t prompt[256], want[MAXTOK];
            int n = encode(PROMPTS[pi], prompt);
            colibri_session *hs = new_session(0);
            colibri_sampler *hsmp = new_sampler(temp, seed);
            int nw = hand_loop(hs, hsmp, prompt, n, 24, in_history, want);

            colibri_session *s = new_session(0);
            colibri_sampler *smp = new_sampler(temp, seed);
            colibri_gen *g = NULL;
            CHECK(colibri_gen_new(model, s, tok, &g, &err) == 0, "gen_new: %s", err.msg);
            struct colibri_gen_opts o = { .sampler = smp, .n_predict = 24, .prompt_in_history = in_history };
            static struct result r;
            collect(g, prompt, n, &o, mode == 1 ? 3 : 0, NULL, &r);
            CHECK(same_tokens(r.toks, r.n, want, nw), "prompt %d mode %d: %d tokens vs the hand loop's %d", pi,
                  mode, r.n, nw);
            char dec[16384];
            size_t dl = decode(r.toks, r.n, dec, sizeof dec);
            CHECK(r.len == dl && !memcmp(r.text, dec, dl), "prompt %d mode %d: streamed text differs", pi, mode);
            CHECK(r.st.n_prompt == n && r.st.n_cached == 0 && r.st.n_prefilled == n && r.st.n_generated == r.n,
                  "stats %d %d %d %d", r.st.n_prompt, r.st.n_cached, r.st.n_prefilled, r.st.n_generated);
            int eos = r.n && colibri_tokenizer_is_eog(tok, r.toks[r.n - 1]);
            CHECK(r.st.end == (eos ? COLIBRI_GEN_END_EOS : COLIBRI_GEN_END_LIMIT), "end %s",
                  colibri_gen_end_name(r.st.end));
            CHECK(colibri_session_pos(s) == n + r.n - 1, "cache holds %d, want prompt %d + %d generated - 1",
                  colibri_session_pos(s), n, r.n);
            const int32_t *cached = colibri_session_tokens(s);
            CHECK(!memcmp(cached, prompt, (size_t)n * sizeof *prompt) &&
                  !memcmp(cached + n, r.toks, (size_t)(r.n - 1) * sizeof *cached), "cached tokens");

            /* the convenience loop prints the same text */
            /* the convenience loop gives the same text (from an empty cache, as above) */
            static struct sink sink;
            sink.n = 0;
            colibri_sampler_reset(smp, seed);
            CHECK(colibri_session_truncate(s, 0, &err) == 0, "truncate");
            CHECK(colibri_gen_run(g, prompt, n, &o, on_text, &sink, &err) == 0, "gen_run: %s", err.msg);
            CHECK(sink.n == r.len && !memcmp(sink.t, r.text, r.len), "gen_run text differs");
            /* the same prompt again finds all but its last token cached */
            CHECK(colibri_gen_start(g, prompt, n, &o, &err) == 0, "start: %s", err.msg);
            struct colibri_gen_stats st;
            colibri_gen_get_stats(g, &st);
            CHECK(st.n_cached == n - 1, "same prompt again: %d cached, want %d", st.n_cached, n - 1);

            colibri_gen_free(g);
            colibri_sampler_free(smp);
            colibri_sampler_free(hsmp);
            colibri_session_free(s);
            colibri_session_free(hs);
        }
}

/* A generator, session and greedy sampler for one test. */
struct rig {
    colibri_session *s;
    colibri_sampler *smp;
    colibri_gen *g;
    struct colibri_gen_opts o;
    int32_t prompt[256];
    int n;
};

static void rig_new(struct rig *k, int n_ctx, const char *prompt, int n_predict)
{
    struct colibri_err err = { 0 };
    memset(k, 0, sizeof *k);
    k->s = new_session(n_ctx);
    k->smp = new_sampler(0.0f, 0);
    CHECK(colibri_gen_new(model, k->s, tok, &k->g, &err) == 0, "gen_new: %s", err.msg);
    k->o = (struct colibri_gen_opts){ .sampler = k->smp, .n_predict = n_predict };
    k->n = encode(prompt, k->prompt);
}

static void rig_free(struct rig *k)
{
    colibri_gen_free(k->g);
    colibri_sampler_free(k->smp);
    colibri_session_free(k->s);
}

/* Where the greedy text's pieces end (offsets into text), for stop strings
 * that straddle a token boundary. */
static int piece_ends(colibri_gen *g, const struct rig *k, size_t *ends, int max)
{
    struct colibri_err err = { 0 };
    int n = 0;
    size_t at = 0;
    colibri_session_truncate(k->s, 0, &err);
    colibri_sampler_reset(k->smp, 0);
    colibri_gen_start(g, k->prompt, k->n, &k->o, &err);
    colibri_gen_prefill(g, 0, &err);
    while (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE && n < max) {
        struct colibri_gen_step st;
        if (colibri_gen_sample(g, &st, &err)) break;
        at += st.len;
        if (st.len) ends[n++] = at;
        if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED) colibri_gen_decode(g, &err);
    }
    return n;
}

static void test_stop_strings(void)
{
    struct rig k;
    rig_new(&k, 0, "The license", 40);
    static struct result full, r;
    collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &full);
    CHECK(full.len > 40, "greedy text too short to cut: %zu bytes", full.len);
    size_t ends[MAXTOK];
    int ne = piece_ends(k.g, &k, ends, MAXTOK);
    int tried = 0;
    for (int e = 1; e < ne && tried < 4; e++) {
        size_t b = ends[e];
        if (b < 3 || b + 2 > full.len) continue;
        char stop[8];
        memcpy(stop, full.text + b - 3, 5);   /* 3 bytes before a token boundary, 2 after */
        stop[5] = 0;
        if (strlen(stop) != 5) continue;
        size_t want = (size_t)(strstr(full.text, stop) - full.text);
        const char *stops[] = { "", "\x01never\x02", stop };
        k.o.stops = stops;
        k.o.n_stops = 3;
        colibri_session_truncate(k.s, 0, NULL);
        colibri_sampler_reset(k.smp, 0);
        collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &r);
        CHECK(r.len == want && !memcmp(r.text, full.text, want), "stop '%s': %zu bytes, want %zu", stop, r.len,
              want);
        CHECK(r.st.end == COLIBRI_GEN_END_STOP, "stop '%s' ended by %s", stop, colibri_gen_end_name(r.st.end));
        CHECK(same_tokens(r.toks, r.n, full.toks, r.n), "tokens before the stop");
        char dec[16384];
        size_t dl = decode(r.toks, r.n, dec, sizeof dec);
        CHECK(dl >= want + strlen(stop) && dl < want + strlen(stop) + 32,
              "the stop is completed by the last token (%zu decoded bytes, cut at %zu)", dl, want);
        CHECK(colibri_session_pos(k.s) == k.n + r.n - 1, "the completing token is not fed");
        tried++;
    }
    CHECK(tried == 4, "only %d stop strings across token boundaries", tried);

    /* the earliest of several stop strings wins, whichever comes first in the list */
    char late[4], early[4];
    memcpy(late, full.text + 30, 3);
    memcpy(early, full.text + 10, 3);
    late[3] = early[3] = 0;
    const char *two[] = { late, early };
    k.o.stops = two;
    k.o.n_stops = 2;
    colibri_sampler_reset(k.smp, 0);
    collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &r);
    size_t want = (size_t)(strstr(full.text, early) - full.text);
    size_t want_late = (size_t)(strstr(full.text, late) - full.text);
    if (want_late < want) want = want_late;
    CHECK(r.len == want && !memcmp(r.text, full.text, want), "two stops: %zu bytes, want %zu", r.len, want);
    rig_free(&k);
}

static int32_t force_id;
static int force_at;
static void force_token(float *logits, int step)
{
    if (step == force_at) logits[force_id] = 1e30f;
}

/* An end-of-generation id ends the generation: counted, no text, not fed,
 * and text held back for a stop string is released. */
static void test_eos(void)
{
    struct colibri_err err = { 0 };
    struct rig k;
    rig_new(&k, 0, "It was a dark and stormy night", 40);
    static struct result plain, r;
    collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &plain);
    force_id = colibri_tokenizer_eos(tok);
    force_at = 3;
    CHECK(force_id >= 0 && colibri_tokenizer_is_eog(tok, force_id), "the model has an eos id");
    char three[1024];
    size_t n3 = decode(plain.toks, 3, three, sizeof three);
    CHECK(n3 > 0, "three tokens of text");
    /* a stop string starting with the text's last byte holds that byte back */
    char stop[3] = { three[n3 - 1], '\x01', 0 };
    const char *stops[] = { stop };
    k.o.stops = stops;
    k.o.n_stops = 1;
    colibri_session_truncate(k.s, 0, NULL);
    colibri_sampler_reset(k.smp, 0);
    collect(k.g, k.prompt, k.n, &k.o, 0, force_token, &r);
    CHECK(r.st.end == COLIBRI_GEN_END_EOS, "ended by %s", colibri_gen_end_name(r.st.end));
    CHECK(r.n == 4 && r.toks[3] == force_id && same_tokens(r.toks, 3, plain.toks, 3), "%d tokens", r.n);
    CHECK(r.st.n_generated == 4, "the eos id is counted: %d", r.st.n_generated);
    CHECK(r.len == n3 && !memcmp(r.text, three, n3), "text %zu bytes, want %zu", r.len, n3);
    CHECK(colibri_session_pos(k.s) == k.n + 3, "cache %d, want the prompt and 3 tokens (eos not fed)",
          colibri_session_pos(k.s));
    /* a next prompt holding the reply and its eos finds all but the eos cached */
    int32_t next[300];
    memcpy(next, k.prompt, (size_t)k.n * sizeof *next);
    memcpy(next + k.n, r.toks, 4 * sizeof *next);
    next[k.n + 4] = k.prompt[1];
    k.o.n_stops = 0;
    CHECK(colibri_gen_start(k.g, next, k.n + 5, &k.o, &err) == 0, "start: %s", err.msg);
    struct colibri_gen_stats st;
    colibri_gen_get_stats(k.g, &st);
    CHECK(st.n_cached == k.n + 3, "next turn: %d cached, want %d", st.n_cached, k.n + 3);
    rig_free(&k);
}

static void test_limit(void)
{
    struct rig k;
    rig_new(&k, 0, "She said", 1);
    static struct result full, r;
    k.o.n_predict = 30;
    collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &full);
    for (int np = 1; np <= 5; np += 4) {
        k.o.n_predict = np;
        colibri_session_truncate(k.s, 0, NULL);
        colibri_sampler_reset(k.smp, 0);
        collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &r);
        CHECK(r.n == np && r.st.n_generated == np && r.st.end == COLIBRI_GEN_END_LIMIT, "n_predict %d: %d tokens, %s",
              np, r.n, colibri_gen_end_name(r.st.end));
        CHECK(same_tokens(r.toks, r.n, full.toks, np), "n_predict %d: tokens", np);
        CHECK(colibri_session_pos(k.s) == k.n + np - 1, "n_predict %d: cache %d", np, colibri_session_pos(k.s));
        char dec[4096];
        size_t dl = decode(r.toks, r.n, dec, sizeof dec);
        CHECK(r.len == dl && !memcmp(r.text, dec, dl), "n_predict %d: text", np);
    }
    rig_free(&k);
}

/* A full context ends the generation after the token sampled there is
 * shown; a prompt that fills the context is refused. */
static void test_context_full(void)
{
    struct colibri_err err = { 0 };
    struct rig big, k;
    rig_new(&big, 0, "Once upon a time, in a house", 30);
    static struct result full, r;
    collect(big.g, big.prompt, big.n, &big.o, 0, NULL, &full);
    for (int room = 1; room <= 3; room += 2) {
        rig_new(&k, 0, "Once upon a time, in a house", 30);
        colibri_session_free(k.s);
        colibri_gen_free(k.g);
        k.s = new_session(k.n + room);
        CHECK(colibri_gen_new(model, k.s, tok, &k.g, &err) == 0, "gen_new: %s", err.msg);
        collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &r);
        CHECK(r.st.end == COLIBRI_GEN_END_CONTEXT, "room %d: ended by %s", room, colibri_gen_end_name(r.st.end));
        CHECK(r.n == room + 1 && same_tokens(r.toks, r.n, full.toks, room + 1), "room %d: %d tokens", room, r.n);
        CHECK(colibri_session_pos(k.s) == k.n + room, "room %d: cache %d", room, colibri_session_pos(k.s));
        char dec[4096];
        size_t dl = decode(r.toks, r.n, dec, sizeof dec);
        CHECK(r.len == dl && !memcmp(r.text, dec, dl), "room %d: the last token's text is shown", room);
        rig_free(&k);
    }
    rig_new(&k, 0, "Once upon a time, in a house", 30);
    colibri_session_free(k.s);
    colibri_gen_free(k.g);
    k.s = new_session(k.n);
    CHECK(colibri_gen_new(model, k.s, tok, &k.g, &err) == 0, "gen_new: %s", err.msg);
    int rc = colibri_gen_start(k.g, k.prompt, k.n, &k.o, &err);
    char want[128];
    snprintf(want, sizeof want, "the prompt is %d tokens but the context holds %d", k.n, k.n);
    CHECK(rc == COLIBRI_ERANGE && strstr(err.msg, want), "prompt = context: %d '%s'", rc, err.msg);
    CHECK(colibri_session_pos(k.s) == 0 && colibri_gen_phase(k.g) == COLIBRI_GEN_PHASE_IDLE, "left untouched");
    rig_free(&k);
    rig_free(&big);
}

struct cancel_after { int calls, limit; };
static int cancel_cb(void *user)
{
    struct cancel_after *c = user;
    return ++c->calls > c->limit;
}

static void test_cancel(void)
{
    struct rig k;
    rig_new(&k, 0, "The license", 30);
    static struct result full, r;
    collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &full);
    /* one call for the prefill, then one per token: cancelled before the 4th */
    struct cancel_after c = { 0, 4 };
    k.o.cancel = cancel_cb;
    k.o.cancel_user = &c;
    colibri_session_truncate(k.s, 0, NULL);
    colibri_sampler_reset(k.smp, 0);
    collect(k.g, k.prompt, k.n, &k.o, 0, NULL, &r);
    CHECK(r.st.end == COLIBRI_GEN_END_CANCELLED && r.n == 3 && r.st.n_generated == 3, "%s after %d tokens",
          colibri_gen_end_name(r.st.end), r.n);
    CHECK(same_tokens(r.toks, 3, full.toks, 3) && r.len <= full.len && !memcmp(r.text, full.text, r.len),
          "the text so far is the uncancelled text's start");
    CHECK(c.calls == 5, "the callback ran %d times, want 5", c.calls);
    /* during a chunked prefill: nothing after the cancel runs */
    c = (struct cancel_after){ 0, 2 };
    colibri_session_truncate(k.s, 0, NULL);
    collect(k.g, k.prompt, k.n, &k.o, 1, NULL, &r);
    CHECK(r.st.end == COLIBRI_GEN_END_CANCELLED && r.n == 0 && r.st.n_prefilled == 2, "%s, %d prefilled",
          colibri_gen_end_name(r.st.end), r.st.n_prefilled);
    CHECK(colibri_session_pos(k.s) == 2 && r.len == 0, "cache %d", colibri_session_pos(k.s));
    rig_free(&k);
}

/* Several generators stepped together, their feeds run as one
 * colibri_batch_decode (as colibri serve does), give each one's own tokens. */
static void test_batched_steps(void)
{
    struct colibri_err err = { 0 };
    struct rig k[3];
    static struct result want[3];
    int np[3] = { 25, 9, 17 };
    for (int i = 0; i < 3; i++) {
        rig_new(&k[i], 0, PROMPTS[i], np[i]);
        collect(k[i].g, k[i].prompt, k[i].n, &k[i].o, 0, NULL, &want[i]);
        colibri_session_truncate(k[i].s, 0, NULL);
        colibri_sampler_reset(k[i].smp, 0);
        CHECK(colibri_gen_start(k[i].g, k[i].prompt, k[i].n, &k[i].o, &err) == 0, "start: %s", err.msg);
    }
    int32_t got[3][MAXTOK];
    int ngot[3] = { 0, 0, 0 }, live = 3, iters = 0;
    while (live && iters++ < 200) {
        colibri_session *sess[3];
        int32_t toks[3];
        float *logits[3];
        colibri_gen *who[3];
        int n = 0;
        live = 0;
        for (int i = 0; i < 3; i++) {
            colibri_gen *g = k[i].g;
            if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL) colibri_gen_prefill(g, 4, &err);
            else if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE) {
                struct colibri_gen_step st;
                CHECK(colibri_gen_sample(g, &st, &err) == 0, "sample: %s", err.msg);
                for (int t = 0; t < st.n_tokens; t++) got[i][ngot[i]++] = st.tokens[t];
            }
            const int32_t *pend;
            if (colibri_gen_pending(g, &pend) == 1) {
                sess[n] = k[i].s;
                toks[n] = pend[0];
                logits[n] = colibri_gen_logits(g);
                who[n++] = g;
            }
            live += colibri_gen_phase(g) != COLIBRI_GEN_PHASE_DONE;
        }
        int done = 0;
        if (n) CHECK(colibri_batch_decode(sess, toks, n, logits, &done, &err) == 0, "batch: %s", err.msg);
        for (int j = 0; j < done; j++) CHECK(colibri_gen_fed(who[j], 1, &err) == 0, "fed: %s", err.msg);
    }
    for (int i = 0; i < 3; i++) {
        CHECK(same_tokens(got[i], ngot[i], want[i].toks, want[i].n), "generator %d: %d tokens vs %d", i, ngot[i],
              want[i].n);
        rig_free(&k[i]);
    }
}

/* The id whose text is the single byte b, or -1. */
static int32_t byte_token(unsigned char b)
{
    for (int32_t id = 0; id < colibri_tokenizer_n_vocab(tok); id++) {
        char *t = NULL;
        size_t n = 0;
        int found = !colibri_tokenizer_decode(tok, &id, 1, 0, &t, &n, NULL) && n == 1 && (unsigned char)t[0] == b;
        free(t);
        if (found) return id;
    }
    return -1;
}

/* A character split over two tokens is held until it is whole; with
 * repair_utf8 every piece is valid UTF-8. The tokens are the bytes C3 and
 * A9 ("é") of the byte-level vocabulary. */
static int32_t force_seq[4];
static void force_bytes(float *logits, int step)
{
    if (step < 4) logits[force_seq[step]] = 1e30f;
}

static void test_utf8_pieces(void)
{
    struct rig k;
    rig_new(&k, 0, "The license", 4);
    static struct result r;
    int32_t c3 = byte_token(0xC3), a9 = byte_token(0xA9);
    CHECK(c3 >= 0 && a9 >= 0, "byte tokens C3 %d, A9 %d", c3, a9);
    if (c3 < 0 || a9 < 0) { rig_free(&k); return; }
    force_seq[0] = c3; force_seq[1] = a9; force_seq[2] = c3; force_seq[3] = c3;
    for (int repair = 0; repair <= 1; repair++) {
        k.o.repair_utf8 = repair;
        colibri_session_truncate(k.s, 0, NULL);
        collect(k.g, k.prompt, k.n, &k.o, 0, force_bytes, &r);
        const char *want = repair ? "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd" : "\xc3\xa9\xc3\xc3";
        CHECK(r.len == strlen(want) && !memcmp(r.text, want, r.len), "repair %d: %zu bytes", repair, r.len);
        CHECK(!r.split && (!repair || !r.invalid), "repair %d: a piece split a character or is invalid", repair);
        CHECK(r.n_pieces == 2, "repair %d: %d pieces, want 'é' then the tail", repair, r.n_pieces);
    }
    /* a stop string that begins inside a character */
    const char *stops[] = { "\xa9" };
    k.o.stops = stops;
    k.o.n_stops = 1;
    k.o.repair_utf8 = 1;
    colibri_session_truncate(k.s, 0, NULL);
    collect(k.g, k.prompt, k.n, &k.o, 0, force_bytes, &r);
    CHECK(r.st.end == COLIBRI_GEN_END_STOP && r.len == 3 && !memcmp(r.text, "\xef\xbf\xbd", 3) && !r.invalid,
          "stop inside a character: %zu bytes", r.len);
    rig_free(&k);

    /* sampled at a high temperature: pieces are the decoded text, whole characters */
    int non_ascii = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        struct colibri_err err = { 0 };
        colibri_session *s = new_session(0);
        struct colibri_sampler_opts so = { .temperature = 3.0f, .top_p = 1, .repeat_penalty = 1, .seed = seed };
        colibri_sampler *smp = NULL;
        colibri_gen *g = NULL;
        CHECK(colibri_sampler_new(&so, vocab, &smp, &err) == 0 && colibri_gen_new(model, s, tok, &g, &err) == 0,
              "%s", err.msg);
        int32_t prompt[64];
        int n = encode("The license", prompt);
        for (int repair = 0; repair <= 1; repair++) {
            struct colibri_gen_opts o = { .sampler = smp, .n_predict = 120, .repair_utf8 = repair };
            colibri_sampler_reset(smp, seed);
            colibri_session_truncate(s, 0, NULL);
            collect(g, prompt, n, &o, 0, NULL, &r);
            static char dec[16384];
            size_t dl = decode(r.toks, r.n, dec, sizeof dec);
            size_t wl = dl;
            char *want = repair ? tok_utf8_sanitize(dec, dl, &wl) : dec;
            CHECK(r.len == wl && !memcmp(r.text, want, wl), "seed %d repair %d: pieces differ from the decoded "
                  "text", (int)seed, repair);
            CHECK(!r.split && (!repair || !r.invalid), "seed %d repair %d: split or invalid", (int)seed, repair);
            for (size_t i = 0; i < dl; i++) non_ascii += (unsigned char)dec[i] >= 0x80;
            if (repair) free(want);
        }
        colibri_gen_free(g);
        colibri_sampler_free(smp);
        colibri_session_free(s);
    }
    CHECK(non_ascii > 0, "the sampled texts held no byte above 0x7F: nothing was tested");
}

/* Ids past the tokenizer's vocabulary have no text and are never sampled:
 * the oracle fixture's model has 512 ids, its tokenizer 400. */
static void test_padded_vocab(void)
{
    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    colibri_tokenizer *t = NULL;
    colibri_session *s = NULL;
    colibri_gen *g = NULL;
    if (colibri_model_load("tests/oracle/deepseek_v3_tiny", NULL, &m, &err) ||
        colibri_tokenizer_load("tests/tok/tiny", &t, &err) || colibri_session_new(m, NULL, &s, &err) ||
        colibri_gen_new(m, s, t, &g, &err)) {
        CHECK(0, "fixture: %s", err.msg);
        goto out;
    }
    CHECK(colibri_model_vocab(m) == 512 && colibri_tokenizer_n_vocab(t) == 400, "vocab %d / %d",
          colibri_model_vocab(m), colibri_tokenizer_n_vocab(t));
    int32_t prompt[] = { 0, 5, 6, 7, 8 };
    int high = 0, total = 0;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        struct colibri_sampler_opts so = { .temperature = 2.0f, .top_p = 1, .repeat_penalty = 1, .seed = seed };
        colibri_sampler *smp = NULL;
        CHECK(colibri_sampler_new(&so, 512, &smp, &err) == 0, "%s", err.msg);
        struct colibri_gen_opts o = { .sampler = smp, .n_predict = 100 };
        static struct result r;
        colibri_session_truncate(s, 0, NULL);
        collect(g, prompt, 5, &o, 0, NULL, &r);
        for (int i = 0; i < r.n; i++) {
            high += r.toks[i] >= 400;
            total++;
        }
        colibri_sampler_free(smp);
    }
    CHECK(high == 0 && total >= 150, "%d of %d sampled ids past the tokenizer's 400", high, total);
out:
    colibri_gen_free(g);
    colibri_session_free(s);
    colibri_tokenizer_free(t);
    colibri_model_free(m);
}

static void expect_err(int rc, int code, struct colibri_err *err, const char *words, const char *what)
{
    CHECK(rc == code && strstr(err->msg, words), "%s: rc %d '%s', want %d naming '%s'", what, rc, err->msg, code,
          words);
    memset(err, 0, sizeof *err);
}

static void test_bad_arguments(void)
{
    struct colibri_err err = { 0 };
    struct rig k;
    rig_new(&k, 64, "The license", 8);
    colibri_gen *g2 = NULL;
    expect_err(colibri_gen_new(NULL, k.s, tok, &g2, &err), COLIBRI_EINVAL, &err, "required", "no model");
    expect_err(colibri_gen_new(model, k.s, tok, NULL, &err), COLIBRI_EINVAL, &err, "required", "no out");
    CHECK(g2 == NULL, "out set on failure");

    struct colibri_gen_step st;
    expect_err(colibri_gen_sample(k.g, &st, &err), COLIBRI_EINVAL, &err, "phase idle", "sample before start");
    struct colibri_gen_opts o = k.o;
    expect_err(colibri_gen_start(k.g, k.prompt, k.n, NULL, &err), COLIBRI_EINVAL, &err, "options", "no opts");
    o.sampler = NULL;
    expect_err(colibri_gen_start(k.g, k.prompt, k.n, &o, &err), COLIBRI_EINVAL, &err, "opts.sampler", "no sampler");
    o = k.o;
    o.n_predict = 0;
    expect_err(colibri_gen_start(k.g, k.prompt, k.n, &o, &err), COLIBRI_EINVAL, &err, "n_predict", "n_predict 0");
    o = k.o;
    o.n_stops = 1;
    expect_err(colibri_gen_start(k.g, k.prompt, k.n, &o, &err), COLIBRI_EINVAL, &err, "opts.stops", "stops NULL");
    expect_err(colibri_gen_start(k.g, k.prompt, 0, &k.o, &err), COLIBRI_EINVAL, &err, "empty", "empty prompt");
    expect_err(colibri_gen_start(k.g, NULL, 3, &k.o, &err), COLIBRI_EINVAL, &err, "empty", "NULL prompt");
    int32_t bad[3] = { 0, vocab, 5 };
    expect_err(colibri_gen_start(k.g, bad, 3, &k.o, &err), COLIBRI_ERANGE, &err, "token 1 is id 8192",
               "id out of range");
    bad[1] = -1;
    expect_err(colibri_gen_start(k.g, bad, 3, &k.o, &err), COLIBRI_ERANGE, &err, "id -1", "negative id");
    int32_t longp[64] = { 0 };
    expect_err(colibri_gen_start(k.g, longp, 64, &k.o, &err), COLIBRI_ERANGE, &err,
               "the prompt is 64 tokens but the context holds 64", "prompt fills the context");
    CHECK(colibri_gen_phase(k.g) == COLIBRI_GEN_PHASE_IDLE && colibri_session_pos(k.s) == 0,
          "refusals change nothing");

    CHECK(colibri_gen_start(k.g, k.prompt, k.n, &k.o, &err) == 0, "start: %s", err.msg);
    expect_err(colibri_gen_sample(k.g, &st, &err), COLIBRI_EINVAL, &err, "phase prefill", "sample in prefill");
    expect_err(colibri_gen_decode(k.g, &err), COLIBRI_EINVAL, &err, "phase prefill", "decode in prefill");
    expect_err(colibri_gen_fed(k.g, 1, &err), COLIBRI_EINVAL, &err, "phase prefill", "fed in prefill");
    CHECK(colibri_gen_prefill(k.g, 0, &err) == 0, "prefill: %s", err.msg);
    expect_err(colibri_gen_prefill(k.g, 0, &err), COLIBRI_EINVAL, &err, "phase sample", "prefill in sample");
    CHECK(colibri_gen_pending(k.g, NULL) == 0, "nothing pending before a sample");
    CHECK(colibri_gen_sample(k.g, &st, &err) == 0 && colibri_gen_phase(k.g) == COLIBRI_GEN_PHASE_FEED,
          "sample: %s", err.msg);
    expect_err(colibri_gen_sample(k.g, &st, &err), COLIBRI_EINVAL, &err, "phase feed", "sample twice");
    expect_err(colibri_gen_fed(k.g, 2, &err), COLIBRI_EINVAL, &err, "2 tokens fed, 1 pending", "fed count");
    const int32_t *pend = NULL;
    CHECK(colibri_gen_pending(k.g, &pend) == 1 && pend && pend[0] == st.tokens[0], "the sampled token is pending");
    CHECK(colibri_gen_decode(k.g, &err) == 0 && colibri_gen_phase(k.g) == COLIBRI_GEN_PHASE_SAMPLE,
          "still usable after refusals: %s", err.msg);
    expect_err(colibri_gen_sample(NULL, &st, &err), COLIBRI_EINVAL, &err, "required", "no generator");
    expect_err(colibri_gen_sample(k.g, NULL, &err), COLIBRI_EINVAL, &err, "required", "no step");

    static const char *const names[] = { "", "eos", "stop", "limit", "context", "cancelled", "error" };
    for (int e = COLIBRI_GEN_END_NONE; e <= COLIBRI_GEN_END_ERROR; e++)
        CHECK(!strcmp(colibri_gen_end_name((enum colibri_gen_end)e), names[e]), "end name %d", e);
    colibri_gen_free(NULL);
    rig_free(&k);
}

/* colibri_session_copy_prefix (what the server's n > 1 choices use): the
 * copied rows give, for the prompt's last token, the logits bit for bit of
 * a session that prefilled the same tokens itself; bad copies are refused
 * by name and leave the target as it was. */
static void test_copy_prefix(void)
{
    struct colibri_err err = { 0 };
    int32_t *ids = NULL;
    size_t n = 0;
    const char *text = "The copy of a prompt's rows must give the same logits as computing them again here.";
    CHECK(!colibri_tokenizer_encode(tok, text, strlen(text), COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n, NULL, &err), "%s", err.msg);
    struct colibri_session_opts so = { .n_ctx = 256 }, so_bf16 = { .n_ctx = 256, .kv_tier = "bf16" };
    colibri_session *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    float *la = malloc((size_t)vocab * sizeof *la), *lb = malloc((size_t)vocab * sizeof *lb);
    if (colibri_session_new(model, &so, &a, &err) || colibri_session_new(model, &so, &b, &err) ||
        colibri_session_new(model, &so, &c, &err) || colibri_session_new(model, &so_bf16, &d, &err) || !la || !lb ||
        n < 4) {
        CHECK(0, "setup: %s", err.msg);
        goto out;
    }
    int k = (int)n - 1;
    /* a: the prompt's first k tokens, then the last one, as prefix reuse runs it */
    CHECK(!colibri_session_prefill(a, ids, k, NULL, 0, &err) && !colibri_session_prefill(a, ids + k, 1, la, 0, &err),
          "%s", err.msg);
    CHECK(!colibri_session_prefill(c, ids, 3, NULL, 0, &err), "%s", err.msg);   /* c holds other rows first */
    CHECK(colibri_session_copy_prefix(b, a, k, &err) == 0 && colibri_session_pos(b) == k, "copy: %s", err.msg);
    CHECK(colibri_session_common_prefix(b, ids, (int)n) == k, "copied tokens");
    CHECK(!colibri_session_prefill(b, ids + k, 1, lb, 0, &err), "%s", err.msg);
    CHECK(!memcmp(la, lb, (size_t)vocab * sizeof *la), "logits after copied rows differ from computed ones");
    /* refusals: more than the source holds, another KV layout; the target keeps its rows */
    CHECK(colibri_session_copy_prefix(c, a, (int)n + 1, &err) == COLIBRI_EINVAL && strstr(err.msg, "holds"),
          "copy past the source: %s", err.msg);
    CHECK(colibri_session_copy_prefix(d, a, k, &err) == COLIBRI_EINVAL && strstr(err.msg, "laid out differently"),
          "copy across KV tiers: %s", err.msg);
    CHECK(colibri_session_pos(c) == 3 && colibri_session_pos(d) == 0, "a refused copy changed the target");
out:
    free(la);
    free(lb);
    free(ids);
    colibri_session_free(a);
    colibri_session_free(b);
    colibri_session_free(c);
    colibri_session_free(d);
}

int main(void)
{
    struct colibri_err err = { 0 };
    /* one compute thread: the tokens do not depend on it, and the test stays
     * quick on a machine shared with other jobs */
    struct colibri_model_opts mo = { .n_threads = 1 };
    if (colibri_model_load(TINY, &mo, &model, &err) || colibri_tokenizer_load(TINY, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", TINY, err.msg);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    vocab = colibri_model_vocab(model);
    RUN_TEST(test_equals_hand_loop);
    RUN_TEST(test_stop_strings);
    RUN_TEST(test_eos);
    RUN_TEST(test_limit);
    RUN_TEST(test_context_full);
    RUN_TEST(test_cancel);
    RUN_TEST(test_batched_steps);
    RUN_TEST(test_utf8_pieces);
    RUN_TEST(test_padded_vocab);
    RUN_TEST(test_bad_arguments);
    RUN_TEST(test_copy_prefix);
    colibri_tokenizer_free(tok);
    colibri_model_free(model);
    return CHECK_SUMMARY();
}
