/* tok/jinja_parse.c - tokens to a syntax tree, by recursive descent in the
 * shape of Jinja2's own parser (precedence, lowest first: conditional
 * expression, or, and, not, comparisons, + -, ~, * / // %, **, unary - +,
 * then postfix ., [], () with filters and tests binding tightest, so
 * `-x|abs` is abs(-x) and `not x is defined` is not (x is defined)).
 * Unsupported statements, filters, tests and methods are refused here, by
 * name and line, so a template is known to be runnable once it loads. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "tok/jinja_internal.h"

struct parser {
    const struct jtok *t; size_t n, i;
    struct jarena *a;
    struct colibri_err *err;
    jmp_buf fail;
    int code;
    int nest;          /* current nesting, bounded by JINJA_MAX_NEST */
    int loops;         /* enclosing for loops (break/continue need one) */
};

__attribute__((format(printf, 4, 5)))
static _Noreturn void pfail(struct parser *P, int code, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->code = base_err_set(P->err, code, "chat template line %d: %s", line, msg);
    longjmp(P->fail, 1);
}

static void *palloc(struct parser *P, size_t n)
{
    void *p = ja_alloc(P->a, n);
    if (!p) { P->code = base_err_set(P->err, COLIBRI_ENOMEM, "chat template: out of memory"); longjmp(P->fail, 1); }
    return p;
}

static const struct jtok *cur(struct parser *P) { return &P->t[P->i]; }
static int is_op(const struct jtok *t, const char *op) { return t->k == JT_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n); }
static int is_name(const struct jtok *t, const char *nm) { return t->k == JT_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n); }
static void advance(struct parser *P) { if (P->t[P->i].k != JT_EOF) P->i++; }
static int skip_op(struct parser *P, const char *op) { if (is_op(cur(P), op)) { advance(P); return 1; } return 0; }
static int skip_name(struct parser *P, const char *nm) { if (is_name(cur(P), nm)) { advance(P); return 1; } return 0; }

static const char *tok_desc(const struct jtok *t, char *buf, size_t cap)
{
    switch (t->k) {
    case JT_NAME: case JT_OP: snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
    case JT_STRING: return "a string";
    case JT_INT: case JT_FLOAT: return "a number";
    case JT_BLOCK_END: return "'%}'";
    case JT_VAR_END: return "'}}'";
    case JT_EOF: return "the end of the template";
    default: return "text";
    }
}

static void expect_op(struct parser *P, const char *op)
{
    if (!skip_op(P, op)) {
        char b[64];
        pfail(P, COLIBRI_EFORMAT, cur(P)->line, "expected '%s', found %s", op, tok_desc(cur(P), b, sizeof b));
    }
}

static void expect_kind(struct parser *P, enum jt_kind k, const char *what)
{
    if (cur(P)->k != k) {
        char b[64];
        pfail(P, COLIBRI_EFORMAT, cur(P)->line, "expected %s, found %s", what, tok_desc(cur(P), b, sizeof b));
    }
    advance(P);
}

static const struct jstr *name_str(struct parser *P, const struct jtok *t)
{
    const struct jstr *s = jstr_new(P->a, t->s, t->n);
    if (!s) { P->code = base_err_set(P->err, COLIBRI_ENOMEM, "chat template: out of memory"); longjmp(P->fail, 1); }
    return s;
}

static const struct jstr *expect_name(struct parser *P)
{
    if (cur(P)->k != JT_NAME) {
        char b[64];
        pfail(P, COLIBRI_EFORMAT, cur(P)->line, "expected a name, found %s", tok_desc(cur(P), b, sizeof b));
    }
    const struct jstr *s = name_str(P, cur(P));
    advance(P);
    return s;
}

static struct jnode *node(struct parser *P, enum jn_kind k, int line)
{
    struct jnode *n = palloc(P, sizeof *n);
    n->k = k;
    n->line = line;
    return n;
}

/* a growable array of pointers, copied into the arena when done */
struct pvec { void **v; size_t n, cap; };
static void pv_push(struct parser *P, struct pvec *v, void *x)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 8;
        void **nv = palloc(P, nc * sizeof *nv);
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

