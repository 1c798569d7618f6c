/* The token path allocates nothing: after a warm-up, every call that could
 * allocate (malloc, calloc, realloc, aligned_alloc, posix_memalign,
 * memalign, valloc, pvalloc; strdup and libgomp's teams go through malloc)
 * is counted during decode steps, and there must be none. A step is what a
 * caller runs per token: the generator's sample (sampling, penalties,
 * detokenizing, stop strings) and decode (the forward), or
 * colibri_session_decode and colibri_sampler_sample for a model without a
 * tokenizer. Run with bf16 (as stored), q8 and q4g64 weights, the f32 and
 * quantized KV tiers, a DSA model, on 1 and 2 threads, and on 4 threads past
 * 64 cached positions.
 *
 * The counting replaces glibc's allocator entry points and forwards to its
 * __libc_* functions; under AddressSanitizer, which owns those entry points,
 * the test reports itself skipped (exit 77). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

#if defined(__SANITIZE_ADDRESS__)
#define NOALLOC_SKIP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NOALLOC_SKIP 1
#endif
#endif

#ifndef NOALLOC_SKIP
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);

/* set while the steps run; read by every thread that allocates */
static atomic_int counting;
static atomic_long calls;
static void *_Atomic first_caller;

static void note(void *caller)
{
    if (!atomic_load_explicit(&counting, memory_order_relaxed)) return;
    if (atomic_fetch_add(&calls, 1) == 0) atomic_store(&first_caller, caller);
}

void *malloc(size_t n)
{
    note(__builtin_return_address(0));
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    note(__builtin_return_address(0));
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    note(__builtin_return_address(0));
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    note(__builtin_return_address(0));
    return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
    note(__builtin_return_address(0));
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    note(__builtin_return_address(0));
    void *p = __libc_memalign(align, n);
    if (!p) return 12;   /* ENOMEM */
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    note(__builtin_return_address(0));
    return __libc_valloc(n);
}

void *pvalloc(size_t n)
{
    note(__builtin_return_address(0));
    return __libc_pvalloc(n);
}

#define TINY "models/colibri-tiny"
#define DSA "tests/oracle/deepseek_v32_tiny"
#define WARM 3
#define STEPS 24

struct setup {
    const char *fmt;            /* weights: NULL as stored (bf16, f32 for the fixture) */
    const char *kv;             /* KV tier */
    int threads;
};

static void begin(void)
{
    atomic_store(&calls, 0);
    atomic_store(&first_caller, NULL);
    atomic_store(&counting, 1);
}

static void end(const char *what, const struct setup *s, int steps)
{
    atomic_store(&counting, 0);
    long n = atomic_load(&calls);
    CHECK(n == 0, "%s, weights %s, kv %s, %d threads: %ld allocation calls in %d steps (the first from %p)", what,
          s->fmt ? s->fmt : "as stored", s->kv, s->threads, n, steps, atomic_load(&first_caller));
}

static colibri_model *load(const char *dir, const struct setup *s)
{
    struct colibri_model_opts mo = { 0 };
    mo.n_threads = s->threads;
    mo.experts_fmt = mo.dense_fmt = mo.embed_fmt = s->fmt;
    mo.state_dir = "none";
    colibri_model *m = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_model_load(dir, &mo, &m, &err) == 0, "%s: %s", dir, err.msg);
    colibri_thread_set_compute_threads(s->threads);
    return m;
}

static colibri_session *session(colibri_model *m, const struct setup *s)
{
    struct colibri_session_opts so = { .n_ctx = 256, .kv_tier = s->kv };
    colibri_session *ss = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_session_new(m, &so, &ss, &err) == 0, "%s", err.msg);
    return ss;
}

/* The sampler with every stage on: penalties, temperature, top-k, top-p,
 * min-p, and a bias (here against the end-of-generation ids, so that the
 * steps run). */
static colibri_sampler *sampler(int32_t n_vocab, const struct colibri_logit_bias *bias, size_t n_bias)
{
    struct colibri_sampler_opts o = colibri_sampler_default_opts();
    o.repeat_penalty = 1.1f;
    o.presence_penalty = 0.1f;
    o.frequency_penalty = 0.1f;
    o.seed = 7;
    o.logit_bias = bias;
    o.n_logit_bias = n_bias;
    colibri_sampler *sp = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_sampler_new(&o, n_vocab, &sp, &err) == 0, "%s", err.msg);
    return sp;
}

