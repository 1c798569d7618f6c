/* tok/tok_utf8.c - UTF-8 validation with WHATWG/Python replacement, and the
 * byte-level alphabet (contract in tok_utf8.h). */
#include "tok/tok_utf8.h"

#include <stdlib.h>
#include <string.h>

/* The allowed range of the second byte for each lead byte (Unicode Table
 * 3-7, "well-formed UTF-8 byte sequences"); later bytes are always 80..BF. */
size_t tok_utf8_valid_len(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned b = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) { need = 2; lo = 0xA0; }
    else if (b == 0xED) { need = 2; hi = 0x9F; }
    else if (b >= 0xE1 && b <= 0xEF) need = 2;
    else if (b == 0xF0) { need = 3; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else if (b == 0xF4) { need = 3; hi = 0x8F; }
    else { *bad = 1; return 0; }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) break;
        unsigned c = s[i];
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (c < l || c > h) break;
    }
    if (i == need + 1) return need + 1;
    *bad = i;   /* the lead plus the continuation bytes that were still valid */
    return 0;
}

size_t tok_utf8_count_invalid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, bad_count = 0;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        size_t bad, v = tok_utf8_valid_len(u + i, n - i, &bad);
        if (v) i += v;
        else { i += bad; bad_count++; }
    }
    return bad_count;
}

size_t tok_utf8_sanitize_into(const char *s, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t bad, v = u[i] < 0x80 ? 1 : tok_utf8_valid_len(u + i, n - i, &bad);
        if (v) {
            memcpy(out + o, s + i, v);
            o += v;
            i += v;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad;
        }
    }
    return o;
}

char *tok_utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    char *out = malloc(3 * n + 1);   /* each replaced byte grows to at most 3 */
    if (!out) return NULL;
    size_t o = tok_utf8_sanitize_into(s, n, out);
    out[o] = 0;
    if (out_len) *out_len = o;
    return out;
}

size_t tok_utf8_complete_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t bad, v = u[i] < 0x80 ? 1 : tok_utf8_valid_len(u + i, n - i, &bad);
        /* a valid start cut off by the end of the text may still complete */
        if (!v && i + bad == n && u[i] >= 0xC2 && u[i] <= 0xF4) return i;
        i += v ? v : bad;
    }
    return n;
}

size_t tok_utf8_n_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

size_t tok_utf8_decode(const unsigned char *s, uint32_t *cp)
{
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    if (s[0] < 0xE0) { *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); return 2; }
    if (s[0] < 0xF0) {
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
          ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}

size_t tok_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = 0xC0 | (cp >> 6); o[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) {
        o[0] = 0xE0 | (cp >> 12); o[1] = 0x80 | ((cp >> 6) & 0x3F); o[2] = 0x80 | (cp & 0x3F);
        return 3;
    }
    o[0] = 0xF0 | (cp >> 18); o[1] = 0x80 | ((cp >> 12) & 0x3F);
    o[2] = 0x80 | ((cp >> 6) & 0x3F); o[3] = 0x80 | (cp & 0x3F);
    return 4;
}

/* GPT-2's bytes_to_unicode(): '!'..'~', '¡'..'¬', '®'..'ÿ' stand for
 * themselves; the remaining 68 bytes, in increasing order, take U+0100.. */
static int self_mapped(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 remapped bytes are 0x00-0x20, 0x7F-0xA0 and 0xAD, in that order. */
uint32_t tok_bytelevel_cp(unsigned b)
{
    if (self_mapped(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67;   /* 0xAD */
}

int tok_bytelevel_byte(uint32_t cp)
{
    if (cp < 0x100) return self_mapped(cp) ? (int)cp : -1;
    uint32_t k = cp - 0x100;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    if (k == 67) return 0xAD;
    return -1;
}

long tok_bytelevel_to_bytes(const char *s, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t bad;
        size_t v = tok_utf8_valid_len(u + i, n - i, &bad);
        if (!v) return -1;
        uint32_t cp;
        tok_utf8_decode(u + i, &cp);
        int b = tok_bytelevel_byte(cp);
        if (b < 0) return -1;
        out[o++] = (char)b;
        i += v;
    }
    return (long)o;
}

size_t tok_bytes_to_bytelevel(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += tok_utf8_encode(tok_bytelevel_cp((unsigned char)s[i]), out + o);
    return o;
}