static void nest_in(struct parser *P)
{
    if (++P->nest > JINJA_MAX_NEST)
        pfail(P, COLIBRI_EUNSUPPORTED, cur(P)->line, "nested more than %d deep", JINJA_MAX_NEST);
}

static struct jnode *parse_expr(struct parser *P);
static struct jnode *parse_or(struct parser *P);
static struct jnode *parse_unary(struct parser *P, int with_filter);

/* positional and keyword arguments up to the closing ')' (already past '(') */
static void parse_args(struct parser *P, struct jnode *n)
{
    struct pvec pos = { 0 }, kwv = { 0 }, kwn = { 0 };
    while (!is_op(cur(P), ")")) {
        if (pos.n + kwv.n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;   /* trailing comma */
        if (cur(P)->k == JT_NAME && P->i + 1 < P->n && is_op(&P->t[P->i + 1], "=")) {
            pv_push(P, &kwn, (void *)expect_name(P));
            advance(P);
            pv_push(P, &kwv, parse_expr(P));
        } else {
            if (kwv.n) pfail(P, COLIBRI_EFORMAT, cur(P)->line, "a positional argument after a keyword argument");
            pv_push(P, &pos, parse_expr(P));
        }
    }
    expect_op(P, ")");
    n->kids = (struct jnode **)pos.v; n->nkids = pos.n;
    n->kids2 = (struct jnode **)kwv.v; n->nkids2 = kwv.n;
    n->names = (const struct jstr **)kwn.v; n->nnames = kwn.n;
}

static struct jnode *parse_primary(struct parser *P)
{
    const struct jtok *t = cur(P);
    struct jnode *n;
    char b[64];
    switch (t->k) {
    case JT_NAME:
        n = node(P, JN_LIT, t->line);
        if (is_name(t, "true") || is_name(t, "True")) n->lit = jv_bool(1);
        else if (is_name(t, "false") || is_name(t, "False")) n->lit = jv_bool(0);
        else if (is_name(t, "none") || is_name(t, "None")) n->lit = jv_none();
        else { n->k = JN_NAME; n->name = name_str(P, t); }
        advance(P);
        return n;
    case JT_STRING: {
        /* adjacent literals concatenate, as in Python */
        size_t total = 0, j = P->i;
        while (P->t[j].k == JT_STRING) total += P->t[j++].str->n;
        n = node(P, JN_LIT, t->line);
        struct jstr *s = palloc(P, sizeof *s + total + 1);
        size_t o = 0;
        while (cur(P)->k == JT_STRING) { memcpy(s->p + o, cur(P)->str->p, cur(P)->str->n); o += cur(P)->str->n; advance(P); }
        s->p[o] = 0;
        s->n = o;
        n->lit = (struct jv){ .t = JV_STR, .u.s = s };
        return n;
    }
    case JT_INT: n = node(P, JN_LIT, t->line); n->lit = jv_int(t->i); advance(P); return n;
    case JT_FLOAT: n = node(P, JN_LIT, t->line); n->lit = jv_float(t->f); advance(P); return n;
    case JT_OP:
        if (is_op(t, "(")) {
            advance(P);
            struct pvec items = { 0 };
            int tuple = 0;
            while (!is_op(cur(P), ")")) {
                if (items.n) { expect_op(P, ","); tuple = 1; if (is_op(cur(P), ")")) break; }
                pv_push(P, &items, parse_expr(P));
            }
            expect_op(P, ")");
            if (items.n == 1 && !tuple) return items.v[0];
            n = node(P, JN_TUPLE, t->line);
            n->kids = (struct jnode **)items.v; n->nkids = items.n;
            return n;
        }
        if (is_op(t, "[")) {
            advance(P);
            struct pvec items = { 0 };
            while (!is_op(cur(P), "]")) {
                if (items.n) { expect_op(P, ","); if (is_op(cur(P), "]")) break; }
                pv_push(P, &items, parse_expr(P));
            }
            expect_op(P, "]");
            n = node(P, JN_LIST, t->line);
            n->kids = (struct jnode **)items.v; n->nkids = items.n;
            return n;
        }
        if (is_op(t, "{")) {
            advance(P);
            struct pvec keys = { 0 }, vals = { 0 };
            while (!is_op(cur(P), "}")) {
                if (keys.n) { expect_op(P, ","); if (is_op(cur(P), "}")) break; }
                pv_push(P, &keys, parse_expr(P));
                expect_op(P, ":");
                pv_push(P, &vals, parse_expr(P));
            }
            expect_op(P, "}");
            n = node(P, JN_DICT, t->line);
            n->kids = (struct jnode **)keys.v; n->nkids = keys.n;
            n->kids2 = (struct jnode **)vals.v; n->nkids2 = vals.n;
            return n;
        }
        /* fall through */
    default:
        pfail(P, COLIBRI_EFORMAT, t->line, "unexpected %s in an expression", tok_desc(t, b, sizeof b));
    }
}

static struct jnode *parse_subscript(struct parser *P, struct jnode *obj, int line)
{
    /* [expr] or a slice [a:b:c] with any part left out */
    struct jnode *part[3] = { 0 };
    int colons = 0;
    for (;;) {
        if (is_op(cur(P), "]")) break;
        if (is_op(cur(P), ":")) {
            if (++colons > 2) pfail(P, COLIBRI_EFORMAT, line, "a slice has at most two ':'");
            advance(P);
            continue;
        }
        if (part[colons]) pfail(P, COLIBRI_EFORMAT, line, "bad subscript");
        part[colons] = parse_expr(P);
    }
    expect_op(P, "]");
    struct jnode *n;
    if (!colons) {
        if (!part[0]) pfail(P, COLIBRI_EFORMAT, line, "empty subscript");
        n = node(P, JN_GETITEM, line);
        n->a = obj; n->b = part[0];
        return n;
    }
    n = node(P, JN_SLICE, line);
    n->a = obj;
    n->kids = palloc(P, 3 * sizeof *n->kids);
    n->nkids = 3;
    for (int i = 0; i < 3; i++) n->kids[i] = part[i];
    return n;
}

static struct jnode *parse_postfix(struct parser *P, struct jnode *n)
{
    for (;;) {
        const struct jtok *t = cur(P);
        if (is_op(t, ".")) {
            advance(P);
            if (cur(P)->k == JT_INT) {
                struct jnode *g = node(P, JN_GETITEM, t->line), *idx = node(P, JN_LIT, t->line);
                idx->lit = jv_int(cur(P)->i);
                advance(P);
                g->a = n; g->b = idx;
                n = g;
                continue;
            }
            struct jnode *g = node(P, JN_GETATTR, t->line);
            g->a = n;
            g->name = expect_name(P);
            n = g;
        } else if (is_op(t, "[")) {
            advance(P);
            n = parse_subscript(P, n, t->line);
        } else if (is_op(t, "(")) {
            advance(P);
            if (n->k == JN_GETATTR && !jinja_method_known(n->name->p, n->name->n))
                pfail(P, COLIBRI_EUNSUPPORTED, t->line, "unsupported method '%s'", n->name->p);
            struct jnode *c = node(P, JN_CALL, t->line);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else {
            return n;
        }
    }
}

static int starts_test_arg(const struct jtok *t)
{
    if (t->k == JT_NAME) return !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and") &&
                                !is_name(t, "if") && !is_name(t, "in") && !is_name(t, "not") && !is_name(t, "is");
    return t->k == JT_STRING || t->k == JT_INT || t->k == JT_FLOAT || is_op(t, "(") || is_op(t, "[") || is_op(t, "{");
}

static struct jnode *parse_filter_chain(struct parser *P, struct jnode *n)
{
    for (;;) {
        const struct jtok *t = cur(P);
        if (is_op(t, "|")) {
            advance(P);
            const struct jtok *nt = cur(P);
            const struct jstr *nm = expect_name(P);
            int idx = jinja_filter_index(nm->p, nm->n);
            if (idx < 0) pfail(P, COLIBRI_EUNSUPPORTED, nt->line, "unsupported filter '%s'", nm->p);
            struct jnode *f = node(P, JN_FILTER, t->line);
            f->a = n; f->op = idx; f->name = nm;
            if (skip_op(P, "(")) parse_args(P, f);
            n = f;
        } else if (is_name(t, "is")) {
            advance(P);
            int neg = skip_name(P, "not");
            const struct jtok *nt = cur(P);
            const struct jstr *nm;
            /* `is none`, `is true`, `is false` spell tests with literal names */
            if (nt->k == JT_NAME) nm = expect_name(P);
            else pfail(P, COLIBRI_EFORMAT, nt->line, "expected a test name after 'is'");
            int idx = jinja_test_index(nm->p, nm->n);
            if (idx < 0) pfail(P, COLIBRI_EUNSUPPORTED, nt->line, "unsupported test '%s'", nm->p);
            struct jnode *f = node(P, JN_TEST, t->line);
            f->a = n; f->op = idx; f->name = nm; f->c = neg ? f : NULL;
            if (skip_op(P, "(")) parse_args(P, f);
            else if (starts_test_arg(cur(P))) {
                f->kids = palloc(P, sizeof *f->kids);
                f->kids[0] = parse_postfix(P, parse_primary(P));
                f->nkids = 1;
            }
            n = f;
        } else {
            return n;
        }
    }
}

static struct jnode *parse_unary(struct parser *P, int with_filter)
{
    nest_in(P);
    const struct jtok *t = cur(P);
    struct jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        advance(P);
        n = node(P, is_op(t, "-") ? JN_NEG : JN_POS, t->line);
        n->a = parse_unary(P, 0);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_chain(P, n);
    P->nest--;
    return n;
}

static struct jnode *binop(struct parser *P, int op, struct jnode *a, struct jnode *b, int line)
{
    struct jnode *n = node(P, JN_BINOP, line);
    n->op = op; n->a = a; n->b = b;
    return n;
}

static struct jnode *parse_pow(struct parser *P)
{
    struct jnode *n = parse_unary(P, 1);
    while (is_op(cur(P), "**")) { int l = cur(P)->line; advance(P); n = binop(P, JOP_POW, n, parse_unary(P, 1), l); }
    return n;
}

static struct jnode *parse_math2(struct parser *P)
{
    struct jnode *n = parse_pow(P);
    for (;;) {
        const struct jtok *t = cur(P);
        int op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV :
                 is_op(t, "%") ? JOP_MOD : -1;
        if (op < 0) return n;
        advance(P);
        n = binop(P, op, n, parse_pow(P), t->line);
    }
}

static struct jnode *parse_concat(struct parser *P)
{
    struct jnode *n = parse_math2(P);
    while (is_op(cur(P), "~")) { int l = cur(P)->line; advance(P); n = binop(P, JOP_CONCAT, n, parse_math2(P), l); }
    return n;
}

static struct jnode *parse_math1(struct parser *P)
{
    struct jnode *n = parse_concat(P);
    for (;;) {
        const struct jtok *t = cur(P);
        int op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : -1;
        if (op < 0) return n;
        advance(P);
        n = binop(P, op, n, parse_concat(P), t->line);
    }
}

static struct jnode *parse_compare(struct parser *P)
{
    int line = cur(P)->line;
    struct jnode *first = parse_math1(P);
    struct pvec operands = { 0 };
    int ops[JINJA_MAX_NEST]; size_t nops = 0;
    for (;;) {
        const struct jtok *t = cur(P);
        int op = is_op(t, "==") ? JOP_EQ : is_op(t, "!=") ? JOP_NE : is_op(t, "<") ? JOP_LT :
                 is_op(t, "<=") ? JOP_LE : is_op(t, ">") ? JOP_GT : is_op(t, ">=") ? JOP_GE :
                 is_name(t, "in") ? JOP_IN : -1;
        if (op < 0 && is_name(t, "not") && P->i + 1 < P->n && is_name(&P->t[P->i + 1], "in")) { op = JOP_NOTIN; advance(P); }
        if (op < 0) break;
        advance(P);
        if (nops == JINJA_MAX_NEST) pfail(P, COLIBRI_EUNSUPPORTED, t->line, "more than %d chained comparisons", JINJA_MAX_NEST);
        if (!operands.n) pv_push(P, &operands, first);
        ops[nops++] = op;
        pv_push(P, &operands, parse_math1(P));
    }
    if (!nops) return first;
    struct jnode *n = node(P, JN_COMPARE, line);
    n->kids = (struct jnode **)operands.v; n->nkids = operands.n;
    n->ops = palloc(P, nops * sizeof *n->ops);
    memcpy(n->ops, ops, nops * sizeof *ops);
    return n;
}

static struct jnode *parse_not(struct parser *P)
{
    if (is_name(cur(P), "not")) {
        nest_in(P);
        struct jnode *n = node(P, JN_NOT, cur(P)->line);
        advance(P);
        n->a = parse_not(P);
        P->nest--;
        return n;
    }
    return parse_compare(P);
}

static struct jnode *parse_and(struct parser *P)
{
    struct jnode *n = parse_not(P);
    while (is_name(cur(P), "and")) {
        struct jnode *m = node(P, JN_AND, cur(P)->line);
        advance(P);
        m->a = n; m->b = parse_not(P);
        n = m;
    }
    return n;
}

static struct jnode *parse_or(struct parser *P)
{
    struct jnode *n = parse_and(P);
    while (is_name(cur(P), "or")) {
        struct jnode *m = node(P, JN_OR, cur(P)->line);
        advance(P);
        m->a = n; m->b = parse_and(P);
        n = m;
    }
    return n;
}

/* a if cond [else b] */
static struct jnode *parse_expr(struct parser *P)
{
    nest_in(P);
    struct jnode *n = parse_or(P);
    while (is_name(cur(P), "if")) {
        struct jnode *c = node(P, JN_COND, cur(P)->line);
        advance(P);
        c->a = parse_or(P);
        c->b = n;
        c->c = skip_name(P, "else") ? parse_expr(P) : NULL;
        n = c;
    }
    P->nest--;
    return n;
}

/* expr or a tuple without parentheses: `{{ a, b }}`, `set x = a, b` */
static struct jnode *parse_tuple_expr(struct parser *P)
{
    int line = cur(P)->line;
    struct jnode *first = parse_expr(P);
    if (!is_op(cur(P), ",")) return first;
    struct pvec items = { 0 };
    pv_push(P, &items, first);
    while (skip_op(P, ",")) {
        if (cur(P)->k == JT_VAR_END || cur(P)->k == JT_BLOCK_END) break;
        pv_push(P, &items, parse_expr(P));
    }
    struct jnode *n = node(P, JN_TUPLE, line);
    n->kids = (struct jnode **)items.v; n->nkids = items.n;
    return n;
}

/* ------------------------------------------------------------ statements */

static struct jnode *parse_body(struct parser *P, const char *const *ends, const char *opener, int open_line);

static const char *const END_IF[] = { "elif", "else", "endif", NULL };
static const char *const END_IF2[] = { "endif", NULL };
static const char *const END_FOR[] = { "else", "endfor", NULL };
static const char *const END_FOR2[] = { "endfor", NULL };
static const char *const END_SET[] = { "endset", NULL };
static const char *const END_MACRO[] = { "endmacro", NULL };
static const char *const END_FILTER[] = { "endfilter", NULL };
static const char *const END_GEN[] = { "endgeneration", NULL };

static void end_tag(struct parser *P) { expect_kind(P, JT_BLOCK_END, "'%}'"); }

static struct jnode *parse_if(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_IF, line);
    n->a = parse_tuple_expr(P);
    end_tag(P);
    n->b = parse_body(P, END_IF, "if", line);
    if (skip_name(P, "elif")) {
        n->c = parse_if(P, P->t[P->i - 1].line);   /* consumes the endif */
        return n;
    }
    if (skip_name(P, "else")) {
        end_tag(P);
        n->c = parse_body(P, END_IF2, "if", line);
    }
    expect_name(P);   /* endif */
    end_tag(P);
    return n;
}

static struct jnode *parse_for(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_FOR, line);
    struct pvec names = { 0 };
    int paren = skip_op(P, "(");
    do pv_push(P, &names, (void *)expect_name(P)); while (skip_op(P, ","));
    if (paren) expect_op(P, ")");
    n->names = (const struct jstr **)names.v; n->nnames = names.n;
    if (!skip_name(P, "in")) pfail(P, COLIBRI_EFORMAT, cur(P)->line, "expected 'in' in a for loop");
    n->a = parse_or(P);   /* no conditional expression: a trailing `if` filters the loop */
    if (is_op(cur(P), ",")) pfail(P, COLIBRI_EUNSUPPORTED, cur(P)->line, "for over an unparenthesized tuple");
    if (skip_name(P, "if")) n->c = parse_expr(P);
    if (is_name(cur(P), "recursive")) pfail(P, COLIBRI_EUNSUPPORTED, cur(P)->line, "unsupported: recursive for loops");
    end_tag(P);
    P->loops++;
    n->b = parse_body(P, END_FOR, "for", line);
    P->loops--;
    if (skip_name(P, "else")) {
        end_tag(P);
        struct jnode *e = parse_body(P, END_FOR2, "for", line);
        n->kids2 = palloc(P, sizeof *n->kids2);
        n->kids2[0] = e;
        n->nkids2 = 1;
    }
    expect_name(P);
    end_tag(P);
    return n;
}

