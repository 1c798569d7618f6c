/* base/strbuf.h - a growable byte string for text built piece by piece
 * (responses, prompts, grammars, generated text).
 *
 * Zero-initialise (struct strbuf b = {0}). Each call returns 0, or
 * COLIBRI_ENOMEM when an allocation fails: then the buffer is freed, `failed`
 * stays set and every later call does nothing and fails too, so a caller may
 * build in many steps and check once at the end. b.s is NUL-terminated
 * whenever it is non-NULL (NULL until the first byte, and after a failure).
 * The caller owns b.s: base_sb_free(), or take it and zero the struct. */
#ifndef COLIBRI_BASE_STRBUF_H
#define COLIBRI_BASE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct strbuf { char *s; size_t n, cap; int failed; };

/* Room for `extra` more bytes and the NUL without another allocation. */
int base_sb_reserve(struct strbuf *b, size_t extra);
int base_sb_append(struct strbuf *b, const char *p, size_t n);
int base_sb_puts(struct strbuf *b, const char *s);
__attribute__((format(printf, 2, 3))) int base_sb_appendf(struct strbuf *b, const char *fmt, ...);
__attribute__((format(printf, 2, 0))) int base_sb_vappendf(struct strbuf *b, const char *fmt, va_list ap);
/* Drops the first n bytes (n <= b->n). */
void base_sb_consume(struct strbuf *b, size_t n);
/* Empties it, keeping the allocation, and clears `failed`. */
void base_sb_clear(struct strbuf *b);
void base_sb_free(struct strbuf *b);

#endif
