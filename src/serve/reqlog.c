/* serve/reqlog.c - the per-request log line; see reqlog.h. */
#include "serve/reqlog.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "base/strbuf.h"
#include "tok/tok_utf8.h"

#define LOG_FIELD_MAX 200

/* s, cut at LOG_FIELD_MAX bytes, with bytes outside printable ASCII as \xNN. */
static void put_safe(struct strbuf *b, const char *s)
{
    size_t i = 0;
    for (; s[i] && i < LOG_FIELD_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > ' ' && c < 0x7f && c != '\\') base_sb_append(b, s + i, 1);
        else base_sb_appendf(b, "\\x%02x", c);
    }
    if (s[i]) base_sb_puts(b, "...");
}

/* name="text" with text JSON-escaped (invalid UTF-8 repaired first). */
static void put_text(struct strbuf *b, const char *name, const char *text, size_t n)
{
    char *clean = tok_utf8_sanitize(text, n, NULL);
    cJSON *str = clean ? cJSON_CreateString(clean) : NULL;
    char *js = str ? cJSON_PrintUnformatted(str) : NULL;
    base_sb_appendf(b, " %s=%s", name, js ? js : "\"\"");
    free(js);
    cJSON_Delete(str);
    free(clean);
}

/* The line's fields for a request of n > 1 choices: tokens out summed, each
 * choice's reply. The group's mu and its choices' are taken one at a time
 * (job.h). */
static void group_line(struct strbuf *b, const struct serve_reqlog *r, struct job *g)
{
    pthread_mutex_lock(&g->mu);
    enum job_finish g_fin = g->finish;
    pthread_mutex_unlock(&g->mu);
    struct strbuf fin = { 0 };            /* each choice's finish, or the request's failure */
    if (g_fin == JOB_RUNNING || g_fin == JOB_FIN_CANCELLED) base_sb_puts(&fin, "cancelled");
    else if (g_fin == JOB_FIN_ERROR) base_sb_puts(&fin, "error");
    int out = 0, cached = 0;
    double t_first = 0;
    for (int k = 0; k < g->n_choices; k++) {
        struct job *c = g->choice[k];
        pthread_mutex_lock(&c->mu);
        int n = 0;
        for (int i = 0; i < c->n_ev; i++) n += c->ev[i].id >= 0;
        if (c->finish != JOB_RUNNING && c->n_gen > n) n = c->n_gen;
        out += n;
        if (k == 0) cached = c->n_cached, t_first = c->t_first;
        if (g_fin == JOB_FIN_STOP) base_sb_appendf(&fin, "%s%s", k ? "," : "", job_finish_name(c->finish));
        pthread_mutex_unlock(&c->mu);
    }
    base_sb_appendf(b, " in=%d cached=%d out=%d n=%d finish=%s", g->n_prompt, cached, out, g->n_choices,
              fin.s && !fin.failed ? fin.s : "?");
    base_sb_free(&fin);
    if (t_first > 0) base_sb_appendf(b, " ttft_ms=%.1f", (t_first - g->t_submit) * 1e3);
    base_sb_appendf(b, " total_ms=%.1f", (r->t_done - r->t_arrival) * 1e3);
    if (!r->log_texts) return;
    char *p = NULL;
    size_t n = 0;
    if (g->n_prompt > 0 && colibri_tokenizer_decode(r->tok, g->prompt, (size_t)g->n_prompt, 0, &p, &n, NULL))
        p = NULL, n = 0;
    put_text(b, "prompt", p ? p : "", n);
    free(p);
    for (int k = 0; k < g->n_choices; k++) {
        struct job *c = g->choice[k];
        struct strbuf reply = { 0 };
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < c->n_ev; i++) base_sb_append(&reply, c->ev[i].text, c->ev[i].len);
        pthread_mutex_unlock(&c->mu);
        char name[24];
        snprintf(name, sizeof name, k ? "reply_%d" : "reply", k);
        put_text(b, name, reply.s ? reply.s : "", reply.n);
        base_sb_free(&reply);
    }
}

char *serve_reqlog_format(const struct serve_reqlog *r)
{
    struct strbuf b = { 0 };
    put_safe(&b, r->method);
    base_sb_puts(&b, " ");
    put_safe(&b, r->path);
    base_sb_appendf(&b, " %d", r->status);
    struct job *j = (struct job *)r->job;
    if (j && j->n_choices) {
        group_line(&b, r, j);
    } else if (j) {
        pthread_mutex_lock(&j->mu);
        int out = 0;
        for (int i = 0; i < j->n_ev; i++) out += j->ev[i].id >= 0;
        if (j->finish != JOB_RUNNING && j->n_gen > out) out = j->n_gen;  /* an end-of-generation token has no event */
        /* still running when its request ended: the client left, and leaving cancels it */
        const char *fin = j->finish == JOB_RUNNING ? "cancelled" : job_finish_name(j->finish);
        base_sb_appendf(&b, " in=%d cached=%d out=%d finish=%s", j->n_prompt, j->n_cached, out, fin);
        if (j->t_first > 0) base_sb_appendf(&b, " ttft_ms=%.1f", (j->t_first - j->t_submit) * 1e3);
        base_sb_appendf(&b, " total_ms=%.1f", (r->t_done - r->t_arrival) * 1e3);
        if (r->log_texts) {
            char *p = NULL;
            size_t n = 0;
            if (j->n_prompt > 0 && colibri_tokenizer_decode(r->tok, j->prompt, (size_t)j->n_prompt, 0, &p, &n, NULL))
                p = NULL, n = 0;
            put_text(&b, "prompt", p ? p : "", n);
            free(p);
            struct strbuf reply = { 0 };
            for (int i = 0; i < j->n_ev; i++) base_sb_append(&reply, j->ev[i].text, j->ev[i].len);
            put_text(&b, "reply", reply.s ? reply.s : "", reply.n);
            base_sb_free(&reply);
        }
        pthread_mutex_unlock(&j->mu);
    } else {
        base_sb_appendf(&b, " total_ms=%.1f", (r->t_done - r->t_arrival) * 1e3);
    }
    return b.failed ? NULL : b.s;
}

void serve_reqlog_write(const struct serve_reqlog *r)
{
    char *line = serve_reqlog_format(r);
    if (!line) return;
    flockfile(stderr);          /* one line, even with other threads logging */
    base_log_msg("serve", "%s", line);
    funlockfile(stderr);
    free(line);
}
