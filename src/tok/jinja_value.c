/* tok/jinja_value.c - the arena, values, and their Python spellings: str(),
 * repr() and json.dumps() as transformers' tojson calls it (contract in
 * jinja.h; shared types in jinja_internal.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/jinja_internal.h"
#include "tok/tok_unicase.h"
#include "tok/tok_utf8.h"

/* ------------------------------------------------------------ arena */

void *ja_alloc(struct jarena *a, size_t n)
{
    void *p = base_arena_alloc(&a->base, n);
    if (p) memset(p, 0, n);
    return p;
}

void ja_free(struct jarena *a) { base_arena_free(&a->base); }

static void *calloc_c(struct jctx *c, size_t n)
{
    void *p = ja_alloc(&c->arena, n);
    if (!p) jinja_fail(c, COLIBRI_ENOMEM, "rendering needs more than %zu bytes of memory", c->lim.max_memory);
    return p;
}

/* ------------------------------------------------------------ constructors */

struct jv jv_undef(void) { return (struct jv){ .t = JV_UNDEF }; }
struct jv jv_none(void) { return (struct jv){ .t = JV_NONE }; }
struct jv jv_bool(int b) { return (struct jv){ .t = JV_BOOL, .u.b = !!b }; }
struct jv jv_int(int64_t i) { return (struct jv){ .t = JV_INT, .u.i = i }; }
struct jv jv_float(double f) { return (struct jv){ .t = JV_FLOAT, .u.f = f }; }

const struct jstr *jstr_new(struct jarena *a, const char *p, size_t n)
{
    struct jstr *s = ja_alloc(a, sizeof *s + n + 1);
    if (!s) return NULL;
    if (n) memcpy(s->p, p, n);
    s->p[n] = 0;
    s->n = n;
    return s;
}

struct jv jv_strn(struct jctx *c, const char *p, size_t n)
{
    const struct jstr *s = jstr_new(&c->arena, p, n);
    if (!s) jinja_fail(c, COLIBRI_ENOMEM, "rendering needs more than %zu bytes of memory", c->lim.max_memory);
    return (struct jv){ .t = JV_STR, .u.s = s };
}

struct jv jv_str(struct jctx *c, const char *p) { return jv_strn(c, p, strlen(p)); }

struct jv jv_list(struct jctx *c, size_t cap)
{
    struct jlist *l = calloc_c(c, sizeof *l);
    if (cap) { l->v = calloc_c(c, cap * sizeof *l->v); l->cap = cap; }
    return (struct jv){ .t = JV_LIST, .u.l = l };
}

struct jv jv_dict(struct jctx *c, size_t cap)
{
    struct jdict *d = calloc_c(c, sizeof *d);
    if (cap) { d->k = calloc_c(c, cap * sizeof *d->k); d->v = calloc_c(c, cap * sizeof *d->v); d->cap = cap; }
    return (struct jv){ .t = JV_DICT, .u.d = d };
}

void jlist_push(struct jctx *c, struct jlist *l, struct jv v)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        struct jv *nv = calloc_c(c, nc * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
}

