/* sample/grammar_regex.c - JSON Schema `pattern` to GBNF (contract and the
 * subset in grammar_schema_parts.h).
 *
 * A recursive-descent parser writes GBNF as it reads: alternation, groups
 * and quantifiers map one to one. Every character the pattern matches is
 * written as JSON writes it inside a string: '"' and '\' escaped, the
 * control characters \n \t \r \b \f as their short escapes and the others as
 * \u00XX, so the grammar's output is a valid JSON string whose value the
 * pattern matches. A character class becomes a GBNF class of the
 * characters JSON leaves as they are, plus an escape for each one it must
 * escape. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sample/grammar_schema_parts.h"

#define MAX_RANGES 64

struct rx {
    const char *s, *p;          /* the pattern, the next character */
    struct strbuf *o;
    int depth, top_alt;         /* group depth; a '|' outside any group was seen */
    char *why;
    size_t why_n;
    int failed;
};

struct cset { int neg, n; uint32_t lo[MAX_RANGES], hi[MAX_RANGES]; };

static int fail(struct rx *r, const char *msg)
{
    if (!r->failed) snprintf(r->why, r->why_n, "pattern at offset %d: %s", (int)(r->p - r->s), msg);
    r->failed = 1;
    return -1;
}

/* One UTF-8 code point at *p (advancing it); invalid bytes read as themselves. */
static uint32_t utf8_next(const char **p)
{
    const unsigned char *s = (const unsigned char *)*p;
    uint32_t c = s[0];
    int n = c < 0x80 ? 0 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    if (n) c &= 0x3f >> n;
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xc0) != 0x80) { *p += 1; return s[0]; }
        c = c << 6 | (s[i] & 0x3f);
    }
    *p += n + 1;
    return c;
}

/* GBNF for code point c as JSON writes it in a string. */
static void json_char(struct strbuf *o, uint32_t c)
{
    static const char SHORT[] = "\b\f\n\r\t", LETTER[] = "bfnrt";
    const char *k = c && c < 0x20 ? strchr(SHORT, (int)c) : NULL;
    if (c == '"') base_sb_puts(o, "\"\\\\\\\"\"");
    else if (c == '\\') base_sb_puts(o, "\"\\\\\\\\\"");
    else if (k) base_sb_appendf(o, "\"\\\\%c\"", LETTER[k - SHORT]);
    else if (c < 0x20) base_sb_appendf(o, "\"\\\\u00%02x\"", (unsigned)c);
    else base_sb_appendf(o, "[\\U%08x]", (unsigned)c);
}

static int add_range(struct rx *r, struct cset *cs, uint32_t lo, uint32_t hi)
{
    if (cs->n == MAX_RANGES) return fail(r, "a character class of more than 64 ranges");
    cs->lo[cs->n] = lo;
    cs->hi[cs->n++] = hi;
    return 0;
}

/* \d \w \s and their negations as ranges; 0 when c is not one of them. */
static int class_escape(struct rx *r, char c, struct cset *cs)
{
    switch (c) {
    case 'd': return add_range(r, cs, '0', '9') ? -1 : 1;
    case 'w': return add_range(r, cs, '0', '9') || add_range(r, cs, 'A', 'Z') || add_range(r, cs, 'a', 'z') ||
                     add_range(r, cs, '_', '_') ? -1 : 1;
    case 's': return add_range(r, cs, '\t', '\r') || add_range(r, cs, ' ', ' ') || add_range(r, cs, 0xa0, 0xa0) ||
                     add_range(r, cs, 0xfeff, 0xfeff) ? -1 : 1;
    default: return 0;
    }
}

/* An escaped single character after the backslash (*p advanced), or -1. */
static long escaped_char(struct rx *r)
{
    char c = *r->p++;
    unsigned v = 0;
    int n = 0;
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': n = 2; break;
    case 'u': n = 4; break;
    case 'b': case 'B': return fail(r, "word boundaries (\\b, \\B) are not supported");
    case 'k': return fail(r, "named backreferences are not supported");
    case 'p': case 'P': return fail(r, "Unicode property classes (\\p, \\P) are not supported");
    default:
        if (c >= '1' && c <= '9') return fail(r, "backreferences are not supported");
        if (!c || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return fail(r, "an unknown escape");
        r->p--;
        return (long)utf8_next(&r->p);
    }
    for (int i = 0; i < n; i++) {
        char h = *r->p++;
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return fail(r, "a malformed \\x or \\u escape");
        v = v * 16 + (unsigned)d;
    }
    return v;
}

/* GBNF for a set: the characters JSON writes as they are in one class,
 * then each one it escapes, as an escape. */
