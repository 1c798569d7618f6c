/* tok/jinja_builtin.c - the filters, tests, string/dict methods and globals
 * of the Jinja subset (contract in jinja.h). Each follows Jinja2 3.1 /
 * Python 3 semantics on the values it accepts; anything outside those is an
 * error naming the filter and the type, never a guess. Case mapping is
 * Unicode's, as Python's (jinja_case.c); isalpha, isdigit, isalnum and
 * isspace know ASCII only. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "tok/jinja_internal.h"

#define ARGS struct jctx *c, struct jv v, const struct jv *args, size_t nargs, \
             const struct jstr *const *kwn, const struct jv *kwv, size_t nkw

/* Argument `name` at position pos (after the value), or NULL. */
static const struct jv *arg(const char *name, size_t pos, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    if (pos < nargs) return &args[pos];
    for (size_t k = 0; k < nkw; k++) if (!strcmp(kwn[k]->p, name)) return &kwv[k];
    return NULL;
}
#define ARG(name, pos) arg(name, pos, args, nargs, kwn, kwv, nkw)

static void check_kw(struct jctx *c, const char *what, const char *const *allowed, size_t nargs_max,
                     size_t nargs, const struct jstr *const *kwn, size_t nkw)
{
    if (nargs > nargs_max) jinja_fail(c, COLIBRI_EINVAL, "%s takes at most %zu arguments, %zu given", what, nargs_max, nargs);
    for (size_t k = 0; k < nkw; k++) {
        const char *const *a = allowed;
        while (*a && strcmp(*a, kwn[k]->p)) a++;
        if (!*a) jinja_fail(c, COLIBRI_EUNSUPPORTED, "%s: unsupported argument '%s'", what, kwn[k]->p);
    }
}

static const struct jstr *need_str(struct jctx *c, const char *what, struct jv v)
{
    if (v.t != JV_STR) jinja_fail(c, COLIBRI_EINVAL, "%s: expected a string, got '%s'", what, jv_type_name(v));
    return v.u.s;
}

static struct jv str_of(struct jctx *c, struct jv v) { return v.t == JV_UNDEF ? jv_str(c, "") : jv_to_str(c, v); }

static int64_t int_arg(struct jctx *c, const char *what, const struct jv *a, int64_t dflt)
{
    if (!a || a->t == JV_NONE) return dflt;
    if (a->t == JV_INT) return a->u.i;
    if (a->t == JV_BOOL) return a->u.b;
    jinja_fail(c, COLIBRI_EINVAL, "%s: expected an integer argument, got '%s'", what, jv_type_name(*a));
}

static int bool_arg(const struct jv *a, int dflt) { return a ? jv_truthy(*a) : dflt; }

/* ------------------------------------------------------------ string helpers */

static int in_chars(const char *p, size_t len, const struct jstr *chars)
{
    /* is the code point p[0..len) one of chars' code points? */
    for (size_t i = 0; i < chars->n;) {
        size_t j = i + 1;
        while (j < chars->n && ((unsigned char)chars->p[j] & 0xc0) == 0x80) j++;
        if (j - i == len && !memcmp(chars->p + i, p, len)) return 1;
        i = j;
    }
    return 0;
}

static size_t cp_len(const char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && ((unsigned char)s[j] & 0xc0) == 0x80) j++;
    return j - i;
}

static size_t cp_back(const char *s, size_t end)   /* start of the code point ending at end */
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
    return i;
}

/* Python's strip/lstrip/rstrip; chars NULL: Unicode whitespace. */
static struct jv strip(struct jctx *c, const struct jstr *s, const struct jstr *chars, int left, int right)
{
    size_t a = 0, b = s->n;
    while (left && a < b) {
        size_t l = chars ? cp_len(s->p, b, a) : ju_space(s->p + a, b - a);
        if (chars ? !in_chars(s->p + a, l, chars) : !l) break;
        a += l;
    }
    while (right && b > a) {
        size_t st = cp_back(s->p, b);
        int hit = chars ? in_chars(s->p + st, b - st, chars) : ju_space(s->p + st, b - st) == b - st;
        if (!hit) break;
        b = st;
    }
    return jv_strn(c, s->p + a, b - a);
}

/* Bytes of the line break at s[i..n) as Python's str.splitlines() knows
 * them (\n, \r, \r\n, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029), or 0. */
static size_t line_break(const char *s, size_t n, size_t i)
{
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\r') return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) return 1;
    if (ch == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] == 0x85) return 2;
    if (ch == 0xe2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
        ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9)) return 3;
    return 0;
}

/* Python's s.splitlines(): the lines without their breaks; a final break
 * ends the last line rather than starting an empty one. */
static struct jv splitlines(struct jctx *c, const struct jstr *s)
{
    struct jv r = jv_list(c, 0);
    size_t a = 0;
    for (size_t i = 0; i < s->n;) {
        size_t k = line_break(s->p, s->n, i);
        if (!k) { i++; continue; }
        jlist_push(c, r.u.l, jv_strn(c, s->p + a, i - a));
        a = i += k;
    }
    if (a < s->n) jlist_push(c, r.u.l, jv_strn(c, s->p + a, s->n - a));
    return r;
}

static struct jv replace(struct jctx *c, const struct jstr *s, const struct jstr *old, const struct jstr *new_,
                         int64_t count)
{
    struct jbuf b = { 0 };
    int64_t done = 0;
    if (!old->n) {   /* Python inserts `new` before every code point and at the end */
        for (size_t i = 0; i <= s->n;) {
            if (count < 0 || done < count) { jbuf_add(c, &b, new_->p, new_->n); done++; }
            if (i == s->n) break;
            size_t l = cp_len(s->p, s->n, i);
            jbuf_add(c, &b, s->p + i, l);
            i += l;
        }
        return jbuf_take(c, &b);
    }
    size_t i = 0;
    while (i < s->n) {
        const char *hit = (count < 0 || done < count) ? memmem(s->p + i, s->n - i, old->p, old->n) : NULL;
        if (!hit) { jbuf_add(c, &b, s->p + i, s->n - i); break; }
        jbuf_add(c, &b, s->p + i, (size_t)(hit - (s->p + i)));
        jbuf_add(c, &b, new_->p, new_->n);
        i = (size_t)(hit - s->p) + old->n;
        done++;
        jinja_step(c);
    }
    return jbuf_take(c, &b);
}

