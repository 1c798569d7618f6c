/* serve/sbuf.c - growable byte string; see sbuf.h. */
#include "serve/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct sbuf *b, size_t extra)
{
    if (b->failed) return -1;
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *ns = realloc(b->s, cap);
    if (!ns) {
        free(b->s);
        b->s = NULL;
        b->n = b->cap = 0;
        b->failed = 1;
        return -1;
    }
    b->s = ns;
    b->cap = cap;
    return 0;
}

void sb_append(struct sbuf *b, const char *p, size_t n)
{
    if (reserve(b, n)) return;
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

void sb_puts(struct sbuf *b, const char *s) { sb_append(b, s, strlen(s)); }

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0 || reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

void sb_consume(struct sbuf *b, size_t n)
{
    if (b->failed || n == 0) return;
    memmove(b->s, b->s + n, b->n - n);
    b->n -= n;
    b->s[b->n] = 0;
}

void sb_free(struct sbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}
