#include "cli/textio.h"

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

char *cli_read_text(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    if (f != stdin) fclose(f);
    if (buf && bad) { free(buf); buf = NULL; }
    if (buf) { buf[n] = 0; *len = n; }
    return buf;
}

/* A growing text; `bad` once an allocation failed. */
struct text { char *s; size_t n, cap; int bad; };

static void add(struct text *t, const char *p, size_t k)
{
    if (t->bad) return;
    if (t->n + k + 1 > t->cap) {
        size_t nc = t->cap ? t->cap : 256;
        while (nc < t->n + k + 1) nc *= 2;
        char *ns = realloc(t->s, nc);
        if (!ns) { t->bad = 1; return; }
        t->s = ns;
        t->cap = nc;
    }
    memcpy(t->s + t->n, p, k);
    t->s[t->n += k] = 0;
}

static void add_json_string(struct text *t, const char *s)
{
    add(t, "\"", 1);
    for (; *s; s++) {
        char esc[8];
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c);
        else { esc[0] = (char)c; esc[1] = 0; }
        add(t, esc, strlen(esc));
    }
    add(t, "\"", 1);
}

int cli_chat_render(const colibri_tokenizer *tok, const struct colibri_chat_msg *msgs, size_t n, const char *kwargs,
                    char **text, size_t *len, struct colibri_err *err)
{
    if (!kwargs) return colibri_chat_render(tok, msgs, n, 1, text, len, err);
    struct text j = { 0 };
    add(&j, "[", 1);
    for (size_t i = 0; i < n; i++) {
        const char *open = i ? ",{\"role\":" : "{\"role\":";
        add(&j, open, strlen(open));
        add_json_string(&j, msgs[i].role);
        add(&j, ",\"content\":", strlen(",\"content\":"));
        add_json_string(&j, msgs[i].content ? msgs[i].content : "");
        add(&j, "}", 1);
    }
    add(&j, "]", 1);
    if (j.bad) {
        free(j.s);
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return err->code = COLIBRI_ENOMEM;
    }
    int rc = colibri_chat_render_json(tok, j.s, NULL, kwargs, 1, text, len, err);
    free(j.s);
    if (rc) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "--chat-template-kwargs: %s", err->msg);
        memcpy(err->msg, m, sizeof m);
    }
    return rc;
}

int cli_load_chat_template(colibri_tokenizer *tok, const char *path, struct colibri_err *err)
{
    if (!path) return 0;
    size_t len;
    char *src = cli_read_text(path, &len);
    if (!src) {
        snprintf(err->msg, sizeof err->msg, "--chat-template %s: %s", path, strerror(errno));
        return err->code = COLIBRI_EIO;
    }
    int rc = colibri_tokenizer_set_chat_template(tok, src, len, path, err);
    free(src);
    return rc;
}