/* Python's str.split / str.rsplit. */
static struct jv split(struct jctx *c, const struct jstr *s, const struct jv *sepv, int64_t maxsplit, int from_right)
{
    struct jv r = jv_list(c, 0);
    if (sepv && sepv->t != JV_NONE) {
        const struct jstr *sep = need_str(c, "split", *sepv);
        if (!sep->n) jinja_fail(c, COLIBRI_EINVAL, "split: empty separator");
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s->p + i, s->n - i, sep->p, sep->n) : NULL;
                if (!hit) { jlist_push(c, r.u.l, jv_strn(c, s->p + i, s->n - i)); break; }
                jlist_push(c, r.u.l, jv_strn(c, s->p + i, (size_t)(hit - (s->p + i))));
                i = (size_t)(hit - s->p) + sep->n;
                done++;
            }
            return r;
        }
        /* from the right: collect pieces backwards, then reverse */
        size_t end = s->n;
        int64_t done = 0;
        for (;;) {
            const char *hit = NULL;
            if ((maxsplit < 0 || done < maxsplit) && end >= sep->n)
                for (size_t k = end - sep->n + 1; k-- > 0;) if (!memcmp(s->p + k, sep->p, sep->n)) { hit = s->p + k; break; }
            if (!hit) { jlist_push(c, r.u.l, jv_strn(c, s->p, end)); break; }
            size_t at = (size_t)(hit - s->p);
            jlist_push(c, r.u.l, jv_strn(c, s->p + at + sep->n, end - at - sep->n));
            end = at;
            done++;
        }
        for (size_t a = 0, b = r.u.l->n - 1; a < b; a++, b--) { struct jv t = r.u.l->v[a]; r.u.l->v[a] = r.u.l->v[b]; r.u.l->v[b] = t; }
        return r;
    }
    /* whitespace runs; no empty pieces */
    if (from_right && maxsplit >= 0) jinja_fail(c, COLIBRI_EUNSUPPORTED, "rsplit on whitespace with maxsplit");
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        size_t l;
        while (i < s->n && (l = ju_space(s->p + i, s->n - i))) i += l;
        if (i >= s->n) break;
        if (maxsplit >= 0 && done >= maxsplit) {
            size_t e = s->n;
            while (e > i) { size_t st = cp_back(s->p, e); if (ju_space(s->p + st, e - st) != e - st) break; e = st; }
            jlist_push(c, r.u.l, jv_strn(c, s->p + i, e - i));
            break;
        }
        size_t j = i;
        while (j < s->n && !ju_space(s->p + j, s->n - j)) j += cp_len(s->p, s->n, j);
        jlist_push(c, r.u.l, jv_strn(c, s->p + i, j - i));
        done++;
        i = j;
    }
    return r;
}

static int starts_or_ends(struct jctx *c, const struct jstr *s, struct jv x, int ends)
{
    if (x.t == JV_LIST) {
        for (size_t i = 0; i < x.u.l->n; i++) if (starts_or_ends(c, s, x.u.l->v[i], ends)) return 1;
        return 0;
    }
    const struct jstr *p = need_str(c, ends ? "endswith" : "startswith", x);
    if (p->n > s->n) return 0;
    return !memcmp(ends ? s->p + s->n - p->n : s->p, p->p, p->n);
}

/* str.format with {} / {N} / {name} fields and {{ }} escapes; format specs
 * and conversions are refused by name. */
static struct jv str_format(struct jctx *c, const struct jstr *s, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    struct jbuf b = { 0 };
    size_t auto_i = 0;
    for (size_t i = 0; i < s->n; i++) {
        char ch = s->p[i];
        if (ch == '{' && i + 1 < s->n && s->p[i + 1] == '{') { jbuf_add(c, &b, "{", 1); i++; continue; }
        if (ch == '}' && i + 1 < s->n && s->p[i + 1] == '}') { jbuf_add(c, &b, "}", 1); i++; continue; }
        if (ch == '}') jinja_fail(c, COLIBRI_EINVAL, "format: single '}' in the format string");
        if (ch != '{') { jbuf_add(c, &b, &ch, 1); continue; }
        size_t e = i + 1;
        while (e < s->n && s->p[e] != '}') e++;
        if (e >= s->n) jinja_fail(c, COLIBRI_EINVAL, "format: single '{' in the format string");
        const char *f = s->p + i + 1;
        size_t fl = e - i - 1;
        for (size_t k = 0; k < fl; k++)
            if (f[k] == ':' || f[k] == '!' || f[k] == '[' || f[k] == '.')
                jinja_fail(c, COLIBRI_EUNSUPPORTED, "format: unsupported field '{%.*s}' (specs, conversions, indexing)", (int)fl, f);
        const struct jv *val = NULL;
        if (!fl) val = auto_i < nargs ? &args[auto_i++] : NULL;
        else if (isdigit((unsigned char)f[0])) { size_t k = (size_t)atoi(f); val = k < nargs ? &args[k] : NULL; }
        else for (size_t k = 0; k < nkw; k++) if (kwn[k]->n == fl && !memcmp(kwn[k]->p, f, fl)) val = &kwv[k];
        if (!val) jinja_fail(c, COLIBRI_EINVAL, "format: no argument for field '{%.*s}'", (int)fl, f);
        jv_str_into(c, &b, *val);
        i = e;
    }
    return jbuf_take(c, &b);
}

/* ------------------------------------------------------------ methods */

static struct jv dict_items(struct jctx *c, struct jdict *d, int what)   /* 0 items 1 keys 2 values */
{
    struct jv r = jv_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (what == 1) { jlist_push(c, r.u.l, d->k[i]); continue; }
        if (what == 2) { jlist_push(c, r.u.l, d->v[i]); continue; }
        struct jv pair = jv_list(c, 2);
        jlist_push(c, pair.u.l, d->k[i]);
        jlist_push(c, pair.u.l, d->v[i]);
        pair.u.l->tuple = 1;
        jlist_push(c, r.u.l, pair);
    }
    return r;
}

