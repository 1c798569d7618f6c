/* serve/utf8.h - UTF-8 helpers for text that goes into JSON: generated text
 * is arbitrary bytes (a model may emit half a character, or bytes that are
 * never valid), while JSON strings must be valid UTF-8. Pure functions. */
#ifndef COLIBRI_SERVE_UTF8_H
#define COLIBRI_SERVE_UTF8_H

#include <stddef.h>

/* The length of the longest prefix of s[0..n) that does not end inside a
 * UTF-8 sequence that could still be completed by later bytes. */
size_t utf8_complete_len(const char *s, size_t n);

/* A new malloc'd NUL-terminated copy of s[0..n) with every invalid sequence
 * replaced by U+FFFD (one per maximal invalid subpart, as Python's
 * errors="replace"); *out_len (may be NULL) gets its length. NULL when out
 * of memory. */
char *utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* Number of code points in valid UTF-8 s[0..n). */
size_t utf8_count(const char *s, size_t n);

#endif
