/* serve/reqlog.c - the per-request log line; see reqlog.h. */
#include "serve/reqlog.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "serve/sbuf.h"
#include "tok/tok_utf8.h"

#define LOG_FIELD_MAX 200

/* s, cut at LOG_FIELD_MAX bytes, with bytes outside printable ASCII as \xNN. */
static void put_safe(struct sbuf *b, const char *s)
{
    size_t i = 0;
    for (; s[i] && i < LOG_FIELD_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > ' ' && c < 0x7f && c != '\\') sb_append(b, s + i, 1);
        else sb_printf(b, "\\x%02x", c);
    }
    if (s[i]) sb_puts(b, "...");
}

/* name="text" with text JSON-escaped (invalid UTF-8 repaired first). */
static void put_text(struct sbuf *b, const char *name, const char *text, size_t n)
{
    char *clean = tok_utf8_sanitize(text, n, NULL);
    cJSON *str = clean ? cJSON_CreateString(clean) : NULL;
    char *js = str ? cJSON_PrintUnformatted(str) : NULL;
    sb_printf(b, " %s=%s", name, js ? js : "\"\"");
    free(js);
    cJSON_Delete(str);
    free(clean);
}

char *serve_reqlog_format(const struct serve_reqlog *r)
{
    struct sbuf b = { 0 };
    put_safe(&b, r->method);
    sb_puts(&b, " ");
    put_safe(&b, r->path);
    sb_printf(&b, " %d", r->status);
    struct job *j = (struct job *)r->job;
    if (j) {
        pthread_mutex_lock(&j->mu);
        int out = 0;
        for (int i = 0; i < j->n_ev; i++) out += j->ev[i].id >= 0;
        if (j->finish != JOB_RUNNING && j->n_gen > out) out = j->n_gen;  /* an end-of-generation token has no event */
        /* still running when its request ended: the client left, and leaving cancels it */
        const char *fin = j->finish == JOB_RUNNING ? "cancelled" : job_finish_name(j->finish);
        sb_printf(&b, " in=%d cached=%d out=%d finish=%s", j->n_prompt, j->n_cached, out, fin);
        if (j->t_first > 0) sb_printf(&b, " ttft_ms=%.1f", (j->t_first - j->t_submit) * 1e3);
        sb_printf(&b, " total_ms=%.1f", (r->t_done - r->t_arrival) * 1e3);
        if (r->log_texts) {
            char *p = NULL;
            size_t n = 0;
            if (j->n_prompt > 0 && colibri_tokenizer_decode(r->tok, j->prompt, (size_t)j->n_prompt, 0, &p, &n, NULL))
                p = NULL, n = 0;
            put_text(&b, "prompt", p ? p : "", n);
            free(p);
            struct sbuf reply = { 0 };
            for (int i = 0; i < j->n_ev; i++) sb_append(&reply, j->ev[i].text, j->ev[i].len);
            put_text(&b, "reply", reply.s ? reply.s : "", reply.n);
            sb_free(&reply);
        }
        pthread_mutex_unlock(&j->mu);
    } else {
        sb_printf(&b, " total_ms=%.1f", (r->t_done - r->t_arrival) * 1e3);
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