static int str_class(const struct jstr *s, int (*pred)(int))
{
    if (!s->n) return 0;
    for (size_t i = 0; i < s->n; i++) if ((unsigned char)s->p[i] >= 0x80 || !pred((unsigned char)s->p[i])) return 0;
    return 1;
}


struct jv jinja_call_method(struct jctx *c, struct jv self, const struct jstr *name, const struct jv *args,
                            size_t nargs, const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    const char *m = name->p;
    if (self.t == JV_DICT) {
        if (!strcmp(m, "get")) {
            if (nargs < 1 || nargs > 2 || nkw) jinja_fail(c, COLIBRI_EINVAL, "dict.get takes 1 or 2 positional arguments");
            struct jv *v = jdict_get(self.u.d, args[0]);
            return v ? *v : nargs == 2 ? args[1] : jv_none();
        }
        if (nargs || nkw) jinja_fail(c, COLIBRI_EINVAL, "dict.%s takes no arguments", m);
        return dict_items(c, self.u.d, !strcmp(m, "items") ? 0 : !strcmp(m, "keys") ? 1 : 2);
    }
    if (self.t == JV_LOOP) {   /* loop.cycle(a, b, ...) */
        if (!nargs) jinja_fail(c, COLIBRI_EINVAL, "loop.cycle needs at least one value");
        return args[self.u.loop->i % nargs];
    }
    if (self.t != JV_STR) jinja_fail(c, COLIBRI_EINVAL, "'%s' object has no method '%s'", jv_type_name(self), m);
    const struct jstr *s = self.u.s;
    if (!strcmp(m, "format")) return str_format(c, s, args, nargs, kwn, kwv, nkw);
    static const char *const KW_SPLIT[] = { "sep", "maxsplit", NULL }, *const KW_NONE[] = { NULL },
                      *const KW_REPL[] = { "count", NULL };
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        check_kw(c, m, KW_SPLIT, 2, nargs, kwn, nkw);
        return split(c, s, ARG("sep", 0), int_arg(c, m, ARG("maxsplit", 1), -1), m[0] == 'r');
    }
    if (!strcmp(m, "replace")) {
        check_kw(c, m, KW_REPL, 3, nargs, kwn, nkw);
        if (nargs < 2) jinja_fail(c, COLIBRI_EINVAL, "replace needs 2 arguments");
        return replace(c, s, need_str(c, m, args[0]), need_str(c, m, args[1]), int_arg(c, m, ARG("count", 2), -1));
    }
    check_kw(c, m, KW_NONE, 2, nargs, kwn, nkw);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (nargs != 1) jinja_fail(c, COLIBRI_EUNSUPPORTED, "%s with start/end arguments", m);
        return jv_bool(starts_or_ends(c, s, args[0], m[0] == 'e'));
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        const struct jstr *chars = nargs && args[0].t != JV_NONE ? need_str(c, m, args[0]) : NULL;
        return strip(c, s, chars, m[0] != 'r', m[0] != 'l');
    }
    if (!strcmp(m, "lower")) return tok_jinja_case(c, s, JCASE_LOWER);
    if (!strcmp(m, "upper")) return tok_jinja_case(c, s, JCASE_UPPER);
    if (!strcmp(m, "capitalize")) return tok_jinja_case(c, s, JCASE_CAPITALIZE);
    if (!strcmp(m, "title")) return tok_jinja_case(c, s, JCASE_TITLE);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
        if (nargs != 1) jinja_fail(c, COLIBRI_EUNSUPPORTED, "%s with start/end arguments", m);
        const struct jstr *sub = need_str(c, m, args[0]);
        if (!strcmp(m, "count")) {
            if (!sub->n) return jv_int((int64_t)ju_len(s->p, s->n) + 1);
            int64_t k = 0;
            for (const char *p = s->p; (p = memmem(p, s->n - (size_t)(p - s->p), sub->p, sub->n)); p += sub->n) k++;
            return jv_int(k);
        }
        const char *hit = NULL;
        if (m[0] == 'f') hit = memmem(s->p, s->n, sub->p, sub->n);
        else if (sub->n <= s->n)
            for (size_t k = s->n - sub->n + 1; k-- > 0;) if (!memcmp(s->p + k, sub->p, sub->n)) { hit = s->p + k; break; }
        return jv_int(hit ? (int64_t)ju_len(s->p, (size_t)(hit - s->p)) : -1);
    }
    if (!strcmp(m, "join")) {
        if (nargs != 1) jinja_fail(c, COLIBRI_EINVAL, "join takes one argument");
        struct jlist items = { 0 };
        jinja_iter(c, args[0], &items);
        struct jbuf b = { 0 };
        for (size_t i = 0; i < items.n; i++) {
            if (i) jbuf_add(c, &b, s->p, s->n);
            jbuf_add(c, &b, need_str(c, "join", items.v[i])->p, items.v[i].u.s->n);
        }
        return jbuf_take(c, &b);
    }
    if (!strcmp(m, "splitlines")) return splitlines(c, s);
    if (!strcmp(m, "isdigit")) return jv_bool(str_class(s, isdigit));
    if (!strcmp(m, "isalpha")) return jv_bool(str_class(s, isalpha));
    if (!strcmp(m, "isspace")) return jv_bool(str_class(s, isspace));
    if (!strcmp(m, "isalnum")) return jv_bool(str_class(s, isalnum));
    if (!strcmp(m, "islower")) return jv_bool(tok_jinja_case_test(c, s, 0));
    if (!strcmp(m, "isupper")) return jv_bool(tok_jinja_case_test(c, s, 1));
    jinja_fail(c, COLIBRI_EINVAL, "'str' object has no method '%s'", m);
}

/* ------------------------------------------------------------ tests */