struct jv *jdict_get(const struct jdict *d, struct jv k)
{
    for (size_t i = 0; i < d->n; i++) if (jv_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

struct jv *jdict_gets(const struct jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->n == n && !memcmp(d->k[i].u.s->p, k, n)) return &d->v[i];
    return NULL;
}

void jdict_set(struct jctx *c, struct jdict *d, struct jv k, struct jv v)
{
    struct jv *have = jdict_get(d, k);
    if (have) { *have = v; return; }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 2;
        struct jv *nk = calloc_c(c, nc * sizeof *nk), *nv = calloc_c(c, nc * sizeof *nv);
        if (d->n) { memcpy(nk, d->k, d->n * sizeof *nk); memcpy(nv, d->v, d->n * sizeof *nv); }
        d->k = nk; d->v = nv; d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

/* ------------------------------------------------------------ semantics */

int jv_truthy(struct jv v)
{
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->n != 0;
    case JV_LIST: return v.u.l->gen || v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

static int is_num(struct jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num_of(struct jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }
static int64_t int_of(struct jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

int jv_eq(struct jv a, struct jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return int_of(a) == int_of(b);
        return num_of(a) == num_of(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.u.s->n == b.u.s->n && !memcmp(a.u.s->p, b.u.s->p, a.u.s->n);
    case JV_LIST:
        if (a.u.l->gen || b.u.l->gen) return a.u.l == b.u.l;
        if (a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++) if (!jv_eq(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct jv *o = jdict_get(b.u.d, a.u.d->k[i]);
            if (!o || !jv_eq(a.u.d->v[i], *o)) return 0;
        }
        return 1;
    case JV_NS: return a.u.d == b.u.d;
    case JV_MACRO: return a.u.macro == b.u.macro;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
    }
}

const char *jv_type_name(struct jv v)
{
    static const char *const N[] = { [JV_UNDEF] = "Undefined", [JV_NONE] = "NoneType", [JV_BOOL] = "bool",
        [JV_INT] = "int", [JV_FLOAT] = "float", [JV_STR] = "str", [JV_LIST] = "list", [JV_DICT] = "dict",
        [JV_NS] = "Namespace", [JV_MACRO] = "Macro", [JV_FUNC] = "function", [JV_LOOP] = "LoopContext",
        [JV_METHOD] = "method" };
    return N[v.t];
}

int jv_cmp(struct jctx *c, struct jv a, struct jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
        double x = num_of(a), y = num_of(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        int r = memcmp(a.u.s->p, b.u.s->p, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return jv_cmp(c, a.u.l->v[i], b.u.l->v[i]);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jinja_fail(c, COLIBRI_EINVAL, "'<' not supported between '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

struct jv jv_from_json(struct jctx *c, const cJSON *j)
{
    if (!j || cJSON_IsNull(j)) return jv_none();
    if (cJSON_IsFalse(j)) return jv_bool(0);
    if (cJSON_IsTrue(j)) return jv_bool(1);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (j->valuestring) {   /* its literal (tok_jinja_json_parse): json.loads' int or float */
            const char *lit = j->valuestring;
            if (strpbrk(lit, ".eE")) return jv_float(d);
            errno = 0;
            char *e;
            long long i = strtoll(lit, &e, 10);
            if (!errno && !*e) return jv_int(i);
            return jv_float(d);   /* past 64 bits (Python's int has no limit) */
        }
        if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_str(c, j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        struct jv l = jv_list(c, 0);
        const cJSON *it;
        cJSON_ArrayForEach(it, j) jlist_push(c, l.u.l, jv_from_json(c, it));
        return l;
    }
    if (cJSON_IsObject(j)) {
        struct jv d = jv_dict(c, 0);
        const cJSON *it;
        cJSON_ArrayForEach(it, j) jdict_set(c, d.u.d, jv_str(c, it->string ? it->string : ""), jv_from_json(c, it));
        return d;
    }
    return jv_none();
}

/* The next number literal at or after *p (outside strings), or NULL. */
static const char *next_number(const char **p, const char *end, size_t *n)
{
    const char *q = *p;
    while (q < end) {
        if (*q == '"') {
            for (q++; q < end && *q != '"'; q++) if (*q == '\\') q++;
            q++;
            continue;
        }
        if (*q == '-' || (*q >= '0' && *q <= '9')) {
            const char *s = q;
            while (q < end && (*q == '-' || *q == '+' || *q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9'))) q++;
            *n = (size_t)(q - s);
            *p = q;
            return s;
        }
        q++;
    }
    *p = end;
    return NULL;
}

/* Gives each number node in j, in document order (the order cJSON keeps),
 * its literal from the text; 0 on OOM. */
static int keep_literals(cJSON *j, const char **p, const char *end)
{
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            size_t n;
            const char *lit = next_number(p, end, &n);
            if (!lit) return 1;
            if (!(j->valuestring = cJSON_malloc(n + 1))) return 0;
            memcpy(j->valuestring, lit, n);
            j->valuestring[n] = 0;
        } else if (j->child && !keep_literals(j->child, p, end)) {
            return 0;
        }
    }
    return 1;
}

cJSON *tok_jinja_json_parse(const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    const char *p = text;
    if (j && !keep_literals(j, &p, end)) { cJSON_Delete(j); return NULL; }
    return j;
}

/* ------------------------------------------------------------ text */

void jbuf_add(struct jctx *c, struct jbuf *b, const char *p, size_t n)
{
    if (!n) return;
    if (b->n + n > c->lim.max_output)
        jinja_fail(c, COLIBRI_EINVAL, "rendered text would exceed %zu bytes", c->lim.max_output);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = calloc_c(c, nc);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void add_s(struct jctx *c, struct jbuf *b, const char *s) { jbuf_add(c, b, s, strlen(s)); }

struct jv jbuf_take(struct jctx *c, struct jbuf *b) { return jv_strn(c, b->p ? b->p : "", b->n); }

/* Python's repr(float): the shortest digits that read back to the same
 * double, positional when the exponent is in [-4, 16), else d.ddde+XX. */
void jfloat_repr(double f, char *out, size_t cap)
{
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e is [-]d[.ddd]e[+-]XX */
    const char *p = e;
    int neg = *p == '-';
    if (neg) p++;
    char digits[24]; int nd = 0;
    for (; *p && *p != 'e'; p++) if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int exp = atoi(p + 1);
    char *o = out;
    size_t left = cap;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) PUT("-");
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            PUT("0.");
            for (int i = 0; i < -exp - 1; i++) PUT("0");
            PUT("%s", digits);
        } else if (nd <= exp + 1) {
            PUT("%s", digits);
            for (int i = nd; i < exp + 1; i++) PUT("0");
            PUT(".0");
        } else {
            PUT("%.*s.%s", exp + 1, digits, digits + exp + 1);
        }
    } else {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
#undef PUT
}

/* Python's repr(str): quotes, backslash escapes, and \xNN / \uNNNN /
 * \UNNNNNNNN for what str.isprintable() calls unprintable. */
static void repr_str(struct jctx *c, struct jbuf *b, const struct jstr *s)
{
    char q = memchr(s->p, '\'', s->n) && !memchr(s->p, '"', s->n) ? '"' : '\'';
    jbuf_add(c, b, &q, 1);
    for (size_t i = 0; i < s->n;) {
        unsigned char ch = (unsigned char)s->p[i];
        char tmp[16];
        size_t bad = 0, len = tok_utf8_valid_len((const unsigned char *)s->p + i, s->n - i, &bad);
        uint32_t cp = ch;
        if (len) tok_utf8_decode((const unsigned char *)s->p + i, &cp);
        else len = bad;   /* not UTF-8: the bytes as they are (a Python str cannot hold them) */
        if (cp == '\\') add_s(c, b, "\\\\");
        else if (cp == (unsigned char)q) { tmp[0] = '\\'; tmp[1] = (char)q; jbuf_add(c, b, tmp, 2); }
        else if (cp == '\n') add_s(c, b, "\\n");
        else if (cp == '\r') add_s(c, b, "\\r");
        else if (cp == '\t') add_s(c, b, "\\t");
        else if (bad || !(tok_uc_props(cp) & TOK_UC_NONPRINT)) jbuf_add(c, b, s->p + i, len);
        else {
            snprintf(tmp, sizeof tmp, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", (unsigned)cp);
            add_s(c, b, tmp);
        }
        i += len;
    }
    jbuf_add(c, b, &q, 1);
}

void jv_repr_into(struct jctx *c, struct jbuf *b, struct jv v)
{
    jinja_step(c);
    switch (v.t) {
    case JV_STR: repr_str(c, b, v.u.s); return;
    case JV_LIST:
        if (v.u.l->gen) jinja_fail(c, COLIBRI_EUNSUPPORTED, "printing a generator (Python prints its address); add |list");
        add_s(c, b, v.u.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) { if (i) add_s(c, b, ", "); jv_repr_into(c, b, v.u.l->v[i]); }
        if (v.u.l->tuple && v.u.l->n == 1) add_s(c, b, ",");
        add_s(c, b, v.u.l->tuple ? ")" : "]");
        return;
    case JV_DICT:
        add_s(c, b, "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) add_s(c, b, ", ");
            jv_repr_into(c, b, v.u.d->k[i]);
            add_s(c, b, ": ");
            jv_repr_into(c, b, v.u.d->v[i]);
        }
        add_s(c, b, "}");
        return;
    default: jv_str_into(c, b, v);
    }
}

void jv_str_into(struct jctx *c, struct jbuf *b, struct jv v)
{
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: add_s(c, b, "None"); return;
    case JV_BOOL: add_s(c, b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); add_s(c, b, tmp); return;
    case JV_FLOAT: jfloat_repr(v.u.f, tmp, sizeof tmp); add_s(c, b, tmp); return;
    case JV_STR: jbuf_add(c, b, v.u.s->p, v.u.s->n); return;
    case JV_LIST:
        if (v.u.l->gen) jinja_fail(c, COLIBRI_EUNSUPPORTED, "printing a generator (Python prints its address); add |list");
        jv_repr_into(c, b, v);
        return;
    case JV_DICT: jv_repr_into(c, b, v); return;
    case JV_NS:
        add_s(c, b, "<Namespace ");
        jv_repr_into(c, b, (struct jv){ .t = JV_DICT, .u.d = v.u.d });
        add_s(c, b, ">");
        return;
    default:
        snprintf(tmp, sizeof tmp, "<%s>", jv_type_name(v));
        add_s(c, b, tmp);
    }
}

struct jv jv_to_str(struct jctx *c, struct jv v)
{
    if (v.t == JV_STR) return v;
    struct jbuf b = { 0 };
    jv_str_into(c, &b, v);
    return jbuf_take(c, &b);
}

static void json_str(struct jctx *c, struct jbuf *b, const char *p, size_t n, int ensure_ascii)
{
    add_s(c, b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        char tmp[16];
        if (ch == '"') add_s(c, b, "\\\"");
        else if (ch == '\\') add_s(c, b, "\\\\");
        else if (ch == '\n') add_s(c, b, "\\n");
        else if (ch == '\r') add_s(c, b, "\\r");
        else if (ch == '\t') add_s(c, b, "\\t");
        else if (ch == '\b') add_s(c, b, "\\b");
        else if (ch == '\f') add_s(c, b, "\\f");
        else if (ch < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", ch); add_s(c, b, tmp); }
        else if (ch >= 0x80 && ensure_ascii) {
            uint32_t cp; size_t len;
            if (ch >= 0xf0) { cp = ch & 0x07; len = 4; }
            else if (ch >= 0xe0) { cp = ch & 0x0f; len = 3; }
            else { cp = ch & 0x1f; len = 2; }
            if (i + len > n) len = n - i;
            for (size_t k = 1; k < len; k++) cp = cp << 6 | ((unsigned char)p[i + k] & 0x3f);
            i += len - 1;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            add_s(c, b, tmp);
        } else jbuf_add(c, b, (const char *)&ch, 1);
    }
    add_s(c, b, "\"");
}

static void json_newline(struct jctx *c, struct jbuf *b, int indent, int level)
{
    add_s(c, b, "\n");
    for (int i = 0; i < indent * level; i++) add_s(c, b, " ");
}

static int cmp_keys(const void *x, const void *y)
{
    const struct jv *a = *(const struct jv *const *)x, *b = *(const struct jv *const *)y;
    size_t n = a->u.s->n < b->u.s->n ? a->u.s->n : b->u.s->n;
    int r = memcmp(a->u.s->p, b->u.s->p, n);
    return r ? r : (a->u.s->n > b->u.s->n) - (a->u.s->n < b->u.s->n);
}

void jv_json_into(struct jctx *c, struct jbuf *b, struct jv v, int ensure_ascii, int indent,
                  const char *item_sep, const char *key_sep, int sort_keys, int level)
{
    jinja_step(c);
    if (level > JINJA_MAX_NEST) jinja_fail(c, COLIBRI_EINVAL, "tojson: nested more than %d deep", JINJA_MAX_NEST);
    if (!item_sep) item_sep = indent >= 0 ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    char tmp[64];
    switch (v.t) {
    case JV_NONE: add_s(c, b, "null"); return;
    case JV_BOOL: add_s(c, b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); add_s(c, b, tmp); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) add_s(c, b, "NaN");
        else if (isinf(v.u.f)) add_s(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else { jfloat_repr(v.u.f, tmp, sizeof tmp); add_s(c, b, tmp); }
        return;
    case JV_STR: json_str(c, b, v.u.s->p, v.u.s->n, ensure_ascii); return;
    case JV_LIST:
        if (v.u.l->gen) jinja_fail(c, COLIBRI_EINVAL, "tojson: object of type 'generator' is not JSON serializable");
        if (!v.u.l->n) { add_s(c, b, "[]"); return; }
        add_s(c, b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) add_s(c, b, item_sep);
            if (indent >= 0) json_newline(c, b, indent, level + 1);
            jv_json_into(c, b, v.u.l->v[i], ensure_ascii, indent, item_sep, key_sep, sort_keys, level + 1);
        }
        if (indent >= 0) json_newline(c, b, indent, level);
        add_s(c, b, "]");
        return;
    case JV_DICT: case JV_NS: {
        struct jdict *d = v.u.d;
        if (!d->n) { add_s(c, b, "{}"); return; }
        const struct jv **order = calloc_c(c, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) {
            if (d->k[i].t != JV_STR)
                jinja_fail(c, COLIBRI_EINVAL, "tojson: a dict key of type '%s' (only str keys are supported)", jv_type_name(d->k[i]));
            order[i] = &d->k[i];
        }
        if (sort_keys) qsort(order, d->n, sizeof *order, cmp_keys);
        add_s(c, b, "{");
        for (size_t i = 0; i < d->n; i++) {
            if (i) add_s(c, b, item_sep);
            if (indent >= 0) json_newline(c, b, indent, level + 1);
            size_t k = (size_t)(order[i] - d->k);
            json_str(c, b, d->k[k].u.s->p, d->k[k].u.s->n, ensure_ascii);
            add_s(c, b, key_sep);
            jv_json_into(c, b, d->v[k], ensure_ascii, indent, item_sep, key_sep, sort_keys, level + 1);
        }
        if (indent >= 0) json_newline(c, b, indent, level);
        add_s(c, b, "}");
        return;
    }
    default:
        jinja_fail(c, COLIBRI_EINVAL, "tojson: object of type '%s' is not JSON serializable", jv_type_name(v));
    }
}

/* ------------------------------------------------------------ UTF-8 */

size_t ju_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) if (((unsigned char)s[i] & 0xc0) != 0x80) k++;
    return k;
}

size_t ju_off(const char *s, size_t n, size_t i)
{
    size_t k = 0, b = 0;
    for (; b < n; b++) {
        if (((unsigned char)s[b] & 0xc0) != 0x80) { if (k == i) return b; k++; }
    }
    return n;
}

size_t ju_space(const char *s, size_t n)
{
    unsigned char c0 = (unsigned char)s[0];
    if (c0 == ' ' || (c0 >= 0x09 && c0 <= 0x0d) || (c0 >= 0x1c && c0 <= 0x1f)) return 1;
    if (n >= 2 && c0 == 0xc2 && ((unsigned char)s[1] == 0x85 || (unsigned char)s[1] == 0xa0)) return 2;
    if (n >= 3) {
        unsigned char c1 = (unsigned char)s[1], c2 = (unsigned char)s[2];
        if (c0 == 0xe1 && c1 == 0x9a && c2 == 0x80) return 3;                 /* U+1680 */
        if (c0 == 0xe2 && c1 == 0x80 && (c2 <= 0x8a || c2 == 0xa8 || c2 == 0xa9 || c2 == 0xaf)) return 3;
        if (c0 == 0xe2 && c1 == 0x81 && c2 == 0x9f) return 3;                 /* U+205F */
        if (c0 == 0xe3 && c1 == 0x80 && c2 == 0x80) return 3;                 /* U+3000 */
    }
    return 0;
}