/* colibri-tiny through the generator: sample, then decode, per token. */
static void gen_steps(const struct setup *s)
{
    colibri_model *m = load(TINY, s);
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_tokenizer_load(TINY, &t, &err) == 0, "%s", err.msg);
    colibri_session *ss = m && t ? session(m, s) : NULL;
    if (!ss) goto out;
    int32_t V = colibri_tokenizer_n_vocab(t);
    struct colibri_logit_bias bias[8];
    size_t nb = 0;
    for (int32_t id = 0; id < V && nb < 8; id++)
        if (colibri_tokenizer_is_eog(t, id)) bias[nb++] = (struct colibri_logit_bias){ id, -100.0f };
    colibri_sampler *sp = sampler(colibri_model_vocab(m), bias, nb);
    colibri_gen *g = NULL;
    const char *text = "Once upon a time there was a little";
    int32_t *prompt = NULL;
    size_t np = 0;
    CHECK(colibri_tokenizer_encode(t, text, strlen(text), COLIBRI_ENCODE_ADD_SPECIAL, &prompt, &np, NULL, &err) == 0,
          "%s", err.msg);
    const char *stops[] = { "zzzz" };
    struct colibri_gen_opts go = { .sampler = sp, .n_predict = WARM + STEPS + 4, .stops = stops, .n_stops = 1,
                                   .repair_utf8 = 1, .prompt_in_history = 1 };
    int rc = sp ? colibri_gen_new(m, ss, t, &g, &err) : -1;
    if (!rc) rc = colibri_gen_start(g, prompt, (int)np, &go, &err);
    while (!rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL) rc = colibri_gen_prefill(g, 0, &err) < 0;
    int done = 0;
    for (int i = 0; i < WARM + STEPS && !rc; i++) {
        if (i == WARM) begin();
        struct colibri_gen_step step;
        rc = colibri_gen_sample(g, &step, &err);
        if (!rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED) rc = colibri_gen_decode(g, &err);
        else if (!rc) break;
        done += i >= WARM;
    }
    end("generator steps", s, done);
    CHECK(rc == 0 && done == STEPS, "%d of %d steps: %s", done, STEPS, err.msg);
    colibri_gen_free(g);
    free(prompt);
    colibri_sampler_free(sp);
out:
    colibri_session_free(ss);
    colibri_tokenizer_free(t);
    colibri_model_free(m);
}

/* A model without a tokenizer (the DSA fixture), or a longer prompt:
 * decode, then sample. */
static void session_steps(const char *dir, const struct setup *s, int n_prompt)
{
    colibri_model *m = load(dir, s);
    colibri_session *ss = m ? session(m, s) : NULL;
    if (!ss) {
        colibri_model_free(m);
        return;
    }
    int V = colibri_model_vocab(m);
    float *logits = malloc((size_t)V * sizeof *logits);
    colibri_sampler *sp = sampler(V, NULL, 0);
    int32_t prompt[200];
    for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)((i * 7919 + 13) % V);
    struct colibri_err err = { 0 };
    int rc = sp ? colibri_session_prefill(ss, prompt, n_prompt, logits, 0, &err) : -1;
    int done = 0;
    for (int i = 0; i < WARM + STEPS && !rc; i++) {
        if (i == WARM) begin();
        int32_t tok = colibri_sampler_sample(sp, logits, &err);
        if (tok < 0) {
            rc = tok;
            break;
        }
        colibri_sampler_accept(sp, tok);
        rc = colibri_session_decode(ss, tok, logits, &err);
        done += i >= WARM;
    }
    end(dir, s, done);
    CHECK(rc == 0 && done == STEPS, "%d of %d steps: %s", done, STEPS, err.msg);
    colibri_sampler_free(sp);
    free(logits);
    colibri_session_free(ss);
    colibri_model_free(m);
}

static void test_generator_bf16_f32(void)
{
    for (int th = 1; th <= 2; th++) gen_steps(&(struct setup){ NULL, "f32", th });
}

static void test_generator_q8_int8r(void)
{
    for (int th = 1; th <= 2; th++) gen_steps(&(struct setup){ "q8", "int8r", th });
}

static void test_generator_q4g64_q4_0(void)
{
    for (int th = 1; th <= 2; th++) gen_steps(&(struct setup){ "q4g64", "q4_0", th });
}

static void test_generator_rotated_tier(void)
{
    gen_steps(&(struct setup){ "q4g64", "tq4", 2 });
}

static void test_dsa_model(void)
{
    for (int th = 1; th <= 2; th++) {
        session_steps(DSA, &(struct setup){ NULL, "f32", th }, 20);
        session_steps(DSA, &(struct setup){ "q8", "int8r", th }, 20);
    }
}

/* 4 threads past 64 cached positions: the attention and the index scores
 * split into more than one block there, and every parallel region must use
 * the same team size (libgomp allocates a team whenever it changes). */
static void test_four_threads_longer_context(void)
{
    session_steps(TINY, &(struct setup){ NULL, "f32", 4 }, 100);
    session_steps(TINY, &(struct setup){ "q4g64", "q4_0", 4 }, 200);
    session_steps(DSA, &(struct setup){ NULL, "f32", 4 }, 200);
}

int main(void)
{
    RUN_TEST(test_generator_bf16_f32);
    RUN_TEST(test_generator_q8_int8r);
    RUN_TEST(test_generator_q4g64_q4_0);
    RUN_TEST(test_generator_rotated_tier);
    RUN_TEST(test_dsa_model);
    RUN_TEST(test_four_threads_longer_context);
    return CHECK_SUMMARY();
}

#else

int main(void)
{
    printf("skip test_noalloc: AddressSanitizer owns malloc, so the allocation calls cannot be counted\n");
    return 77;
}

#endif