static const char *const TESTS[] = {
    "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number", "integer",
    "float", "boolean", "true", "false", "callable", "even", "odd", "divisibleby", "eq", "equalto", "==",
    "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge", ">=", "in", "sameas", "lower", "upper", NULL };

int jinja_test_index(const char *name, size_t n)
{
    for (int i = 0; TESTS[i]; i++) if (strlen(TESTS[i]) == n && !memcmp(TESTS[i], name, n)) return i;
    return -1;
}

int jinja_call_test(struct jctx *c, int idx, struct jv v, const struct jv *args, size_t nargs)
{
    const char *t = TESTS[idx];
    int need = !strcmp(t, "divisibleby") || !strcmp(t, "in") || !strcmp(t, "sameas") || (idx >= 17 && idx <= 29);
    if (need && nargs != 1) jinja_fail(c, COLIBRI_EINVAL, "test '%s' takes one argument", t);
    if (!need && nargs) jinja_fail(c, COLIBRI_EINVAL, "test '%s' takes no arguments", t);
    switch (idx) {
    case 0: return v.t != JV_UNDEF;
    case 1: return v.t == JV_UNDEF;
    case 2: return v.t == JV_NONE;
    case 3: return v.t == JV_STR;
    case 4: return v.t == JV_DICT;
    case 5: return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    case 6: return v.t == JV_STR || (v.t == JV_LIST && !v.u.l->gen) || v.t == JV_DICT || v.t == JV_UNDEF;
    case 7: return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
    case 8: return v.t == JV_INT;
    case 9: return v.t == JV_FLOAT;
    case 10: return v.t == JV_BOOL;
    case 11: return v.t == JV_BOOL && v.u.b;
    case 12: return v.t == JV_BOOL && !v.u.b;
    case 13: return v.t == JV_MACRO || v.t == JV_FUNC || v.t == JV_METHOD;
    case 14: case 15: case 16: {
        if (v.t != JV_INT && v.t != JV_BOOL) jinja_fail(c, COLIBRI_EINVAL, "test '%s' needs an integer, got '%s'", t, jv_type_name(v));
        int64_t x = v.t == JV_INT ? v.u.i : v.u.b;
        if (idx == 14) return x % 2 == 0;
        if (idx == 15) return x % 2 != 0;
        int64_t d = args[0].t == JV_INT ? args[0].u.i : 0;
        if (!d) jinja_fail(c, COLIBRI_EINVAL, "divisibleby: divisor must be a nonzero integer");
        return x % d == 0;
    }
    case 17: case 18: case 19: return jv_eq(v, args[0]);
    case 20: case 21: return !jv_eq(v, args[0]);
    case 22: case 23: return jv_cmp(c, v, args[0]) < 0;
    case 24: case 25: return jv_cmp(c, v, args[0]) <= 0;
    case 26: case 27: return jv_cmp(c, v, args[0]) > 0;
    case 28: case 29: return jv_cmp(c, v, args[0]) >= 0;
    case 30: {
        struct jv seq = args[0];
        if (seq.t == JV_STR) return v.t == JV_STR && (!v.u.s->n || memmem(seq.u.s->p, seq.u.s->n, v.u.s->p, v.u.s->n));
        if (seq.t == JV_LIST) { for (size_t i = 0; i < seq.u.l->n; i++) if (jv_eq(v, seq.u.l->v[i])) return 1; return 0; }
        if (seq.t == JV_DICT) return jdict_get(seq.u.d, v) != NULL;
        jinja_fail(c, COLIBRI_EINVAL, "test 'in': '%s' is not a container", jv_type_name(seq));
    }
    case 31:   /* identity: exact for None/True/False, by reference for containers */
        if (v.t != args[0].t) return 0;
        if (v.t == JV_LIST) return v.u.l == args[0].u.l;
        if (v.t == JV_DICT || v.t == JV_NS) return v.u.d == args[0].u.d;
        return jv_eq(v, args[0]);
    case 32: return v.t == JV_STR && tok_jinja_case_test(c, v.u.s, 0);
    case 33: return v.t == JV_STR && tok_jinja_case_test(c, v.u.s, 1);
    }
    return 0;
}

/* ------------------------------------------------------------ filters */

static struct jv f_length(ARGS)
{
    switch (v.t) {
    case JV_UNDEF: return jv_int(0);
    case JV_STR: return jv_int((int64_t)ju_len(v.u.s->p, v.u.s->n));
    case JV_LIST:
        if (v.u.l->gen) jinja_fail(c, COLIBRI_EINVAL, "length: object of type 'generator' has no len()");
        return jv_int((int64_t)v.u.l->n);
    case JV_DICT: case JV_NS: return jv_int((int64_t)v.u.d->n);
    default: jinja_fail(c, COLIBRI_EINVAL, "length: object of type '%s' has no len()", jv_type_name(v));
    }
}

static struct jv f_tojson(ARGS)
{
    static const char *const KW[] = { "ensure_ascii", "indent", "separators", "sort_keys", NULL };
    check_kw(c, "tojson", KW, 4, nargs, kwn, nkw);
    int ensure_ascii = bool_arg(ARG("ensure_ascii", 0), 0);
    const struct jv *ind = ARG("indent", 1), *seps = ARG("separators", 2);
    int indent = -1;
    if (ind && ind->t != JV_NONE) {
        if (ind->t != JV_INT || ind->u.i < 0 || ind->u.i > 64)
            jinja_fail(c, COLIBRI_EUNSUPPORTED, "tojson: indent must be an integer 0..64");
        indent = (int)ind->u.i;
    }
    const char *item_sep = NULL, *key_sep = NULL;
    if (seps && seps->t != JV_NONE) {
        if (seps->t != JV_LIST || seps->u.l->n != 2 || seps->u.l->v[0].t != JV_STR || seps->u.l->v[1].t != JV_STR)
            jinja_fail(c, COLIBRI_EINVAL, "tojson: separators must be a pair of strings");
        item_sep = seps->u.l->v[0].u.s->p;
        key_sep = seps->u.l->v[1].u.s->p;
    }
    struct jbuf b = { 0 };
    jv_json_into(c, &b, v, ensure_ascii, indent, item_sep, key_sep, bool_arg(ARG("sort_keys", 3), 0), 0);
    return jbuf_take(c, &b);
}

