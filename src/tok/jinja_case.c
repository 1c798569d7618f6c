/* tok/jinja_case.c - Python's str case methods over UTF-8 strings (upper,
 * lower with its final-sigma rule, title, capitalize, isupper, islower) and
 * Jinja's |title filter, on the tables of tok_unicase.h (declared in
 * jinja_internal.h). Bytes that are not UTF-8 pass through unchanged. */
#include <string.h>

#include "base/err.h"
#include "tok/jinja_internal.h"
#include "tok/tok_unicase.h"
#include "tok/tok_utf8.h"

#define RAW_BYTE 0x110000u   /* RAW_BYTE + b: an undecodable byte b, kept as it is */

static uint32_t *decode(struct jctx *c, const struct jstr *s, size_t *n)
{
    uint32_t *cp = ja_alloc(&c->arena, (s->n + 1) * sizeof *cp);
    if (!cp) jinja_fail(c, COLIBRI_ENOMEM, "rendering needs more than %zu bytes of memory", c->lim.max_memory);
    size_t k = 0;
    for (size_t i = 0; i < s->n;) {
        size_t bad = 0, len = tok_utf8_valid_len((const unsigned char *)s->p + i, s->n - i, &bad);
        if (len) { tok_utf8_decode((const unsigned char *)s->p + i, &cp[k++]); i += len; }
        else { for (size_t b = 0; b < bad; b++) cp[k++] = RAW_BYTE + (unsigned char)s->p[i + b]; i += bad; }
    }
    *n = k;
    return cp;
}

static void emit(struct jctx *c, struct jbuf *b, const uint32_t *cp, int n)
{
    for (int i = 0; i < n; i++) {
        char u[4];
        if (cp[i] >= RAW_BYTE) { u[0] = (char)(cp[i] - RAW_BYTE); jbuf_add(c, b, u, 1); }
        else jbuf_add(c, b, u, tok_utf8_encode(cp[i], u));
    }
}

static int has(uint32_t cp, unsigned flag) { return cp < RAW_BYTE && (tok_uc_props(cp) & flag); }

/* CPython's lower() of cp[i] within cp[lo..hi): a capital sigma is final (ς)
 * after a cased letter and not before one, case-ignorables skipped. */
static int lower_at(const uint32_t *cp, size_t lo, size_t hi, size_t i, uint32_t out[3])
{
    if (cp[i] != 0x3A3) return cp[i] >= RAW_BYTE ? (out[0] = cp[i], 1) : tok_uc_map(cp[i], TOK_UC_TO_LOWER, out);
    size_t j = i;
    while (j > lo && has(cp[j - 1], TOK_UC_IGNORABLE)) j--;
    int final = j > lo && has(cp[j - 1], TOK_UC_CASED);
    if (final) {
        j = i + 1;
        while (j < hi && has(cp[j], TOK_UC_IGNORABLE)) j++;
        final = j == hi || !has(cp[j], TOK_UC_CASED);
    }
    out[0] = final ? 0x3C2 : 0x3C3;
    return 1;
}

static int map_at(uint32_t cp, enum tok_uc_case which, uint32_t out[3])
{
    if (cp >= RAW_BYTE) { out[0] = cp; return 1; }
    return tok_uc_map(cp, which, out);
}

/* Python's str.isspace() of one code point, and the other characters that
 * start a word for Jinja's |title (its regex ([-\s({\[<]+)). */
static int jinja_word_sep(uint32_t cp)
{
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || cp == ' ' ||
           (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

struct jv tok_jinja_case(struct jctx *c, const struct jstr *s, enum jcase mode)
{
    size_t n;
    uint32_t *cp = decode(c, s, &n), m[3];
    struct jbuf b = { 0 };
    int prev_cased = 0;
    size_t word = 0, end = 0;   /* JCASE_JINJA_TITLE: the current item is cp[word..end) */
    for (size_t i = 0; i < n; i++) {
        int k;
        switch (mode) {
        case JCASE_UPPER: k = map_at(cp[i], TOK_UC_TO_UPPER, m); break;
        case JCASE_LOWER: k = lower_at(cp, 0, n, i, m); break;
        case JCASE_CAPITALIZE: k = i ? lower_at(cp, 0, n, i, m) : map_at(cp[i], TOK_UC_TO_TITLE, m); break;
        case JCASE_TITLE:
            /* str.title(): title-case after an uncased character, lower-case after a cased one */
            k = prev_cased ? lower_at(cp, 0, n, i, m) : map_at(cp[i], TOK_UC_TO_TITLE, m);
            prev_cased = has(cp[i], TOK_UC_CASED);
            break;
        default:
            /* Jinja: re.split on runs of separators, then item[0].upper() + item[1:].lower()
             * for each item, separators included (they have no case) */
            if (i == 0 || jinja_word_sep(cp[i]) != jinja_word_sep(cp[i - 1])) {
                word = end = i;
                while (end < n && jinja_word_sep(cp[end]) == jinja_word_sep(cp[i])) end++;
                k = map_at(cp[i], TOK_UC_TO_UPPER, m);
                break;
            }
            k = lower_at(cp, word + 1, end, i, m);
            break;
        }
        emit(c, &b, m, k);
    }
    return jbuf_take(c, &b);
}

int tok_jinja_case_test(struct jctx *c, const struct jstr *s, int want_upper)
{
    /* str.islower(): no upper or title case letter and at least one lower
     * case one; isupper() the converse */
    size_t n;
    const uint32_t *cp = decode(c, s, &n);
    unsigned same = want_upper ? TOK_UC_UPPER : TOK_UC_LOWER, other = want_upper ? TOK_UC_LOWER : TOK_UC_UPPER;
    int cased = 0;
    for (size_t i = 0; i < n; i++) {
        if (has(cp[i], other | TOK_UC_TITLE)) return 0;
        if (has(cp[i], same)) cased = 1;
    }
    return cased;
}
