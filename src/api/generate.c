/* api/generate.c - the generator of include/colibri.h ("generation"):
 * prompt ids -> sampled tokens -> streamed text, step by step, on top of the
 * public session, sampler, detokenizer and stop-string calls.
 *
 * Phases and what moves between them (each a function below):
 *   IDLE/any --start--> PREFILL --prefill (last chunk)--> SAMPLE
 *   SAMPLE --sample--> FEED (token to run) | DONE (the generation ended)
 *   FEED --fed/decode--> SAMPLE
 *   PREFILL/SAMPLE --cancel callback--> DONE
 * Invariants:
 *  (1) In SAMPLE, logits hold the model's output after the cached tokens;
 *      in FEED, tok_buf[0..n_pending) are sampled, shown and not yet cached.
 *  (2) Text goes detokenizer -> stop matcher -> UTF-8 carry -> the caller;
 *      the carry holds at most the 3 leading bytes of an unfinished
 *      character, and is emptied only by the last step.
 *  (3) st.n_cached + st.n_prefilled == n_done <= n_prompt.
 *  (4) With drafts (opts.n_draft): after a verify, the session holds the fed
 *      token at v_pos and the drafts after it; in SAMPLE, row `row` of
 *      vlogits is the model's output after position v_pos + row. A sampled
 *      token equal to the draft for the next position is already cached: the
 *      phase stays SAMPLE and the next step samples the next row (one token
 *      per step, so a server streams each as it is accepted); any other token
 *      (or the end of the generation) keeps row + 1 positions from v_pos
 *      (colibri_spec_keep). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"
#include "base/err.h"
#include "base/strbuf.h"
#include "colibri.h"
#include "tok/tok_utf8.h"

#define AUTO_OFF_N 8             /* opts.draft_auto: see auto_drafts() */
#define AUTO_PROBE 4

struct colibri_gen {
    const colibri_model *model;
    colibri_session *sess;
    const colibri_tokenizer *tok;
    int n_vocab;                /* the model's: the logits' length */
    int n_text;                 /* ids at or above it have no text and are never sampled */
    float *logits;
    colibri_detok *dt;
    colibri_stop *stop;         /* this generation's stop strings */
    struct colibri_gen_opts o;  /* stops not kept: copied into `stop` */
    enum colibri_gen_phase phase;

    int32_t *prompt;            /* a copy of this generation's prompt */
    int n_prompt, cap_prompt;
    int n_done;                 /* prompt tokens in the cache */

    int32_t tok_buf[COLIBRI_GEN_MAX_DRAFT + 1];    /* the step's tokens */
    int32_t pend[1];            /* the token to feed, while in FEED */
    int n_pending;
    /* drafts: (4) */
    float *vlogits;             /* [(COLIBRI_GEN_MAX_DRAFT + 1) * n_vocab], allocated with the first draft */
    int32_t drafts[COLIBRI_GEN_MAX_DRAFT];
    int n_rows, row, v_pos;     /* n_rows 0: sample from `logits` */
    struct gen_auto {           /* opts.draft_auto: see auto_drafts(); outlives a generation */
        int mode, k, left, losses;  /* k: the drafts of PROBING and ON */
        double t_prev;          /* when the forward in flight began (0: none yet in this generation) */
        int tok_prev, k_prev;   /* tokens generated then; its drafts */
        double off[AUTO_OFF_N]; /* the latest plain forwards' times, a ring */
        int n_off;
        double p_t[AUTO_PROBE]; /* the block's forward times, tokens and forwards so far */
        int p_tok, p_n;
        double best, off_rate;  /* this probe's best rate so far (tokens/s) and its drafts; the plain rate */
        int best_k;
        int confirming;         /* PROBING: this block repeats one that won */
    } au;
    char carry[4];
    int n_carry;
    struct strbuf text, tail, scratch;

