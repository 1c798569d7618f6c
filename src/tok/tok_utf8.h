/* tok/tok_utf8.h - UTF-8 checks and repair, and the GPT-2 "byte-level"
 * alphabet. The one UTF-8 module of colibri: the tokenizer, the generator's
 * streamed text and the server's JSON all repair text here.
 *
 * Invalid UTF-8 policy (the whole tokenizer follows it): every maximal
 * invalid subsequence is replaced by U+FFFD, exactly as Python's
 * bytes.decode("utf-8", errors="replace") and the WHATWG decoder do, so a
 * prompt encodes to the ids Hugging Face gives for the same bytes decoded by
 * Python. Callers are told how many replacements happened.
 *
 * Byte-level: each byte 0..255 stands for one printable code point (printable
 * Latin-1 bytes for themselves, the others for U+0100.. in order); vocabulary
 * strings are written in that alphabet. Pure functions, no state.
 */
#ifndef COLIBRI_TOK_UTF8_H
#define COLIBRI_TOK_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if s starts with an
 * invalid byte sequence; *bad gets the length of the maximal invalid
 * subpart to replace (>= 1) in that case. n must be >= 1. */
size_t tok_utf8_valid_len(const unsigned char *s, size_t n, size_t *bad);

/* Number of replacements tok_utf8_sanitize would make (0: s is valid). */
size_t tok_utf8_count_invalid(const char *s, size_t n);

/* Copies s into a new malloc'd NUL-terminated buffer with each invalid
 * subpart replaced by U+FFFD (EF BF BD). *out_len (may be NULL) gets its
 * length. NULL on allocation failure. */
char *tok_utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* The same into out (room for 3n bytes; not NUL-terminated); returns the
 * length written. */
size_t tok_utf8_sanitize_into(const char *s, size_t n, char *out);

/* The length of the longest prefix of s[0..n) that does not end inside a
 * sequence later bytes could still complete: text cut there and repaired
 * piece by piece gives the same result as the whole text repaired at once.
 * Invalid bytes are not waited for. */
size_t tok_utf8_complete_len(const char *s, size_t n);

/* Number of code points in valid UTF-8 s[0..n) (lead bytes counted). */
size_t tok_utf8_n_chars(const char *s, size_t n);

/* Decodes one code point from valid UTF-8; returns its byte length. */
size_t tok_utf8_decode(const unsigned char *s, uint32_t *cp);

/* Writes cp as UTF-8 into out (4 bytes room); returns the length. */
size_t tok_utf8_encode(uint32_t cp, char *out);

/* Byte-level alphabet: the code point standing for byte b, and the byte a
 * code point stands for (-1 when it is not in the alphabet). */
uint32_t tok_bytelevel_cp(unsigned b);
int      tok_bytelevel_byte(uint32_t cp);

/* Converts a byte-level vocabulary string to raw bytes in out (room for n
 * bytes; a byte-level string never has more bytes than its UTF-8 form).
 * Returns the byte count, or -1 if some character is outside the alphabet
 * (Hugging Face then keeps the token's UTF-8 bytes as they are). */
long tok_bytelevel_to_bytes(const char *s, size_t n, char *out);

/* Writes the byte-level form of raw bytes (up to 2 bytes each). Returns the
 * length written to out (room for 2n). */
size_t tok_bytes_to_bytelevel(const char *s, size_t n, char *out);

#endif
