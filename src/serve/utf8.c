/* serve/utf8.c - see utf8.h. */
#include "serve/utf8.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence starting at s[0..n) (1..4), 0 if s[0] starts
 * an invalid sequence, or -k if the k available bytes are a valid but
 * incomplete start. Follows the Unicode table of well-formed sequences
 * (no overlongs, no surrogates, nothing above U+10FFFF). */
static int seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n) return -i;
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    }
    return need;
}

size_t utf8_complete_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        int k = seq_len(u + i, n - i);
        if (k < 0) return i;        /* could still be completed */
        i += k > 0 ? (size_t)k : 1;
    }
    return n;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)s;
    char *out = malloc(3 * n + 1);     /* each byte becomes at most 3 */
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        int k = seq_len(u + i, n - i);
        if (k > 0) {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
            continue;
        }
        /* A maximal invalid subpart: a truncated valid prefix counts as one. */
        size_t skip = k < 0 ? (size_t)-k : 1;
        if (k == 0 && u[i] >= 0xC2 && u[i] <= 0xF4) {
            /* how many leading bytes form a valid prefix before the bad one */
            size_t j = 1;
            while (i + j < n && j < 4) {
                unsigned char tmp[4] = { 0 };
                memcpy(tmp, u + i, j + 1);
                if (seq_len(tmp, j + 1) == 0) break;
                j++;
            }
            skip = j;
        }
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i += skip;
    }
    out[o] = 0;
    if (out_len) *out_len = o;
    return out;
}

size_t utf8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}
