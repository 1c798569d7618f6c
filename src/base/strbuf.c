/* base/strbuf.c - growable byte string; see strbuf.h. */
#include "base/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static int fail(struct strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
    b->failed = 1;
    return COLIBRI_ENOMEM;
}

int base_sb_reserve(struct strbuf *b, size_t extra)
{
    if (b->failed) return COLIBRI_ENOMEM;
    if (extra > (size_t)-1 / 2 - b->n) return fail(b);
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *ns = realloc(b->s, cap);
    if (!ns) return fail(b);
    b->s = ns;
    b->cap = cap;
    return 0;
}

int base_sb_append(struct strbuf *b, const char *p, size_t n)
{
    if (base_sb_reserve(b, n)) return COLIBRI_ENOMEM;
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

int base_sb_puts(struct strbuf *b, const char *s) { return base_sb_append(b, s, strlen(s)); }

int base_sb_vappendf(struct strbuf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    int rc = k < 0 ? COLIBRI_EINVAL : base_sb_reserve(b, (size_t)k);
    if (!rc) {
        vsnprintf(b->s + b->n, (size_t)k + 1, fmt, again);
        b->n += (size_t)k;
    }
    va_end(again);
    return rc;
}

int base_sb_appendf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = base_sb_vappendf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void base_sb_consume(struct strbuf *b, size_t n)
{
    if (b->failed || n == 0) return;
    memmove(b->s, b->s + n, b->n - n);
    b->n -= n;
    b->s[b->n] = 0;
}

void base_sb_clear(struct strbuf *b)
{
    b->n = 0;
    b->failed = 0;
    if (b->s) b->s[0] = 0;
}

void base_sb_free(struct strbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}