    struct colibri_gen_stats st;
    double t_gen0;              /* when the prefill ended */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *phase_name(enum colibri_gen_phase p)
{
    static const char *const names[] = {
        [COLIBRI_GEN_PHASE_IDLE] = "idle", [COLIBRI_GEN_PHASE_PREFILL] = "prefill",
        [COLIBRI_GEN_PHASE_SAMPLE] = "sample", [COLIBRI_GEN_PHASE_FEED] = "feed",
        [COLIBRI_GEN_PHASE_DONE] = "done",
    };
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "?";
}

const char *colibri_gen_end_name(enum colibri_gen_end end)
{
    static const char *const names[] = {
        [COLIBRI_GEN_END_NONE] = "", [COLIBRI_GEN_END_EOS] = "eos", [COLIBRI_GEN_END_STOP] = "stop",
        [COLIBRI_GEN_END_LIMIT] = "limit", [COLIBRI_GEN_END_CONTEXT] = "context",
        [COLIBRI_GEN_END_CANCELLED] = "cancelled", [COLIBRI_GEN_END_ERROR] = "error",
    };
    return (unsigned)end < sizeof names / sizeof names[0] ? names[end] : "?";
}

static int wrong_phase(const colibri_gen *g, const char *fn, struct colibri_err *err)
{
    return base_err_set(err, COLIBRI_EINVAL, "%s: the generator is in phase %s", fn, phase_name(g->phase));
}

/* ------------------------------------------------------------ lifecycle */

int colibri_gen_new(const colibri_model *m, colibri_session *s, const colibri_tokenizer *t, colibri_gen **out,
                    struct colibri_err *err)
{
    if (!m || !s || !t || !out) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_new: model, session, tokenizer "
                                               "and out are required");
    int rc = colibri_tokenizer_check_model(t, m, err);
    if (rc) return rc;
    colibri_gen *g = calloc(1, sizeof *g);
    if (!g) return base_err_set(err, COLIBRI_ENOMEM, "colibri_gen_new: out of memory");
    g->model = m;
    g->sess = s;
    g->tok = t;
    g->n_vocab = colibri_model_vocab(m);
    g->n_text = colibri_tokenizer_n_vocab(t);
    g->logits = malloc((size_t)g->n_vocab * sizeof *g->logits);
    if (!g->logits) {
        colibri_gen_free(g);
        return base_err_set(err, COLIBRI_ENOMEM, "colibri_gen_new: %d logits", g->n_vocab);
    }
    rc = colibri_detok_new(t, 1, &g->dt, err);
    if (rc) { colibri_gen_free(g); return rc; }
    *out = g;
    return 0;
}

void colibri_gen_free(colibri_gen *g)
{
    if (!g) return;
    colibri_detok_free(g->dt);
    colibri_stop_free(g->stop);
    free(g->logits);
    free(g->vlogits);
    free(g->prompt);
    base_sb_free(&g->text);
    base_sb_free(&g->tail);
    base_sb_free(&g->scratch);
    free(g);
}

enum colibri_gen_phase colibri_gen_phase(const colibri_gen *g)
{
    return g ? g->phase : COLIBRI_GEN_PHASE_IDLE;
}

void colibri_gen_get_stats(const colibri_gen *g, struct colibri_gen_stats *st)
{
    if (!g || !st) return;
    *st = g->st;
    if (g->phase == COLIBRI_GEN_PHASE_SAMPLE || g->phase == COLIBRI_GEN_PHASE_FEED)
        st->t_generate = now_s() - g->t_gen0;
}

float *colibri_gen_logits(colibri_gen *g) { return g ? g->logits : NULL; }

/* ------------------------------------------------------------ text */

/* Appends carry + p[0..n) to out as text that is final: all of it when
 * final, else up to the end of the last character that is complete (or
 * invalid whatever follows); the rest becomes the carry. */
static int release(colibri_gen *g, const char *p, size_t n, int final, struct strbuf *out)
{
    struct strbuf *b = &g->scratch;
    base_sb_clear(b);
    if (base_sb_append(b, g->carry, (size_t)g->n_carry) || base_sb_append(b, p, n)) return COLIBRI_ENOMEM;
    size_t keep = final ? b->n : tok_utf8_complete_len(b->s, b->n);
    g->n_carry = (int)(b->n - keep);
    memcpy(g->carry, b->s + keep, (size_t)g->n_carry);
    if (!g->o.repair_utf8) return base_sb_append(out, b->s, keep);
    if (base_sb_reserve(out, 3 * keep)) return COLIBRI_ENOMEM;
    out->n += tok_utf8_sanitize_into(b->s, keep, out->s + out->n);
    out->s[out->n] = 0;
    return 0;
}