static void emit_set(struct strbuf *o, const struct cset *cs)
{
    /* sorted, merged ranges; then their complement when negated */
    uint32_t lo[MAX_RANGES + 1], hi[MAX_RANGES + 1];
    int n = 0;
    int used[MAX_RANGES] = { 0 };
    for (int k = 0; k < cs->n; k++) {
        int best = -1;
        for (int i = 0; i < cs->n; i++) if (!used[i] && (best < 0 || cs->lo[i] < cs->lo[best])) best = i;
        used[best] = 1;
        if (n && cs->lo[best] <= hi[n - 1] + 1) { if (cs->hi[best] > hi[n - 1]) hi[n - 1] = cs->hi[best]; }
        else { lo[n] = cs->lo[best]; hi[n++] = cs->hi[best]; }
    }
    if (cs->neg) {
        uint32_t clo[MAX_RANGES + 1], chi[MAX_RANGES + 1], next = 0;
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (lo[i] > next) { clo[m] = next; chi[m++] = lo[i] - 1; }
            next = hi[i] + 1;
        }
        if (next <= 0x10FFFF) { clo[m] = next; chi[m++] = 0x10FFFF; }
        memcpy(lo, clo, sizeof lo);
        memcpy(hi, chi, sizeof hi);
        n = m;
    }
    int alts = 0;
    base_sb_puts(o, "( ");
    struct strbuf cls = { 0 };
    base_sb_puts(&cls, "");
    for (int i = 0; i < n; i++)     /* the unescaped part: all but '"', '\' and the controls */
        for (uint32_t x = lo[i] < 0x20 ? 0x20 : lo[i]; x <= hi[i];) {
            uint32_t y = hi[i];
            if (x == '"' || x == '\\') { x++; continue; }
            if (x < '"' && y >= '"') y = '"' - 1;
            else if (x < '\\' && y >= '\\') y = '\\' - 1;
            base_sb_appendf(&cls, "\\U%08x-\\U%08x", (unsigned)x, (unsigned)y);
            x = y + 1;
        }
    if (cls.n) { base_sb_appendf(o, "[%s]", cls.s); alts++; }
    base_sb_free(&cls);
    for (int i = 0; i < n; i++) {
        for (uint32_t c = lo[i]; c <= hi[i] && c < 0x20; c++) {
            base_sb_puts(o, alts++ ? " | " : "");
            json_char(o, c);
        }
        if (lo[i] <= '"' && '"' <= hi[i]) { base_sb_puts(o, alts++ ? " | " : ""); json_char(o, '"'); }
        if (lo[i] <= '\\' && '\\' <= hi[i]) { base_sb_puts(o, alts++ ? " | " : ""); json_char(o, '\\'); }
    }
    if (!alts) base_sb_puts(o, "[^\\x00-\\U0010FFFF]");    /* matches nothing: the compiler refuses it */
    base_sb_puts(o, " )");
}

static int parse_alt(struct rx *r);

static int parse_class(struct rx *r)
{
    struct cset cs = { 0 };
    if (*r->p == '^') { cs.neg = 1; r->p++; }
    int first = 1;
    while (*r->p && (*r->p != ']' || first)) {
        first = 0;
        uint32_t a;
        if (*r->p == '\\') {
            r->p++;
            int k = class_escape(r, *r->p, &cs);
            if (k < 0) return -1;
            if (k) { r->p++; continue; }
            if (*r->p >= 'A' && *r->p <= 'Z' && strchr("DWS", *r->p)) return fail(r, "\\D, \\W or \\S inside a class");
            long e = escaped_char(r);
            if (e < 0) return -1;
            a = (uint32_t)e;
        } else {
            a = utf8_next(&r->p);
        }
        uint32_t b = a;
        if (r->p[0] == '-' && r->p[1] && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                long e = escaped_char(r);
                if (e < 0) return -1;
                b = (uint32_t)e;
            } else {
                b = utf8_next(&r->p);
            }
            if (b < a) return fail(r, "a class range that runs backwards");
        }
        if (add_range(r, &cs, a, b)) return -1;
    }
    if (*r->p != ']') return fail(r, "an unterminated character class");
    r->p++;
    emit_set(r->o, &cs);
    return 0;
}

