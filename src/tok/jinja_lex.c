/* tok/jinja_lex.c - Jinja source to tokens, with Jinja2's whitespace rules
 * as transformers configures them (contract in jinja.h):
 *  - line breaks (\r\n, \r and the others Python's splitlines knows) become
 *    \n, and one final line break is dropped (keep_trailing_newline off);
 *  - {%- / {{- / {#- strip all whitespace before the tag, -%} -}} -#} all
 *    whitespace after it;
 *  - trim_blocks: one \n right after %} or #} is dropped (not after +%});
 *  - lstrip_blocks: spaces and tabs between a line's start and {% or {#
 *    are dropped (not before {%+ or {{).
 * Inside a tag, an end marker counts only outside brackets, as in Jinja2. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/jinja_internal.h"

struct lexer {
    const char *s; size_t n, pos;
    int line;
    struct jarena *a;
    struct jtok *t; size_t nt, cap;
    struct colibri_err *err;
};

static int push(struct lexer *L, struct jtok tk)
{
    if (L->nt == L->cap) {
        size_t ncap = L->cap ? L->cap * 2 : 256;
        struct jtok *nt = ja_alloc(L->a, ncap * sizeof *nt);
        if (!nt) return base_err_set(L->err, COLIBRI_ENOMEM, "chat template: out of memory");
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof *nt);
        L->t = nt;
        L->cap = ncap;
    }
    L->t[L->nt++] = tk;
    return 0;
}

/* Bytes of a line break at s (0 if none): what Python's str.splitlines splits on. */
static size_t line_break(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    if (c == '\r') return n > 1 && s[1] == '\n' ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) return 1;
    if (c == 0xc2 && n > 1 && (unsigned char)s[1] == 0x85) return 2;
    if (c == 0xe2 && n > 2 && (unsigned char)s[1] == 0x80 &&
        ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9)) return 3;
    return 0;
}

static char *normalize(struct jarena *a, const char *s, size_t n, size_t *out_n)
{
    char *o = ja_alloc(a, n + 1);
    if (!o) return NULL;
    size_t j = 0, last_break = (size_t)-1;
    for (size_t i = 0; i < n;) {
        size_t lb = line_break(s + i, n - i);
        if (lb) { last_break = j; o[j++] = '\n'; i += lb; }
        else o[j++] = s[i++];
    }
    if (last_break != (size_t)-1 && last_break == j - 1) j--;   /* splitlines drops the last break */
    o[j] = 0;
    *out_n = j;
    return o;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Text before a tag, after stripping per the tag's modifier. */
static int emit_text(struct lexer *L, size_t from, size_t to, char kind, char mod, int line)
{
    if (mod == '-') {
        while (to > from && is_ws(L->s[to - 1])) to--;
    } else if (mod != '+' && kind != '{') {
        size_t l = to;
        while (l > from && L->s[l - 1] != '\n') l--;
        int at_line_start = l > from || from == 0 || L->s[from - 1] == '\n';
        if (at_line_start) {
            size_t k = l;
            while (k < to && (L->s[k] == ' ' || L->s[k] == '\t' || L->s[k] == '\r' ||
                              L->s[k] == '\f' || L->s[k] == '\v')) k++;
            if (k == to) to = l;
        }
    }
    if (to == from) return 0;
    const struct jstr *str = jstr_new(L->a, L->s + from, to - from);
    if (!str) return base_err_set(L->err, COLIBRI_ENOMEM, "chat template: out of memory");
    return push(L, (struct jtok){ .k = JT_TEXT, .line = line, .str = str });
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f)); return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f)); return 4;
}

/* A string literal body with Python's escapes (Jinja decodes them the same
 * way); unknown escapes keep their backslash, as Python does. */