/* Ends the generation with `end`. Unless it was cancelled or failed, the
 * held-back text is released into g->tail: the detokenizer's and the stop
 * matcher's (none after a completed stop string), then the carry. */
static int finish(colibri_gen *g, enum colibri_gen_end end, struct colibri_err *err)
{
    g->phase = COLIBRI_GEN_PHASE_DONE;
    g->st.end = end;
    g->n_pending = 0;
    if (g->t_gen0 > 0) g->st.t_generate = now_s() - g->t_gen0;
    if (end == COLIBRI_GEN_END_CANCELLED || end == COLIBRI_GEN_END_ERROR) return 0;
    struct strbuf raw = { 0 };
    int rc = 0;
    if (end != COLIBRI_GEN_END_STOP) {
        const char *p, *sp;
        size_t n, sn;
        int hit = 0;
        colibri_detok_flush(g->dt, &p, &n);
        if (n) {
            hit = colibri_stop_feed(g->stop, p, n, &sp, &sn, err);
            if (hit < 0) rc = hit;
            else rc = base_sb_append(&raw, sp, sn);
        }
        if (!rc && !hit) {
            colibri_stop_flush(g->stop, &p, &n);
            rc = base_sb_append(&raw, p, n);
        }
    }
    if (!rc) rc = release(g, raw.s ? raw.s : "", raw.n, 1, &g->tail);
    base_sb_free(&raw);
    if (rc) {
        g->st.end = COLIBRI_GEN_END_ERROR;
        return rc == COLIBRI_ENOMEM ? base_err_set(err, rc, "generation: out of memory for the text") : rc;
    }
    return 0;
}

/* A failure while generating: the generation ends with END_ERROR. */
static int fail(colibri_gen *g, int rc)
{
    finish(g, COLIBRI_GEN_END_ERROR, NULL);
    return rc;
}

static int cancelled(const colibri_gen *g)
{
    return g->o.cancel && g->o.cancel(g->o.cancel_user);
}

/* ------------------------------------------------------------ steps */

int colibri_gen_start(colibri_gen *g, const int32_t *prompt, int n_prompt, const struct colibri_gen_opts *opts,
                      struct colibri_err *err)
{
    if (!g || !opts) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_start: generator and options are required");
    if (!prompt || n_prompt <= 0) return base_err_set(err, COLIBRI_EINVAL, "the prompt is empty");
    if (!opts->sampler) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_start: opts.sampler is required");
    if (opts->n_predict < 1)
        return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_start: opts.n_predict is %d; at least 1 token must be "
                       "generated", opts->n_predict);
    if (opts->n_stops && !opts->stops)
        return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_start: opts.stops is NULL with n_stops %zu", opts->n_stops);
    if (opts->n_draft < 0 || opts->n_draft > COLIBRI_GEN_MAX_DRAFT)
        return base_err_set(err, COLIBRI_EINVAL, "--draft %d: drafts per step are 0 (off) to %d", opts->n_draft,
                       COLIBRI_GEN_MAX_DRAFT);
    if (opts->n_draft) {
        int rc = colibri_spec_enable(g->sess, err);
        if (rc) return rc;
        if (!g->vlogits &&
            !(g->vlogits = malloc((size_t)(COLIBRI_GEN_MAX_DRAFT + 1) * g->n_vocab * sizeof *g->vlogits)))
            return base_err_set(err, COLIBRI_ENOMEM, "colibri_gen_start: logits for %d drafts", COLIBRI_GEN_MAX_DRAFT);
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= g->n_vocab)
            return base_err_set(err, COLIBRI_ERANGE, "the prompt's token %d is id %d, outside the model's vocabulary "
                           "(0..%d)", i, prompt[i], g->n_vocab - 1);
    int n_ctx = colibri_session_n_ctx(g->sess);
    if (n_prompt >= n_ctx)
        return base_err_set(err, COLIBRI_ERANGE, "the prompt is %d tokens but the context holds %d (and one more is "
                       "needed to generate)", n_prompt, n_ctx);
    if (n_prompt > g->cap_prompt) {
        int32_t *np = realloc(g->prompt, (size_t)n_prompt * sizeof *np);
        if (!np) return base_err_set(err, COLIBRI_ENOMEM, "colibri_gen_start: %d prompt tokens", n_prompt);
        g->prompt = np;
        g->cap_prompt = n_prompt;
    }
    colibri_stop *stop = NULL;
    int rc = colibri_stop_new(opts->stops, opts->n_stops, &stop, err);
    if (rc) return rc;

    colibri_stop_free(g->stop);
    g->stop = stop;
    g->o = *opts;
    g->o.stops = NULL;
    g->o.n_stops = 0;
    memcpy(g->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    g->n_prompt = n_prompt;
    const char *p;
    size_t n;
    colibri_detok_flush(g->dt, &p, &n);     /* drops what an earlier generation left */
    g->n_carry = 0;
    g->n_pending = 0;
    g->n_rows = 0;
    g->au.t_prev = 0;   /* the rest of the auto state carries over */
    base_sb_clear(&g->text);
    base_sb_clear(&g->tail);
    memset(&g->st, 0, sizeof g->st);
    g->st.n_prompt = n_prompt;
    g->t_gen0 = 0;

    double t0 = now_s();
    int keep = colibri_session_reuse_prefix(g->sess, g->prompt, n_prompt, err);
    g->st.t_prefill = now_s() - t0;
    if (keep < 0) return fail(g, keep);
    g->n_done = keep;
    g->st.n_cached = keep;
    if (g->o.prompt_in_history)
        for (int i = 0; i < n_prompt; i++) colibri_sampler_accept(g->o.sampler, g->prompt[i]);
    g->phase = COLIBRI_GEN_PHASE_PREFILL;
    return 0;
}