static struct jnode *parse_set(struct parser *P, int line)
{
    const struct jstr *target = expect_name(P);
    if (skip_op(P, ".")) {
        struct jnode *n = node(P, JN_SET_ATTR, line);
        n->names = palloc(P, 2 * sizeof *n->names);
        n->names[0] = target;
        n->names[1] = expect_name(P);
        n->nnames = 2;
        expect_op(P, "=");
        n->a = parse_tuple_expr(P);
        end_tag(P);
        return n;
    }
    if (is_op(cur(P), ",")) pfail(P, COLIBRI_EUNSUPPORTED, line, "unsupported: set with several targets");
    if (skip_op(P, "=")) {
        struct jnode *n = node(P, JN_SET, line);
        n->name = target;
        n->a = parse_tuple_expr(P);
        end_tag(P);
        return n;
    }
    /* block set: {% set x | filters %}body{% endset %}; the filters wrap a
     * placeholder literal replaced by the body's text when run */
    struct jnode *n = node(P, JN_SET_BLOCK, line);
    n->name = target;
    struct jnode *hole = node(P, JN_LIT, line);
    n->c = hole;
    n->a = parse_filter_chain(P, hole);
    end_tag(P);
    n->b = parse_body(P, END_SET, "set", line);
    expect_name(P);
    end_tag(P);
    return n;
}