static int parse_atom(struct rx *r)
{
    char c = *r->p;
    if (c == '(') {
        r->p++;
        if (*r->p == '?') {
            if (r->p[1] != ':') return fail(r, "lookaround and named groups are not supported");
            r->p += 2;
        }
        base_sb_puts(r->o, "( ");
        r->depth++;
        if (parse_alt(r)) return -1;
        r->depth--;
        if (*r->p != ')') return fail(r, "a group without its ')'");
        r->p++;
        base_sb_puts(r->o, " )");
        return 0;
    }
    if (c == '[') { r->p++; return parse_class(r); }
    if (c == '.') {
        r->p++;
        struct cset cs = { .neg = 1, .n = 2, .lo = { '\n', '\r' }, .hi = { '\n', '\r' } };
        emit_set(r->o, &cs);
        return 0;
    }
    if (c == '\\') {
        r->p++;
        struct cset cs = { 0 };
        char k = *r->p;
        char lower = k >= 'A' && k <= 'Z' ? (char)(k - 'A' + 'a') : k;
        int is = strchr("dws", lower) && k ? class_escape(r, lower, &cs) : 0;
        if (is < 0) return -1;
        if (is) {
            r->p++;
            cs.neg = k != lower;
            emit_set(r->o, &cs);
            return 0;
        }
        long e = escaped_char(r);
        if (e < 0) return -1;
        json_char(r->o, (uint32_t)e);
        return 0;
    }
    if (c == '^' || c == '$') return fail(r, "an anchor (^ or $) inside the pattern (only at its ends)");
    if (strchr("*+?{", c)) return fail(r, "a quantifier with nothing before it");
    if (c == ')' || c == ']' || c == '}') return fail(r, "an unmatched bracket");
    json_char(r->o, utf8_next(&r->p));
    return 0;
}

static int parse_quant(struct rx *r)
{
    char c = *r->p;
    if (c == '*' || c == '+' || c == '?') {
        base_sb_appendf(r->o, "%c", c);
        r->p++;
    } else if (c == '{') {
        int lo = -1, hi = -1, n = 0;
        if (sscanf(r->p, "{%d,%d}%n", &lo, &hi, &n) == 2 && n) ;
        else if ((n = 0, sscanf(r->p, "{%d,}%n", &lo, &n) == 1 && n)) hi = -1;
        else if ((n = 0, sscanf(r->p, "{%d}%n", &lo, &n) == 1 && n)) hi = lo;
        else return fail(r, "a malformed {n,m} quantifier");
        if (lo < 0 || lo > 1000 || hi > 1000 || (hi >= 0 && hi < lo)) return fail(r, "a {n,m} quantifier outside 0..1000");
        r->p += n;
        if (hi < 0) base_sb_appendf(r->o, "{%d,}", lo);
        else base_sb_appendf(r->o, "{%d,%d}", lo, hi);
    } else {
        return 0;
    }
    if (*r->p == '?') r->p++;   /* lazy: the same strings */
    if (*r->p && strchr("*+?{", *r->p)) return fail(r, "a quantifier after a quantifier");
    return 0;
}

static int parse_seq(struct rx *r)
{
    int n = 0;
    while (*r->p && *r->p != '|' && *r->p != ')' && !r->failed) {
        if (*r->p == '$' && (!r->p[1] || r->p[1] == '|' || r->p[1] == ')')) break;
        base_sb_puts(r->o, n++ ? " ( " : "( ");
        if (parse_atom(r)) return -1;
        base_sb_puts(r->o, " )");
        if (parse_quant(r)) return -1;
    }
    if (!n) base_sb_puts(r->o, "\"\"");
    return r->failed ? -1 : 0;
}

static int parse_alt(struct rx *r)
{
    if (parse_seq(r)) return -1;
    while (*r->p == '|') {
        r->p++;
        if (!r->depth) r->top_alt = 1;
        base_sb_puts(r->o, " | ");
        if (parse_seq(r)) return -1;
    }
    return 0;
}

int sample_regex_to_gbnf(struct strbuf *o, const char *re, char *why, size_t why_n)
{
    struct rx r = { .s = re, .p = re, .o = o, .why = why, .why_n = why_n };
    size_t n = strlen(re);
    size_t bs = 0;              /* backslashes before a final '$': an even count leaves it an anchor */
    while (n > 1 + bs && re[n - 2 - bs] == '\\') bs++;
    int head = re[0] == '^', tail = n > 0 && re[n - 1] == '$' && bs % 2 == 0;
    if (head) r.p++;
    base_sb_puts(o, head ? "( ( " : "( char* ( ");
    if (parse_alt(&r)) return -1;
    if (*r.p == '$' && tail && r.p == re + n - 1) r.p++;
    if (*r.p) return fail(&r, *r.p == ')' ? "an unmatched ')'" : "an anchor ($) inside the pattern");
    if ((head || tail) && r.top_alt) return fail(&r, "^ or $ beside a '|' outside any group (group the alternatives)");
    base_sb_puts(o, tail ? " ) )" : " ) char* )");
    return 0;
}