int colibri_gen_prefill(colibri_gen *g, int max_tokens, struct colibri_err *err)
{
    if (!g) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_prefill: no generator");
    if (g->phase != COLIBRI_GEN_PHASE_PREFILL) return wrong_phase(g, "colibri_gen_prefill", err);
    if (cancelled(g)) { finish(g, COLIBRI_GEN_END_CANCELLED, err); return 0; }
    int n = g->n_prompt - g->n_done;
    if (max_tokens > 0 && n > max_tokens) n = max_tokens;
    int last = g->n_done + n == g->n_prompt;
    double t0 = now_s();
    int rc = g->o.n_draft ? colibri_spec_prefill(g->sess, g->prompt + g->n_done, n, last ? g->logits : NULL,
                                                         g->o.draft_auto, err)
                          : colibri_session_prefill(g->sess, g->prompt + g->n_done, n, last ? g->logits : NULL, 0, err);
    double t1 = now_s();
    g->st.t_prefill += t1 - t0;
    if (rc) return fail(g, rc);
    g->n_done += n;
    g->st.n_prefilled += n;
    if (last) {
        g->phase = COLIBRI_GEN_PHASE_SAMPLE;
        g->t_gen0 = t1;
    }
    return g->n_prompt - g->n_done;
}

int colibri_gen_sample(colibri_gen *g, struct colibri_gen_step *step, struct colibri_err *err)
{
    if (!g || !step) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_sample: generator and step are required");
    if (g->phase != COLIBRI_GEN_PHASE_SAMPLE) return wrong_phase(g, "colibri_gen_sample", err);
    base_sb_clear(&g->text);
    base_sb_clear(&g->tail);
    int rc = 0, n_tok = 0;
    float *lg = NULL;
    const char *piece, *safe;
    size_t n_piece, n_safe;
    if (cancelled(g)) {
        rc = finish(g, COLIBRI_GEN_END_CANCELLED, err);
        goto out;
    }
    do {   /* once: the breaks end the step */
        lg = g->n_rows ? g->vlogits + (int64_t)g->row * g->n_vocab : g->logits;
        for (int v = g->n_text; v < g->n_vocab; v++) lg[v] = -INFINITY;
        int32_t t = colibri_sampler_sample(g->o.sampler, lg, err);
        if (t < 0) { rc = fail(g, t); goto out; }
        colibri_sampler_accept(g->o.sampler, t);
        g->tok_buf[n_tok++] = t;
        g->st.n_generated++;
        /* the draft for the next position is the token drawn: it is cached */
        int kept = g->n_rows && g->row < g->n_rows - 1 && t == g->drafts[g->row];
        if (kept) g->st.n_accepted[g->row]++;
        if (colibri_tokenizer_is_eog(g->tok, t)) {
            rc = finish(g, COLIBRI_GEN_END_EOS, err);
            goto out;
        }
        if ((rc = colibri_detok_push(g->dt, t, &piece, &n_piece, err))) { rc = fail(g, rc); goto out; }
        int hit = colibri_stop_feed(g->stop, piece, n_piece, &safe, &n_safe, err);
        if (hit < 0) { rc = fail(g, hit); goto out; }
        if (release(g, safe, n_safe, 0, &g->text)) {
            rc = fail(g, base_err_set(err, COLIBRI_ENOMEM, "generation: out of memory for the text"));
            goto out;
        }
        if (hit) rc = finish(g, COLIBRI_GEN_END_STOP, err);
        else if (g->st.n_generated >= g->o.n_predict) rc = finish(g, COLIBRI_GEN_END_LIMIT, err);
        else if (kept) {
            g->row++;   /* the next call samples the next row: one token per step */
        } else {
            if (g->n_rows) {
                colibri_spec_keep(g->sess, g->v_pos, g->row + 1);
                g->n_rows = 0;
            }
            if (colibri_session_pos(g->sess) >= colibri_session_n_ctx(g->sess))
                rc = finish(g, COLIBRI_GEN_END_CONTEXT, err);
            else {
                g->pend[0] = t;
                g->n_pending = 1;
                g->phase = COLIBRI_GEN_PHASE_FEED;
            }
        }
    } while (0);
out:
    /* the generation ended (or failed) within a verify's rows: what was fed
     * up to the last token sampled stays, that token is not fed (4) */
    if (g->n_rows && g->phase != COLIBRI_GEN_PHASE_SAMPLE) {
        colibri_spec_keep(g->sess, g->v_pos, g->row + 1);
        g->n_rows = 0;
    }
    if (rc) {
        base_sb_clear(&g->text);
        base_sb_clear(&g->tail);
    }
    step->n_tokens = n_tok;
    step->tokens = g->tok_buf;
    step->logits = n_tok ? lg : NULL;
    step->text = g->text.s && g->text.n ? g->text.s : "";
    step->len = g->text.n;
    step->tail = g->tail.s && g->tail.n ? g->tail.s : "";
    step->tail_len = g->tail.n;
    step->end = g->st.end;
    return rc;
}