static struct jnode *parse_macro(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_MACRO, line);
    n->name = expect_name(P);
    expect_op(P, "(");
    struct pvec names = { 0 }, defs = { 0 };
    while (!is_op(cur(P), ")")) {
        if (names.n) expect_op(P, ",");
        pv_push(P, &names, (void *)expect_name(P));
        pv_push(P, &defs, skip_op(P, "=") ? parse_expr(P) : NULL);
    }
    expect_op(P, ")");
    end_tag(P);
    n->names = (const struct jstr **)names.v; n->nnames = names.n;
    n->kids2 = (struct jnode **)defs.v; n->nkids2 = defs.n;
    int loops = P->loops;
    P->loops = 0;
    n->b = parse_body(P, END_MACRO, "macro", line);
    P->loops = loops;
    expect_name(P);
    end_tag(P);
    return n;
}

static struct jnode *parse_statement(struct parser *P)
{
    const struct jtok *t = cur(P);
    int line = t->line;
    if (t->k != JT_NAME) pfail(P, COLIBRI_EFORMAT, line, "expected a statement name after '{%%'");
    advance(P);
    if (is_name(t, "if")) return parse_if(P, line);
    if (is_name(t, "for")) return parse_for(P, line);
    if (is_name(t, "set")) return parse_set(P, line);
    if (is_name(t, "macro")) return parse_macro(P, line);
    if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loops) pfail(P, COLIBRI_EFORMAT, line, "'%.*s' outside a for loop", (int)t->n, t->s);
        struct jnode *n = node(P, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, line);
        end_tag(P);
        return n;
    }
    if (is_name(t, "filter")) {
        struct jnode *n = node(P, JN_FILTER_BLOCK, line);
        struct jnode *hole = node(P, JN_LIT, line);
        n->c = hole;
        if (!is_op(cur(P), "|")) {
            /* the first filter has no leading '|' */
            const struct jtok *nt = cur(P);
            const struct jstr *nm = expect_name(P);
            int idx = jinja_filter_index(nm->p, nm->n);
            if (idx < 0) pfail(P, COLIBRI_EUNSUPPORTED, nt->line, "unsupported filter '%s'", nm->p);
            struct jnode *f = node(P, JN_FILTER, line);
            f->a = hole; f->op = idx; f->name = nm;
            if (skip_op(P, "(")) parse_args(P, f);
            n->a = parse_filter_chain(P, f);
        } else {
            n->a = parse_filter_chain(P, hole);
        }
        end_tag(P);
        n->b = parse_body(P, END_FILTER, "filter", line);
        expect_name(P);
        end_tag(P);
        return n;
    }
    if (is_name(t, "generation")) {
        end_tag(P);
        struct jnode *n = parse_body(P, END_GEN, "generation", line);
        expect_name(P);
        end_tag(P);
        return n;
    }
    pfail(P, COLIBRI_EUNSUPPORTED, line, "unsupported statement '{%% %.*s %%}'", (int)(t->n > 40 ? 40 : t->n), t->s);
}

