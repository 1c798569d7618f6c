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