int colibri_gen_pending(const colibri_gen *g, const int32_t **tokens)
{
    int n = g && g->phase == COLIBRI_GEN_PHASE_FEED ? g->n_pending : 0;
    if (tokens) *tokens = n ? g->pend : NULL;
    return n;
}

int colibri_gen_fed(colibri_gen *g, int n, struct colibri_err *err)
{
    if (!g) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_fed: no generator");
    if (g->phase != COLIBRI_GEN_PHASE_FEED) return wrong_phase(g, "colibri_gen_fed", err);
    if (n != g->n_pending)
        return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_fed: %d tokens fed, %d pending", n, g->n_pending);
    g->n_pending = 0;
    g->phase = COLIBRI_GEN_PHASE_SAMPLE;
    g->st.n_forwards++;
    return 0;
}

/* opts.draft_auto. Drafting pays when a verify's tokens outrun its cost, so
 * auto times each decode forward (wall time from one decode call to the
 * next: the drafts, the verify, sampling its rows) and counts the tokens it
 * yielded. With streamed experts the time includes the extra expert reads a
 * verify's rows make, so they count as what they cost. Rates are tokens per
 * forward over the median forward time, so that a forward the OS preempted
 * does not decide.
 *  - OFF: plain forwards (each keeps the hidden state a draft needs); the
 *    latest AUTO_OFF_N of them give the plain rate.
 *  - PROBING: a block of up to AUTO_PROBE forwards with k drafts, k = 1
 *    first (the cheapest probe: tokens per forward grow ever slower with k
 *    while each draft adds about the same cost, so when one draft loses more
 *    lose too), then n_draft if one draft won. A block is lost as soon as
 *    even every draft kept in its remaining forwards could not beat the best
 *    rate so far by AUTO_MARGIN (on a compute-bound model, after a forward
 *    or two), and won only with a rate over it by AUTO_MARGIN: 20%, twice
 *    in a row (two blocks of the same k), so that the noise of four
 *    forwards' times on a busy machine, or in a server whose slots' forwards
 *    are each timed by the whole batched iteration (its composition changing
 *    from one to the next), rarely wins one (a false win costs a block of
 *    drafted forwards and a probe of n_draft).
 *  - ON: the winner, checked block by block against the plain rate (a block
 *    slower than plain ends it at once, so a probe won by noise costs one
 *    block); after AUTO_ON_HOLD forwards, OFF for AUTO_OFF_N to renew the
 *    plain rate, then a new probe.
 * Each lost probe or ON block starts an OFF hold of AUTO_HOLD << losses
 * forwards (losses: lost in a row, at most AUTO_MAX_BACKOFF): exponential
 * back-off. The state outlives a generation (a server slot's or a chat's
 * next request goes on from it). Where drafting always loses, a generator's
 * first N forwards hold at most 1 + log2(1 + N / AUTO_HOLD) probes, each at
 * most AUTO_PROBE forwards of one draft (twice that where noise wins the first block): the overhead is about that many
 * one-draft verifies less their tokens, and its share vanishes as N grows. */