static int is_end(const struct jtok *t, const char *const *ends)
{
    for (; ends && *ends; ends++) if (is_name(t, *ends)) return 1;
    return 0;
}

/* Statements until a {% X %} with X in ends (left at X) or the end of the template. */
static struct jnode *parse_body(struct parser *P, const char *const *ends, const char *opener, int open_line)
{
    nest_in(P);
    struct jnode *body = node(P, JN_BODY, cur(P)->line);
    struct pvec kids = { 0 };
    for (;;) {
        const struct jtok *t = cur(P);
        if (t->k == JT_EOF) {
            if (ends) pfail(P, COLIBRI_EFORMAT, open_line, "'{%% %s %%}' is never closed (missing {%% %s %%})", opener, ends[0] && !strcmp(ends[0], "elif") ? "endif" : ends[0] && !strcmp(ends[0], "else") ? "endfor" : ends[0]);
            break;
        }
        if (t->k == JT_TEXT) {
            struct jnode *n = node(P, JN_TEXT, t->line);
            n->lit = (struct jv){ .t = JV_STR, .u.s = t->str };
            pv_push(P, &kids, n);
            advance(P);
        } else if (t->k == JT_VAR_BEGIN) {
            advance(P);
            struct jnode *n = node(P, JN_OUTPUT, t->line);
            n->a = parse_tuple_expr(P);
            expect_kind(P, JT_VAR_END, "'}}'");
            pv_push(P, &kids, n);
        } else if (t->k == JT_BLOCK_BEGIN) {
            const struct jtok *nt = &P->t[P->i + 1];
            if (is_end(nt, ends)) { advance(P); break; }
            if (nt->k == JT_NAME && nt->n > 3 && !memcmp(nt->s, "end", 3))
                pfail(P, COLIBRI_EFORMAT, nt->line, "unexpected '{%% %.*s %%}'", (int)(nt->n > 40 ? 40 : nt->n), nt->s);
            if (is_name(nt, "elif") || is_name(nt, "else"))
                pfail(P, COLIBRI_EFORMAT, nt->line, "'{%% %.*s %%}' outside an if or for", (int)nt->n, nt->s);
            advance(P);
            pv_push(P, &kids, parse_statement(P));
        } else {
            char b[64];
            pfail(P, COLIBRI_EFORMAT, t->line, "unexpected %s", tok_desc(t, b, sizeof b));
        }
    }
    body->kids = (struct jnode **)kids.v;
    body->nkids = kids.n;
    P->nest--;
    return body;
}

int jinja_parse(const struct jlex_out *toks, struct jarena *a, struct jnode **root, struct colibri_err *err)
{
    struct parser P = { .t = toks->t, .n = toks->n, .a = a, .err = err };
    if (setjmp(P.fail)) return P.code;
    *root = parse_body(&P, NULL, NULL, 1);
    return 0;
}
