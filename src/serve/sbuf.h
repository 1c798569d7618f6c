/* serve/sbuf.h - a growable byte string for building responses.
 *
 * Zero-initialise (struct sbuf b = {0}). After any allocation failure the
 * buffer is freed and `failed` stays set, so callers check once at the end.
 * b.s is NUL-terminated whenever b.n > 0 and not failed. The caller owns b.s
 * (free it, or take it and reset the struct). */
#ifndef COLIBRI_SERVE_SBUF_H
#define COLIBRI_SERVE_SBUF_H

#include <stddef.h>

struct sbuf { char *s; size_t n, cap; int failed; };

void sb_append(struct sbuf *b, const char *p, size_t n);
void sb_puts(struct sbuf *b, const char *s);
__attribute__((format(printf, 2, 3))) void sb_printf(struct sbuf *b, const char *fmt, ...);
/* Drops the first n bytes (n <= b->n). */
void sb_consume(struct sbuf *b, size_t n);
void sb_free(struct sbuf *b);

#endif