#define AUTO_HOLD 128
#define AUTO_ON_HOLD 256
#define AUTO_MAX_BACKOFF 10
#define AUTO_MARGIN 1.2
enum { AUTO_OFF = 0, AUTO_PROBING, AUTO_ON };

static double median_of(const double *x, int n)
{
    double t[AUTO_OFF_N > AUTO_PROBE ? AUTO_OFF_N : AUTO_PROBE];
    memcpy(t, x, (size_t)n * sizeof *t);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double v = t[j]; t[j] = t[j - 1]; t[j - 1] = v; }
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void auto_block(struct gen_auto *a, int mode, int k)
{
    a->mode = mode;
    a->k = k;
    a->p_tok = a->p_n = 0;
}

static void auto_lost(struct gen_auto *a)
{
    a->mode = AUTO_OFF;
    a->left = AUTO_HOLD << (a->losses < AUTO_MAX_BACKOFF ? a->losses : AUTO_MAX_BACKOFF);
    a->losses++;
}

/* Drafts for the forward about to run (0: a plain one). A generator that
 * may not probe now (another in its batch is probing) waits in OFF. */
static int auto_drafts(colibri_gen *g, int may_probe)
{
    struct gen_auto *a = &g->au;
    double t = now_s();
    if (a->t_prev > 0) {        /* the forward that just ended */
        double dt = t - a->t_prev;
        if (a->k_prev == 0) a->off[a->n_off++ % AUTO_OFF_N] = dt;
        else if (a->mode != AUTO_OFF && a->k_prev == a->k && a->p_n < AUTO_PROBE) {
            a->p_t[a->p_n++] = dt;
            a->p_tok += g->st.n_generated - a->tok_prev;
        }
    }
    a->tok_prev = g->st.n_generated;
    a->t_prev = t;
    double med = a->p_n ? median_of(a->p_t, a->p_n) : 0;
    double rate = med > 0 ? a->p_tok / (a->p_n * med) : 0;
    if (a->mode == AUTO_OFF) {
        if (a->left > 0) a->left--;
        if (a->left <= 0 && a->n_off >= AUTO_OFF_N && may_probe) {
            double off = median_of(a->off, AUTO_OFF_N);
            a->off_rate = a->best = off > 0 ? 1.0 / off : 0;
            a->best_k = 0;
            a->confirming = 0;
            auto_block(a, AUTO_PROBING, 1);
        }
    } else if (a->mode == AUTO_PROBING && med > 0) {
        int rest = AUTO_PROBE - a->p_n;
        double hope = (a->p_tok + rest * (a->k + 1.0)) / (AUTO_PROBE * med);
        int won = rest == 0 && rate > AUTO_MARGIN * a->best;
        if (won && !a->confirming) {          /* a win counts once a second block wins too */
            a->confirming = 1;
            auto_block(a, AUTO_PROBING, a->k);
            return a->k;
        }
        if (rest == 0 || hope <= AUTO_MARGIN * a->best) a->confirming = 0;
        if (won) {
            a->best = rate;
            a->best_k = a->k;
        }
        if (won && a->k < g->o.n_draft) auto_block(a, AUTO_PROBING, g->o.n_draft);
        else if (won || ((rest == 0 || hope <= AUTO_MARGIN * a->best) && a->best_k)) {
            auto_block(a, AUTO_ON, a->best_k);
            a->left = AUTO_ON_HOLD;
        } else if (rest == 0 || hope <= AUTO_MARGIN * a->best) {
            auto_lost(a);
        }
    } else if (a->mode == AUTO_ON && a->p_n == AUTO_PROBE) {
        if (rate < a->off_rate) auto_lost(a);
        else if ((a->left -= AUTO_PROBE) <= 0) {
            a->mode = AUTO_OFF;
            a->left = AUTO_OFF_N;
            a->losses = 0;
        } else auto_block(a, AUTO_ON, a->k);
    }
    return a->mode == AUTO_OFF ? 0 : a->k;
}

