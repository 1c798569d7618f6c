/* cli/generate.c - the shared generation loop (contract in generate.h). */
#include "cli/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct textbuf { char *p; size_t n, cap; };

static void tb_add(struct textbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? 2 * b->cap : 256;
        while (ncap < b->n + n + 1) ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) return;   /* the returned text is then shorter; the stream is unaffected */
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* Passes detokenized bytes through the stop matcher to out. Returns 1 on a stop. */
static int emit(colibri_stop *stop, const char *s, size_t n, FILE *out, struct textbuf *tb)
{
    const char *o = s;
    size_t on = n;
    int stopped = 0;
    if (stop) stopped = colibri_stop_feed(stop, s, n, &o, &on, NULL) == 1;
    if (on) {
        fwrite(o, 1, on, out);
        fflush(out);
        tb_add(tb, o, on);
    }
    return stopped;
}

int gen_run(colibri_session *s, const colibri_tokenizer *tok, colibri_sampler *smp, colibri_stop *stop,
            int vocab, const int32_t *prompt, int n_prompt, int n_predict, FILE *out, char **text,
            struct gen_stats *st, struct colibri_err *err)
{
    memset(st, 0, sizeof *st);
    st->n_prompt = n_prompt;
    int n_ctx = colibri_session_n_ctx(s);
    if (n_prompt <= 0) {
        err->code = COLIBRI_EINVAL;
        snprintf(err->msg, sizeof err->msg, "the prompt is empty");
        return COLIBRI_EINVAL;
    }
    if (n_prompt >= n_ctx) {
        err->code = COLIBRI_ERANGE;
        snprintf(err->msg, sizeof err->msg,
                 "the prompt is %d tokens but the context holds %d (and one more is needed to generate); "
                 "shorten it or raise --ctx", n_prompt, n_ctx);
        return COLIBRI_ERANGE;
    }
    float *logits = malloc((size_t)vocab * sizeof *logits);
    colibri_detok *dt = NULL;
    struct textbuf tb = { 0 };
    int rc = logits ? colibri_detok_new(tok, 1, &dt, err) : COLIBRI_ENOMEM;
    if (rc) { free(logits); return rc; }

    /* Keep the cached prefix; at least the last prompt token is fed again so it yields logits. */
    int keep = colibri_session_common_prefix(s, prompt, n_prompt);
    if (keep >= n_prompt) keep = n_prompt - 1;
    double t0 = now();
    rc = colibri_session_truncate(s, keep, err);
    if (!rc) rc = colibri_session_prefill(s, prompt + keep, n_prompt - keep, logits, 0, err);
    st->t_prefill = now() - t0;
    st->n_prefilled = n_prompt - keep;
    for (int i = 0; i < n_prompt; i++) colibri_sampler_accept(smp, prompt[i]);

    /* Models pad their vocabulary past the tokenizer's (DeepSeek-V3: 129280 vs
     * 128815); those ids have no text and must never be drawn. */
    int n_text = colibri_tokenizer_n_vocab(tok);
    st->why = "limit";
    t0 = now();
    int stopped = 0;
    for (int i = 0; !rc && i < n_predict; i++) {
        for (int v = n_text; v < vocab; v++) logits[v] = -INFINITY;
        int32_t t = colibri_sampler_sample(smp, logits, err);
        if (t < 0) { rc = t; break; }
        colibri_sampler_accept(smp, t);
        int eog = colibri_tokenizer_is_eog(tok, t);
        if (!eog) {
            const char *p;
            size_t pn;
            if ((rc = colibri_detok_push(dt, t, &p, &pn, err))) break;
            stopped = emit(stop, p, pn, out, &tb);
        }
        /* The end token is fed too (when it fits), so the next chat turn,
         * which renders it after the reply, finds it in the cache. */
        if (colibri_session_pos(s) >= n_ctx) { st->why = "context full"; break; }
        int last = eog || stopped || i + 1 == n_predict;
        rc = colibri_session_decode(s, t, last ? NULL : logits, err);
        st->n_gen++;
        if (eog) { st->why = "eos"; break; }
        if (stopped) { st->why = "stop string"; break; }
    }
    st->t_decode = now() - t0;
    if (!stopped) {
        const char *p;
        size_t pn;
        colibri_detok_flush(dt, &p, &pn);
        if (pn) stopped = emit(stop, p, pn, out, &tb);
        if (stop && !stopped) {
            colibri_stop_flush(stop, &p, &pn);
            if (pn) { fwrite(p, 1, pn, out); tb_add(&tb, p, pn); }
        }
    }
    fflush(out);
    colibri_detok_free(dt);
    free(logits);
    if (text && !rc) *text = tb.p ? tb.p : calloc(1, 1);
    else free(tb.p);
    return rc;
}

void gen_print_stats(FILE *f, const struct gen_stats *st)
{
    double pre = st->t_prefill > 0 ? st->n_prefilled / st->t_prefill : 0.0;
    double dec = st->t_decode > 0 ? st->n_gen / st->t_decode : 0.0;
    fprintf(f, "prefill %d tok (%d cached) in %.3f s (%.1f tok/s), decode %d tok in %.3f s (%.1f tok/s), "
            "stopped by %s\n", st->n_prefilled, st->n_prompt - st->n_prefilled, st->t_prefill, pre, st->n_gen,
            st->t_decode, dec, st->why);
}