static struct jv f_items(ARGS)
{
    if (v.t == JV_UNDEF) return jv_list(c, 0);
    if (v.t != JV_DICT) jinja_fail(c, COLIBRI_EINVAL, "items: can only get item pairs from a mapping, not '%s'", jv_type_name(v));
    return dict_items(c, v.u.d, 0);
}

static struct jv f_join(ARGS)
{
    const struct jv *sep = ARG("d", 0), *attr = ARG("attribute", 1);
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    struct jbuf b = { 0 };
    for (size_t i = 0; i < items.n; i++) {
        if (i && sep) jv_str_into(c, &b, *sep);
        struct jv it = items.v[i];
        if (attr) it = jinja_getattr(c, it, need_str(c, "join", *attr)->p, attr->u.s->n);
        jv_str_into(c, &b, it);
    }
    return jbuf_take(c, &b);
}

static struct jv f_default(ARGS)
{
    const struct jv *d = ARG("default_value", 0);
    int boolean = bool_arg(ARG("boolean", 1), 0);
    if (v.t == JV_UNDEF || (boolean && !jv_truthy(v))) return d ? *d : jv_str(c, "");
    return v;
}

static struct jv f_upper(ARGS) { return tok_jinja_case(c, str_of(c, v).u.s, JCASE_UPPER); }
static struct jv f_lower(ARGS) { return tok_jinja_case(c, str_of(c, v).u.s, JCASE_LOWER); }
static struct jv f_capitalize(ARGS) { return tok_jinja_case(c, str_of(c, v).u.s, JCASE_CAPITALIZE); }
static struct jv f_title(ARGS) { return tok_jinja_case(c, str_of(c, v).u.s, JCASE_JINJA_TITLE); }
static struct jv f_string(ARGS) { return str_of(c, v); }
static struct jv f_safe(ARGS) { struct jv r = str_of(c, v); r.markup = 1; return r; }

static struct jv f_trim(ARGS)
{
    const struct jv *chars = ARG("chars", 0);
    return strip(c, str_of(c, v).u.s, chars && chars->t != JV_NONE ? need_str(c, "trim", *chars) : NULL, 1, 1);
}

static struct jv f_replace(ARGS)
{
    const struct jv *old = ARG("old", 0), *new_ = ARG("new", 1);
    if (!old || !new_) jinja_fail(c, COLIBRI_EINVAL, "replace needs old and new");
    return replace(c, str_of(c, v).u.s, jv_to_str(c, *old).u.s, jv_to_str(c, *new_).u.s,
                   int_arg(c, "replace", ARG("count", 2), -1));
}

static struct jv f_first(ARGS)
{
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    return items.n ? items.v[0] : jv_undef();
}

static struct jv f_last(ARGS)
{
    if (v.t == JV_DICT) jinja_fail(c, COLIBRI_EINVAL, "last: 'dict' object is not reversible");
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    return items.n ? items.v[items.n - 1] : jv_undef();
}

static struct jv f_list(ARGS)
{
    struct jv r = jv_list(c, 0);
    jinja_iter(c, v, r.u.l);
    return r;
}

static struct jv f_reverse(ARGS)
{
    if (v.t == JV_STR) {
        struct jlist chars = { 0 };
        jinja_iter(c, v, &chars);
        struct jbuf b = { 0 };
        for (size_t i = chars.n; i-- > 0;) jbuf_add(c, &b, chars.v[i].u.s->p, chars.v[i].u.s->n);
        return jbuf_take(c, &b);
    }
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    struct jv r = jv_list(c, items.n);
    for (size_t i = items.n; i-- > 0;) jlist_push(c, r.u.l, items.v[i]);
    r.u.l->gen = 1;
    return r;
}

static struct jv f_int(ARGS)
{
    const struct jv *d = ARG("default", 0);
    struct jv dflt = d ? *d : jv_int(0);
    if (v.t == JV_INT) return v;
    if (v.t == JV_BOOL) return jv_int(v.u.b);
    if (v.t == JV_FLOAT) return isfinite(v.u.f) && fabs(v.u.f) < 9.2e18 ? jv_int((int64_t)v.u.f) : dflt;
    if (v.t == JV_STR) {
        char *end;
        const char *p = v.u.s->p;
        long long x = strtoll(p, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != p && !*end) return jv_int(x);
        double f = strtod(p, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != p && !*end && isfinite(f)) return jv_int((int64_t)f);
    }
    return dflt;
}

static struct jv f_float(ARGS)
{
    const struct jv *d = ARG("default", 0);
    if (v.t == JV_FLOAT) return v;
    if (v.t == JV_INT) return jv_float((double)v.u.i);
    if (v.t == JV_BOOL) return jv_float(v.u.b);
    if (v.t == JV_STR) {
        char *end;
        double f = strtod(v.u.s->p, &end);
        if (end != v.u.s->p && !*end) return jv_float(f);
    }
    return d ? *d : jv_float(0.0);
}

static struct jv f_abs(ARGS)
{
    if (v.t == JV_INT) { if (v.u.i == INT64_MIN) jinja_fail(c, COLIBRI_EUNSUPPORTED, "abs: integer overflow"); return jv_int(v.u.i < 0 ? -v.u.i : v.u.i); }
    if (v.t == JV_BOOL) return jv_int(v.u.b);
    if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
    jinja_fail(c, COLIBRI_EINVAL, "abs: bad operand type '%s'", jv_type_name(v));
}