/* The drafts for the pending token, into g->drafts: how many (0..n_draft),
 * or a negative code (the generation failed). */
static int make_drafts(colibri_gen *g, int may_probe, struct colibri_err *err)
{
    int32_t x = g->pend[0];
    int P = colibri_session_pos(g->sess), k = g->o.n_draft;
    if (g->o.draft_auto) k = auto_drafts(g, may_probe);   /* 0: a plain decode that keeps the hidden state */
    int left = g->o.n_predict - g->st.n_generated;   /* tokens still to generate after x */
    if (k > left - 1) k = left - 1;                  /* the last of them is the sampler's own */
    int nd = k > 0 ? colibri_spec_draft(g->sess, x, k, g->n_text, g->drafts, err) : 0;
    if (nd < 0) return fail(g, nd);
    g->au.k_prev = nd;
    if (nd && g->o.draft_hook) {
        g->o.draft_hook(g->o.draft_user, P + 1, g->drafts, nd);
        for (int j = 0; j < nd; j++)
            if (g->drafts[j] < 0 || g->drafts[j] >= g->n_vocab)
                return fail(g, base_err_set(err, COLIBRI_ERANGE, "draft hook: draft %d is id %d, outside the "
                                       "vocabulary (0..%d)", j, g->drafts[j], g->n_vocab - 1));
    }
    return nd;
}

/* Auto drafting in a batch (the server's slots): the slots share one machine
 * and each slot's forwards are timed by the whole batched iteration, so what
 * one slot's probe found holds for the others. One probes at a time (see
 * colibri_gen_batch_decode), and a lost probe's back-off, g[m]'s, is passed
 * to the others waiting in OFF: without this every slot paid for its own
 * probes, in step, and a server with S slots probed S times as often as
 * one generation. */
static void auto_share_loss(colibri_gen *const *g, int n, int m)
{
    const struct gen_auto *lost = &g[m]->au;
    for (int i = 0; i < n; i++) {
        struct gen_auto *a = &g[i]->au;
        if (i == m || !g[i]->o.draft_auto || a->mode != AUTO_OFF) continue;
        if (a->left < lost->left) a->left = lost->left;
        if (a->losses < lost->losses) a->losses = lost->losses;
    }
}

/* After the pending token and nd drafts were verified at position P. */
static int verified(colibri_gen *g, int nd, int P, struct colibri_err *err)
{
    for (int j = 0; j < nd; j++) g->st.n_drafted[j]++;
    g->st.n_forwards_drafted += nd > 0;
    g->n_rows = nd + 1;
    g->row = 0;
    g->v_pos = P;
    return colibri_gen_fed(g, g->n_pending, err);
}

/* The decode step with drafts: draft after the pending token, verify both in
 * one forward, sample from its rows next (4). */
static int decode_drafted(colibri_gen *g, struct colibri_err *err)
{
    int P = colibri_session_pos(g->sess);
    int nd = make_drafts(g, 1, err);
    if (nd < 0) return nd;
    int rc = colibri_spec_verify(g->sess, g->pend[0], g->drafts, nd, g->vlogits, err);
    if (rc) return fail(g, rc);
    return verified(g, nd, P, err);
}

int colibri_gen_decode(colibri_gen *g, struct colibri_err *err)
{
    if (!g) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_decode: no generator");
    if (g->phase != COLIBRI_GEN_PHASE_FEED) return wrong_phase(g, "colibri_gen_decode", err);
    if (g->o.n_draft) return decode_drafted(g, err);
    int rc = colibri_session_decode(g->sess, g->pend[0], g->logits, err);
    if (rc) return fail(g, rc);
    return colibri_gen_fed(g, g->n_pending, err);
}