static int lex_string(struct lexer *L, char q, int line)
{
    size_t start = ++L->pos, end = start;
    while (end < L->n && L->s[end] != q) {
        if (L->s[end] == '\\' && end + 1 < L->n) end++;
        end++;
    }
    if (end >= L->n) return base_err_set(L->err, COLIBRI_EFORMAT, "chat template line %d: unterminated string", line);
    char *o = ja_alloc(L->a, sizeof(struct jstr) + (end - start) + 1);
    if (!o) return base_err_set(L->err, COLIBRI_ENOMEM, "chat template: out of memory");
    struct jstr *js = (struct jstr *)o;
    char *p = js->p;
    size_t j = 0;
    for (size_t i = start; i < end; i++) {
        char ch = L->s[i];
        if (ch == '\n') L->line++;
        if (ch != '\\') { p[j++] = ch; continue; }
        char e = L->s[++i];
        int nd = 0;
        switch (e) {
        case 'n': p[j++] = '\n'; break;
        case 't': p[j++] = '\t'; break;
        case 'r': p[j++] = '\r'; break;
        case '\\': p[j++] = '\\'; break;
        case '\'': p[j++] = '\''; break;
        case '"': p[j++] = '"'; break;
        case 'a': p[j++] = '\a'; break;
        case 'b': p[j++] = '\b'; break;
        case 'f': p[j++] = '\f'; break;
        case 'v': p[j++] = '\v'; break;
        case '\n': L->line++; break;   /* line continuation */
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = 0; int k = 0;
                while (k < 3 && i < end && L->s[i] >= '0' && L->s[i] <= '7') { v = v * 8 + (uint32_t)(L->s[i] - '0'); i++; k++; }
                i--;
                j += put_utf8(p + j, v);
            } else { p[j++] = '\\'; p[j++] = e; }
        }
        if (nd) {
            uint32_t v = 0;
            for (int k = 0; k < nd; k++) {
                int h = i + 1 + k < end ? hexval(L->s[i + 1 + k]) : -1;
                if (h < 0) return base_err_set(L->err, COLIBRI_EFORMAT, "chat template line %d: bad \\%c escape", line, e);
                v = v * 16 + (uint32_t)h;
            }
            if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
                return base_err_set(L->err, COLIBRI_EUNSUPPORTED, "chat template line %d: escape \\%c of a surrogate or beyond U+10FFFF", line, e);
            i += (size_t)nd;
            j += put_utf8(p + j, v);   /* a 4-digit escape makes at most 3 bytes, fewer than its 6 */
        }
    }
    p[j] = 0;
    js->n = j;
    L->pos = end + 1;
    return push(L, (struct jtok){ .k = JT_STRING, .line = line, .str = js });
}

static int lex_number(struct lexer *L)
{
    size_t i = L->pos;
    int is_float = 0;
    char buf[64]; size_t j = 0;
    int too_long = 0;   /* digits dropped would change the value: refused */
    while (i < L->n && ((L->s[i] >= '0' && L->s[i] <= '9') || L->s[i] == '_')) { if (L->s[i] != '_') { if (j < 63) buf[j++] = L->s[i]; else too_long = 1; } i++; }
    if (i + 1 < L->n && L->s[i] == '.' && L->s[i + 1] >= '0' && L->s[i + 1] <= '9') {
        is_float = 1; if (j < 63) buf[j++] = '.'; else too_long = 1; i++;
        while (i < L->n && ((L->s[i] >= '0' && L->s[i] <= '9') || L->s[i] == '_')) { if (L->s[i] != '_') { if (j < 63) buf[j++] = L->s[i]; else too_long = 1; } i++; }
    }
    if (i < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t k = i + 1;
        if (k < L->n && (L->s[k] == '+' || L->s[k] == '-')) k++;
        if (k < L->n && L->s[k] >= '0' && L->s[k] <= '9') {
            is_float = 1;
            while (i < k) { if (j < 63) buf[j++] = L->s[i]; else too_long = 1; i++; }
            while (i < L->n && L->s[i] >= '0' && L->s[i] <= '9') { if (j < 63) buf[j++] = L->s[i]; else too_long = 1; i++; }
        }
    }
    if (too_long)
        return base_err_set(L->err, COLIBRI_EUNSUPPORTED, "chat template line %d: a number literal longer than 63 characters",
                       L->line);
    buf[j] = 0;
    struct jtok tk = { .k = is_float ? JT_FLOAT : JT_INT, .line = L->line, .s = L->s + L->pos, .n = i - L->pos };
    if (is_float) tk.f = strtod(buf, NULL);
    else {
        errno = 0;
        unsigned long long v = strtoull(buf, NULL, 10);
        if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
            return base_err_set(L->err, COLIBRI_EUNSUPPORTED, "chat template line %d: integer %s does not fit 64 bits", L->line, buf);
        tk.i = (int64_t)v;
    }
    L->pos = i;
    return push(L, tk);
}