static struct jv f_round(ARGS)
{
    int64_t prec = int_arg(c, "round", ARG("precision", 0), 0);
    const struct jv *method = ARG("method", 1);
    double x = v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.t == JV_BOOL ? v.u.b : NAN;
    if (isnan(x) && v.t != JV_FLOAT) jinja_fail(c, COLIBRI_EINVAL, "round: expected a number, got '%s'", jv_type_name(v));
    if (v.t != JV_FLOAT && prec >= 0) return jv_int(v.t == JV_INT ? v.u.i : v.u.b);   /* Python: round(int) is the int */
    double k = pow(10.0, (double)prec);
    const char *m = method ? need_str(c, "round", *method)->p : "common";
    if (!strcmp(m, "common")) {
        /* Python's round(x, n): the exact binary value rounded half to even
         * at n decimals, which glibc's %.*f does too (2.5 -> 2.0, 2.675 -> 2.67) */
        if (!isfinite(x) || prec > 323) return jv_float(x);
        if (prec < 0) return jv_float(nearbyint(x * k) / k);
        char buf[720];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        return jv_float(strtod(buf, NULL));
    }
    if (!strcmp(m, "floor")) return jv_float(floor(x * k) / k);
    if (!strcmp(m, "ceil")) return jv_float(ceil(x * k) / k);
    jinja_fail(c, COLIBRI_EINVAL, "round: method must be common, floor or ceil");
}

static struct jv f_indent(ARGS)
{
    const struct jv *w = ARG("width", 0);
    int first = bool_arg(ARG("first", 1), 0), blank = bool_arg(ARG("blank", 2), 0);
    struct jv ind;
    if (!w) ind = jv_str(c, "    ");
    else if (w->t == JV_STR) ind = *w;
    else { int64_t n = int_arg(c, "indent", w, 4); if (n < 0 || n > 1024) n = 0; char sp[1025]; memset(sp, ' ', (size_t)n); ind = jv_strn(c, sp, (size_t)n); }
    /* Jinja 3.1: s += "\n"; lines = s.splitlines(); the first line as it
     * is, then the others each indented unless blank (all of them with
     * blank=true), joined by "\n" (so "\r\n" becomes "\n") */
    struct jbuf t = { 0 };
    jv_str_into(c, &t, v);
    jbuf_add(c, &t, "\n", 1);
    const struct jlist *lines = splitlines(c, jbuf_take(c, &t).u.s).u.l;
    struct jbuf b = { 0 };
    if (first) jbuf_add(c, &b, ind.u.s->p, ind.u.s->n);
    for (size_t i = 0; i < lines->n; i++) {
        const struct jstr *l = lines->v[i].u.s;
        if (i) jbuf_add(c, &b, "\n", 1);
        if (i && (blank || l->n)) jbuf_add(c, &b, ind.u.s->p, ind.u.s->n);
        jbuf_add(c, &b, l->p, l->n);
    }
    return jbuf_take(c, &b);
}

static int cmp_ci(struct jctx *c, struct jv a, struct jv b, int case_sensitive)
{
    if (!case_sensitive && a.t == JV_STR && b.t == JV_STR) {
        struct jv la = tok_jinja_case(c, a.u.s, JCASE_LOWER), lb = tok_jinja_case(c, b.u.s, JCASE_LOWER);
        return jv_cmp(c, la, lb);
    }
    return jv_cmp(c, a, b);
}

