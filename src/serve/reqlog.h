/* serve/reqlog.h - the one line `colibri serve` logs per request on stderr:
 *
 *   [serve] POST /v1/chat/completions 200 in=12 cached=5 out=30 finish=stop ttft_ms=45.1 total_ms=812.3
 *   [serve] GET /health 200 total_ms=0.1
 *
 * in/cached/out are prompt tokens, prompt tokens reused from the slot's cache
 * and generated tokens; finish is stop, length, error or cancelled (also
 * when the client left before the end); ttft_ms is arrival to first token. Texts are logged
 * only when asked (--log-prompts), as JSON strings: prompt="..." (the
 * prompt's tokens decoded) reply="...". Method and path are cut at 200 bytes
 * and anything unprintable in them is written as \xNN, so a client cannot
 * forge a line. Thread-safe. Internal to src/serve/. */
#ifndef COLIBRI_SERVE_REQLOG_H
#define COLIBRI_SERVE_REQLOG_H

#include "colibri.h"
#include "serve/job.h"

struct serve_reqlog {
    const char *method, *path;
    int status;                 /* the response's HTTP status; 0 if none was sent */
    const struct job *job;      /* the generation, or NULL (not locked by the caller) */
    double t_arrival, t_done;   /* base_now_sec() at the request's first byte and at completion */
    const colibri_tokenizer *tok;
    int log_texts;
};

/* The line without its tag and newline: malloc'd, NULL when out of memory. */
char *serve_reqlog_format(const struct serve_reqlog *r);
/* Formats and writes the line to stderr in one piece. */
void serve_reqlog_write(const struct serve_reqlog *r);

#endif