static const char *const OPS[] = { "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                   "<", ">", "=", "(", ")", "[", "]", "{", "}", ".", ",", ":", "|" };

/* Tokens inside a tag up to its end marker ("%}" or "}}" or "#}"); returns
 * the end's modifier ('-', '+' or 0) in *mod. */
static int lex_tag(struct lexer *L, char close, int *mod, int open_line)
{
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && is_ws(L->s[L->pos])) { if (L->s[L->pos] == '\n') L->line++; L->pos++; }
        if (L->pos >= L->n)
            return base_err_set(L->err, COLIBRI_EFORMAT, "chat template line %d: tag opened here is never closed", open_line);
        const char *p = L->s + L->pos;
        size_t left = L->n - L->pos;
        if (depth == 0) {
            if ((p[0] == '-' || p[0] == '+') && left >= 3 && p[1] == close && p[2] == '}') {
                *mod = p[0]; L->pos += 3; return 0;
            }
            if (left >= 2 && p[0] == close && p[1] == '}') { *mod = 0; L->pos += 2; return 0; }
        }
        char ch = p[0];
        if (ch == '\'' || ch == '"') { int rc = lex_string(L, ch, L->line); if (rc) return rc; continue; }
        if (ch >= '0' && ch <= '9') { int rc = lex_number(L); if (rc) return rc; continue; }
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            size_t k = 1;
            while (k < left && ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') ||
                                (p[k] >= '0' && p[k] <= '9') || p[k] == '_')) k++;
            int rc = push(L, (struct jtok){ .k = JT_NAME, .line = L->line, .s = p, .n = k });
            if (rc) return rc;
            L->pos += k;
            continue;
        }
        size_t i;
        for (i = 0; i < sizeof OPS / sizeof *OPS; i++) {
            size_t on = strlen(OPS[i]);
            if (left >= on && !memcmp(p, OPS[i], on)) break;
        }
        if (i == sizeof OPS / sizeof *OPS)
            return base_err_set(L->err, COLIBRI_EFORMAT, "chat template line %d: unexpected character '%c'", L->line, ch);
        size_t on = strlen(OPS[i]);
        if (ch == '(' || ch == '[' || ch == '{') depth++;
        if (ch == ')' || ch == ']' || ch == '}') {
            if (depth == 0) return base_err_set(L->err, COLIBRI_EFORMAT, "chat template line %d: unbalanced '%c'", L->line, ch);
            depth--;
        }
        int rc = push(L, (struct jtok){ .k = JT_OP, .line = L->line, .s = p, .n = on });
        if (rc) return rc;
        L->pos += on;
    }
}

static void count_lines(struct lexer *L, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) if (L->s[i] == '\n') L->line++;
}

int jinja_lex(const char *src, size_t len, struct jarena *a, struct jlex_out *out, struct colibri_err *err)
{
    struct lexer L = { .a = a, .line = 1, .err = err };
    L.s = normalize(a, src, len, &L.n);
    if (!L.s) return base_err_set(err, COLIBRI_ENOMEM, "chat template: out of memory");
    int rc;
    while (L.pos < L.n) {
        /* the next tag start */
        size_t t = L.pos;
        while (t + 1 < L.n && !(L.s[t] == '{' && (L.s[t + 1] == '{' || L.s[t + 1] == '%' || L.s[t + 1] == '#'))) t++;
        if (t + 1 >= L.n) t = L.n;
        int text_line = L.line;
        if (t == L.n) {
            if ((rc = emit_text(&L, L.pos, L.n, '{', 0, text_line))) return rc;
            count_lines(&L, L.pos, L.n);
            break;
        }
        char kind = L.s[t + 1];
        char mod = t + 2 < L.n && (L.s[t + 2] == '-' || L.s[t + 2] == '+') ? L.s[t + 2] : 0;
        if ((rc = emit_text(&L, L.pos, t, kind, mod, text_line))) return rc;
        count_lines(&L, L.pos, t);
        L.pos = t + 2 + (mod ? 1 : 0);
        int open_line = L.line, end_mod = 0;
        if (kind == '#') {
            size_t e = L.pos;
            while (e + 1 < L.n && !(L.s[e] == '#' && L.s[e + 1] == '}')) e++;
            if (e + 1 >= L.n) return base_err_set(err, COLIBRI_EFORMAT, "chat template line %d: comment never closed", open_line);
            end_mod = e > L.pos && (L.s[e - 1] == '-' || L.s[e - 1] == '+') ? L.s[e - 1] : 0;
            count_lines(&L, L.pos, e);
            L.pos = e + 2;
        } else {
            int bk = kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN;
            if ((rc = push(&L, (struct jtok){ .k = bk, .line = open_line }))) return rc;
            if ((rc = lex_tag(&L, kind == '%' ? '%' : '}', &end_mod, open_line))) return rc;
            if ((rc = push(&L, (struct jtok){ .k = bk == JT_BLOCK_BEGIN ? JT_BLOCK_END : JT_VAR_END, .line = L.line }))) return rc;
        }
        if (end_mod == '-') {
            while (L.pos < L.n && is_ws(L.s[L.pos])) { if (L.s[L.pos] == '\n') L.line++; L.pos++; }
        } else if (end_mod != '+' && kind != '{' && L.pos < L.n && L.s[L.pos] == '\n') {
            L.pos++; L.line++;
        }
    }
    if ((rc = push(&L, (struct jtok){ .k = JT_EOF, .line = L.line }))) return rc;
    out->t = L.t;
    out->n = L.nt;
    return 0;
}