/* insertion sort: stable like Python's sort, and inputs are short */
static void sort_list(struct jctx *c, struct jlist *l, const struct jv *keys, int reverse, int case_sensitive)
{
    size_t *idx = ja_alloc(&c->arena, (l->n + 1) * sizeof *idx);
    struct jv *tmp = ja_alloc(&c->arena, (l->n + 1) * sizeof *tmp);
    if (!idx || !tmp) jinja_fail(c, COLIBRI_ENOMEM, "out of memory");
    for (size_t i = 0; i < l->n; i++) idx[i] = i;
    for (size_t i = 1; i < l->n; i++) {
        size_t x = idx[i], j = i;
        while (j > 0) {
            jinja_step(c);
            int r = cmp_ci(c, keys[idx[j - 1]], keys[x], case_sensitive);
            if (reverse ? r >= 0 : r <= 0) break;
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
    for (size_t i = 0; i < l->n; i++) tmp[i] = l->v[idx[i]];
    memcpy(l->v, tmp, l->n * sizeof *tmp);
}

static struct jv attr_path(struct jctx *c, struct jv it, const struct jv *attr)
{
    if (!attr) return it;
    if (attr->t == JV_INT) return jinja_getitem(c, it, *attr);
    const struct jstr *a = need_str(c, "attribute", *attr);
    /* dotted paths "a.b" as Jinja's make_attrgetter */
    size_t st = 0;
    for (size_t i = 0; i <= a->n; i++) {
        if (i < a->n && a->p[i] != '.') continue;
        struct jv key = jv_strn(c, a->p + st, i - st);
        it = it.t == JV_UNDEF ? it : jinja_getitem(c, it, key);
        st = i + 1;
    }
    return it;
}

static struct jv f_sort(ARGS)
{
    struct jv r = jv_list(c, 0);
    jinja_iter(c, v, r.u.l);
    const struct jv *attr = ARG("attribute", 2);
    struct jv *keys = ja_alloc(&c->arena, (r.u.l->n + 1) * sizeof *keys);
    if (!keys) jinja_fail(c, COLIBRI_ENOMEM, "out of memory");
    for (size_t i = 0; i < r.u.l->n; i++) keys[i] = attr_path(c, r.u.l->v[i], attr);
    sort_list(c, r.u.l, keys, bool_arg(ARG("reverse", 0), 0), bool_arg(ARG("case_sensitive", 1), 0));
    return r;
}

static struct jv f_dictsort(ARGS)
{
    if (v.t != JV_DICT) jinja_fail(c, COLIBRI_EINVAL, "dictsort: expected a dict, got '%s'", jv_type_name(v));
    struct jv r = dict_items(c, v.u.d, 0);
    const struct jv *by = ARG("by", 1);
    int by_value = by && by->t == JV_STR && !strcmp(by->u.s->p, "value");
    struct jv *keys = ja_alloc(&c->arena, (r.u.l->n + 1) * sizeof *keys);
    if (!keys) jinja_fail(c, COLIBRI_ENOMEM, "out of memory");
    for (size_t i = 0; i < r.u.l->n; i++) keys[i] = r.u.l->v[i].u.l->v[by_value];
    sort_list(c, r.u.l, keys, bool_arg(ARG("reverse", 2), 0), bool_arg(ARG("case_sensitive", 0), 0));
    return r;
}

static struct jv f_unique(ARGS)
{
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    int cs = bool_arg(ARG("case_sensitive", 0), 0);
    const struct jv *attr = ARG("attribute", 1);
    struct jv r = jv_list(c, 0), seen = jv_list(c, 0);
    for (size_t i = 0; i < items.n; i++) {
        struct jv k = attr_path(c, items.v[i], attr);
        if (!cs && k.t == JV_STR) k = tok_jinja_case(c, k.u.s, JCASE_LOWER);
        int dup = 0;
        for (size_t j = 0; j < seen.u.l->n && !dup; j++) { jinja_step(c); dup = jv_eq(seen.u.l->v[j], k); }
        if (dup) continue;
        jlist_push(c, seen.u.l, k);
        jlist_push(c, r.u.l, items.v[i]);
    }
    r.u.l->gen = 1;
    return r;
}

static struct jv f_minmax(struct jctx *c, struct jv v, const struct jv *args, size_t nargs,
                          const struct jstr *const *kwn, const struct jv *kwv, size_t nkw, int want_max)
{
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    if (!items.n) return jv_undef();
    int cs = bool_arg(ARG("case_sensitive", 0), 0);
    const struct jv *attr = ARG("attribute", 1);
    size_t best = 0;
    for (size_t i = 1; i < items.n; i++) {
        int r = cmp_ci(c, attr_path(c, items.v[i], attr), attr_path(c, items.v[best], attr), cs);
        if (want_max ? r > 0 : r < 0) best = i;
    }
    return items.v[best];
}
static struct jv f_min(ARGS) { return f_minmax(c, v, args, nargs, kwn, kwv, nkw, 0); }
static struct jv f_max(ARGS) { return f_minmax(c, v, args, nargs, kwn, kwv, nkw, 1); }

static struct jv f_sum(ARGS)
{
    struct jlist items = { 0 };
    jinja_iter(c, v, &items);
    const struct jv *attr = ARG("attribute", 0), *start = ARG("start", 1);
    struct jv acc = start ? *start : jv_int(0);
    for (size_t i = 0; i < items.n; i++) {
        struct jv x = attr_path(c, items.v[i], attr);
        if ((acc.t != JV_INT && acc.t != JV_FLOAT) || (x.t != JV_INT && x.t != JV_FLOAT && x.t != JV_BOOL))
            jinja_fail(c, COLIBRI_EINVAL, "sum: only numbers are supported");
        if (acc.t == JV_INT && x.t != JV_FLOAT) {
            int64_t r;
            if (__builtin_add_overflow(acc.u.i, x.t == JV_INT ? x.u.i : x.u.b, &r)) jinja_fail(c, COLIBRI_EUNSUPPORTED, "sum: integer overflow");
            acc = jv_int(r);
        } else {
            double a = acc.t == JV_INT ? (double)acc.u.i : acc.u.f, b = x.t == JV_FLOAT ? x.u.f : (double)(x.t == JV_INT ? x.u.i : x.u.b);
            acc = jv_float(a + b);
        }
    }
    return acc;
}

/* select/reject/selectattr/rejectattr: keep items whose (attribute's) test
 * result is `keep`; no test name means truthiness. */
static struct jv filter_by_test(struct jctx *c, struct jv v, const struct jv *args, size_t nargs, int by_attr, int keep)
{
    struct jlist items = { 0 };
    if (jv_truthy(v)) jinja_iter(c, v, &items);   /* Jinja2: `if seq:` before iterating */
    size_t a = 0;
    const struct jv *attr = NULL;
    if (by_attr) {
        if (nargs < 1) jinja_fail(c, COLIBRI_EINVAL, "%sattr needs an attribute name", keep ? "select" : "reject");
        attr = &args[a++];
    }
    int test = -1;
    if (a < nargs) {
        const struct jstr *tn = need_str(c, "select", args[a++]);
        test = jinja_test_index(tn->p, tn->n);
        if (test < 0) jinja_fail(c, COLIBRI_EUNSUPPORTED, "unsupported test '%s'", tn->p);
    }
    struct jv r = jv_list(c, 0);
    for (size_t i = 0; i < items.n; i++) {
        struct jv x = attr ? attr_path(c, items.v[i], attr) : items.v[i];
        int ok = test < 0 ? jv_truthy(x) : jinja_call_test(c, test, x, args + a, nargs - a);
        if (ok == keep) jlist_push(c, r.u.l, items.v[i]);
    }
    r.u.l->gen = 1;
    return r;
}
static struct jv f_select(ARGS) { return filter_by_test(c, v, args, nargs, 0, 1); }
static struct jv f_reject(ARGS) { return filter_by_test(c, v, args, nargs, 0, 0); }
static struct jv f_selectattr(ARGS) { return filter_by_test(c, v, args, nargs, 1, 1); }
static struct jv f_rejectattr(ARGS) { return filter_by_test(c, v, args, nargs, 1, 0); }

static struct jv f_map(ARGS)
{
    struct jlist items = { 0 };
    if (jv_truthy(v)) jinja_iter(c, v, &items);   /* Jinja2: `if seq:` before iterating */
    struct jv r = jv_list(c, 0);
    r.u.l->gen = 1;
    const struct jv *attr = NULL, *dflt = NULL;
    for (size_t k = 0; k < nkw; k++) {
        if (!strcmp(kwn[k]->p, "attribute")) attr = &kwv[k];
        else if (!strcmp(kwn[k]->p, "default")) dflt = &kwv[k];
        else jinja_fail(c, COLIBRI_EUNSUPPORTED, "map: unsupported argument '%s'", kwn[k]->p);
    }
    if (attr) {
        for (size_t i = 0; i < items.n; i++) {
            struct jv x = attr_path(c, items.v[i], attr);
            jlist_push(c, r.u.l, x.t == JV_UNDEF && dflt ? *dflt : x);
        }
        return r;
    }
    if (!nargs) jinja_fail(c, COLIBRI_EINVAL, "map needs a filter name or attribute=");
    const struct jstr *fn = need_str(c, "map", args[0]);
    int f = jinja_filter_index(fn->p, fn->n);
    if (f < 0) jinja_fail(c, COLIBRI_EUNSUPPORTED, "unsupported filter '%s'", fn->p);
    for (size_t i = 0; i < items.n; i++)
        jlist_push(c, r.u.l, jinja_call_filter(c, f, items.v[i], args + 1, nargs - 1, NULL, NULL, 0));
    return r;
}

static struct jv f_escape(ARGS) { return jinja_escape(c, v); }

struct jv jinja_escape(struct jctx *c, struct jv v)
{
    if (v.t == JV_STR && v.markup) return v;
    const struct jstr *s = str_of(c, v).u.s;
    struct jbuf b = { 0 };
    for (size_t i = 0; i < s->n; i++) {
        const char *rep = s->p[i] == '&' ? "&amp;" : s->p[i] == '<' ? "&lt;" : s->p[i] == '>' ? "&gt;" :
                          s->p[i] == '"' ? "&#34;" : s->p[i] == '\'' ? "&#39;" : NULL;
        if (rep) jbuf_add(c, &b, rep, strlen(rep));
        else jbuf_add(c, &b, s->p + i, 1);
    }
    struct jv r = jbuf_take(c, &b);
    r.markup = 1;
    return r;
}

typedef struct jv (*filter_fn)(ARGS);
static const struct { const char *name; filter_fn fn; } FILTERS[] = {
    { "length", f_length }, { "count", f_length }, { "tojson", f_tojson }, { "items", f_items },
    { "join", f_join }, { "default", f_default }, { "d", f_default }, { "upper", f_upper },
    { "lower", f_lower }, { "capitalize", f_capitalize }, { "title", f_title }, { "string", f_string },
    { "safe", f_safe }, { "trim", f_trim }, { "replace", f_replace }, { "first", f_first },
    { "last", f_last }, { "list", f_list }, { "reverse", f_reverse }, { "int", f_int },
    { "float", f_float }, { "abs", f_abs }, { "round", f_round }, { "indent", f_indent },
    { "sort", f_sort }, { "dictsort", f_dictsort }, { "unique", f_unique }, { "min", f_min },
    { "max", f_max }, { "sum", f_sum }, { "select", f_select }, { "reject", f_reject },
    { "selectattr", f_selectattr }, { "rejectattr", f_rejectattr }, { "map", f_map },
    { "escape", f_escape }, { "e", f_escape },
};
#define N_FILTERS (sizeof FILTERS / sizeof *FILTERS)

int jinja_filter_index(const char *name, size_t n)
{
    for (size_t i = 0; i < N_FILTERS; i++) if (strlen(FILTERS[i].name) == n && !memcmp(FILTERS[i].name, name, n)) return (int)i;
    return -1;
}

struct jv jinja_call_filter(struct jctx *c, int idx, struct jv v, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    jinja_step(c);
    return FILTERS[idx].fn(c, v, args, nargs, kwn, kwv, nkw);
}

/* ------------------------------------------------------------ globals */

static const char *const GLOBAL_NAMES[] = { "raise_exception", "namespace", "range", "dict", "strftime_now", NULL };

int jinja_global_index(const char *name, size_t n)
{
    for (int i = 0; GLOBAL_NAMES[i]; i++) if (strlen(GLOBAL_NAMES[i]) == n && !memcmp(GLOBAL_NAMES[i], name, n)) return i;
    return -1;
}

struct jv jinja_call_global(struct jctx *c, int idx, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    switch (idx) {
    case 0: {
        struct jv msg = nargs ? jv_to_str(c, args[0]) : jv_str(c, "");
        jinja_fail(c, COLIBRI_EINVAL, "template error: %s", msg.u.s->p);
    }
    case 1: case 3: {
        struct jv d = jv_dict(c, 0);
        if (nargs > 1 || (nargs == 1 && args[0].t != JV_DICT))
            jinja_fail(c, COLIBRI_EINVAL, "%s() takes keyword arguments or one dict", GLOBAL_NAMES[idx]);
        if (nargs) for (size_t i = 0; i < args[0].u.d->n; i++) jdict_set(c, d.u.d, args[0].u.d->k[i], args[0].u.d->v[i]);
        for (size_t k = 0; k < nkw; k++) jdict_set(c, d.u.d, (struct jv){ .t = JV_STR, .u.s = kwn[k] }, kwv[k]);
        if (idx == 1) d.t = JV_NS;
        return d;
    }
    case 2: {
        if (nkw || nargs < 1 || nargs > 3) jinja_fail(c, COLIBRI_EINVAL, "range takes 1 to 3 integer arguments");
        int64_t a = 0, b, s = 1;
        if (nargs == 1) b = int_arg(c, "range", &args[0], 0);
        else { a = int_arg(c, "range", &args[0], 0); b = int_arg(c, "range", &args[1], 0); }
        if (nargs == 3) s = int_arg(c, "range", &args[2], 1);
        if (!s) jinja_fail(c, COLIBRI_EINVAL, "range: step must not be zero");
        struct jv r = jv_list(c, 0);
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s) {
            jinja_step(c);
            jlist_push(c, r.u.l, jv_int(i));
            if ((s > 0 && i > INT64_MAX - s) || (s < 0 && i < INT64_MIN - s)) break;
        }
        return r;
    }
    case 4: {
        if (nargs != 1 || nkw) jinja_fail(c, COLIBRI_EINVAL, "strftime_now takes one format string");
        const struct jstr *f = need_str(c, "strftime_now", args[0]);
        time_t now = c->lim.now ? (time_t)c->lim.now : time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[256];
        size_t n = strftime(buf, sizeof buf, f->p, &tm);
        return jv_strn(c, buf, n);
    }
    }
    jinja_fail(c, COLIBRI_EINVAL, "internal: global %d", idx);
}