int colibri_gen_batch_decode(colibri_gen *const *g, int n, int *n_done, struct colibri_err *err)
{
    if (n_done) *n_done = 0;
    if (n < 0 || (n > 0 && !g)) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_batch_decode: %d generators "
                                                    "without an array", n);
    if (n == 0) return 0;
    if (n > 64) return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_batch_decode: %d generators, at most 64", n);
    int drafting = 0;
    for (int i = 0; i < n; i++) {
        if (!g[i] || g[i]->phase != COLIBRI_GEN_PHASE_FEED || g[i]->n_pending != 1)
            return base_err_set(err, COLIBRI_EINVAL, "colibri_gen_batch_decode: generator %d is in phase %s",
                           i, g[i] ? phase_name(g[i]->phase) : "none");
        drafting |= g[i]->o.n_draft > 0;
    }
    colibri_session *sess[64];
    float *logits[64];
    int32_t in[64][COLIBRI_GEN_MAX_DRAFT + 1];
    const int32_t *inp[64];
    int n_in[64], pos[64], done = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        sess[i] = g[i]->sess;
        pos[i] = colibri_session_pos(sess[i]);
        in[i][0] = g[i]->pend[0];
        inp[i] = in[i];
        n_in[i] = 1;
        logits[i] = g[i]->o.n_draft ? g[i]->vlogits : g[i]->logits;
    }
    if (!drafting) {
        /* no drafts anywhere: exactly the plain batched decode */
        int32_t toks[64];
        for (int i = 0; i < n; i++) toks[i] = in[i][0];
        rc = colibri_batch_decode(sess, toks, n, logits, &done, err);
        for (int i = 0; i < done; i++) colibri_gen_fed(g[i], 1, NULL);
    } else {
        int m = 0;   /* the generators whose drafts are made */
        int probing = 0;
        for (int i = 0; i < n; i++) probing |= g[i]->o.draft_auto && g[i]->au.mode == AUTO_PROBING;
        for (; m < n; m++) {
            if (!g[m]->o.n_draft) continue;
            int losses = g[m]->au.losses;
            int nd = make_drafts(g[m], !probing, err);
            if (nd < 0) { rc = nd; break; }
            if (g[m]->o.draft_auto) {
                probing |= g[m]->au.mode == AUTO_PROBING;
                if (g[m]->au.losses > losses) auto_share_loss(g, n, m);
            }
            memcpy(in[m] + 1, g[m]->drafts, (size_t)nd * sizeof **in);
            n_in[m] = 1 + nd;
        }
        struct colibri_err e2 = { 0 };
        int rc2 = colibri_spec_verify_batch(sess, inp, n_in, m, logits, &done, &e2);
        if (rc2 && (!rc || done < m)) {   /* the first generator that did not advance says why */
            rc = rc2;
            if (err) *err = e2;
        }
        for (int i = 0; i < done; i++) {
            if (g[i]->o.n_draft) verified(g[i], n_in[i] - 1, pos[i], NULL);
            else colibri_gen_fed(g[i], 1, NULL);
        }
    }
    if (n_done) *n_done = done;
    return rc;
}

int colibri_gen_run(colibri_gen *g, const int32_t *prompt, int n_prompt, const struct colibri_gen_opts *opts,
                    void (*on_text)(void *user, const char *text, size_t len), void *user,
                    struct colibri_err *err)
{
    int rc = colibri_gen_start(g, prompt, n_prompt, opts, err);
    if (rc) return rc;
    while (g->phase == COLIBRI_GEN_PHASE_PREFILL)
        if ((rc = colibri_gen_prefill(g, 0, err)) < 0) return rc;
    while (g->phase == COLIBRI_GEN_PHASE_SAMPLE) {
        struct colibri_gen_step step;
        if ((rc = colibri_gen_sample(g, &step, err))) return rc;
        if (on_text && step.len) on_text(user, step.text, step.len);
        if (on_text && step.tail_len) on_text(user, step.tail, step.tail_len);
        if (g->phase == COLIBRI_GEN_PHASE_FEED && (rc = colibri_gen_decode(g, err))) return rc;
    }
    return 0;
}
