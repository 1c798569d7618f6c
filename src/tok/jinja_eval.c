/* tok/jinja_eval.c - runs a compiled template (contract in jinja.h):
 * scopes, statements, operators, calls (attribute and item access:
 * jinja_access.c; failures and the step budget: jinja_fail.c).
 *
 * Scopes follow Jinja2: a for loop gives each iteration a fresh scope over
 * the enclosing one (a `set` inside does not survive the iteration, which
 * is why templates use namespace()); if blocks share their scope; a macro
 * call runs in a scope over the one the macro was defined in, so it sees
 * that scope's variables as they are at call time. Undefined values print
 * as "" and are false; using one in arithmetic, calling it or reading an
 * attribute of it is an error naming it, as Jinja2's default Undefined does. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/jinja_internal.h"

struct jinja_limits jinja_default_limits(void)
{
    return (struct jinja_limits){ .max_output = 16u << 20, .max_memory = 256u << 20,
                                  .max_steps = 50000000, .max_depth = 64 };
}

/* ------------------------------------------------------------ scopes */

static struct jscope *scope_new(struct jctx *c, struct jscope *parent)
{
    struct jscope *s = ja_alloc(&c->arena, sizeof *s);
    if (!s) jinja_fail(c, COLIBRI_ENOMEM, "rendering needs more than %zu bytes of memory", c->lim.max_memory);
    s->parent = parent;
    return s;
}

static struct jv lookup(struct jscope *s, const struct jstr *name)
{
    for (; s; s = s->parent) {
        struct jv *v = jdict_gets(&s->vars, name->p, name->n);
        if (v) return *v;
    }
    struct jv u = jv_undef();
    u.mname = name;
    return u;
}

static void bind(struct jctx *c, struct jscope *s, const struct jstr *name, struct jv v)
{
    jdict_set(c, &s->vars, (struct jv){ .t = JV_STR, .u.s = name }, v);
}

/* Python's slice indices for a sequence of n items. */
static void slice_bounds(struct jctx *c, struct jv s0, struct jv s1, struct jv s2, int64_t n,
                         int64_t *start, int64_t *stop, int64_t *step)
{
    *step = s2.t == JV_NONE || s2.t == JV_UNDEF ? 1 : tok_jinja_index_of(c, s2);
    if (*step == 0) jinja_fail(c, COLIBRI_EINVAL, "slice step cannot be zero");
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? n - 1 : n;
    int64_t v[2];
    struct jv in[2] = { s0, s1 };
    for (int k = 0; k < 2; k++) {
        if (in[k].t == JV_NONE || in[k].t == JV_UNDEF) { v[k] = (*step < 0) == (k == 0) ? hi : lo; continue; }
        int64_t x = tok_jinja_index_of(c, in[k]);
        if (x < 0) { x += n; if (x < lo) x = lo; }
        else if (x > hi) x = hi;
        v[k] = x;
    }
    *start = v[0];
    *stop = v[1];
}

static struct jv do_slice(struct jctx *c, struct jv obj, struct jv s0, struct jv s1, struct jv s2)
{
    int64_t start, stop, step;
    if (obj.t == JV_LIST && obj.u.l->gen) jinja_fail(c, COLIBRI_EINVAL, "'generator' object is not subscriptable");
    if (obj.t == JV_LIST) {
        slice_bounds(c, s0, s1, s2, (int64_t)obj.u.l->n, &start, &stop, &step);
        struct jv r = jv_list(c, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) { jinja_step(c); jlist_push(c, r.u.l, obj.u.l->v[i]); }
        return r;
    }
    if (obj.t == JV_STR) {
        struct jlist chars = { 0 };
        jinja_iter(c, obj, &chars);
        slice_bounds(c, s0, s1, s2, (int64_t)chars.n, &start, &stop, &step);
        struct jbuf b = { 0 };
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            jinja_step(c);
            jbuf_add(c, &b, chars.v[i].u.s->p, chars.v[i].u.s->n);
        }
        return jbuf_take(c, &b);
    }
    if (obj.t == JV_UNDEF) tok_jinja_fail_undef(c, obj);
    jinja_fail(c, COLIBRI_EINVAL, "'%s' object cannot be sliced", jv_type_name(obj));
}

/* ------------------------------------------------------------ operators */

static int is_num(struct jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static int is_intlike(struct jv v) { return v.t == JV_BOOL || v.t == JV_INT; }
static int64_t ival(struct jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }
static double fval(struct jv v) { return v.t == JV_FLOAT ? v.u.f : (double)ival(v); }

static const char *const OPNAME[] = { "+", "-", "*", "/", "//", "%", "**", "~" };

static _Noreturn void bad_operands(struct jctx *c, int op, struct jv a, struct jv b)
{
    if (a.t == JV_UNDEF) tok_jinja_fail_undef(c, a);
    if (b.t == JV_UNDEF) tok_jinja_fail_undef(c, b);
    jinja_fail(c, COLIBRI_EINVAL, "unsupported operand types for %s: '%s' and '%s'", OPNAME[op], jv_type_name(a), jv_type_name(b));
}

static struct jv repeat(struct jctx *c, struct jv seq, int64_t times)
{
    if (times < 0) times = 0;
    if (seq.t == JV_STR) {
        if (seq.u.s->n && (uint64_t)times > c->lim.max_output / seq.u.s->n)
            jinja_fail(c, COLIBRI_EINVAL, "string repetition would exceed %zu bytes", c->lim.max_output);
        struct jbuf b = { 0 };
        for (int64_t i = 0; i < times; i++) jbuf_add(c, &b, seq.u.s->p, seq.u.s->n);
        return jbuf_take(c, &b);
    }
    struct jv r = jv_list(c, 0);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) { jinja_step(c); jlist_push(c, r.u.l, seq.u.l->v[k]); }
    return r;
}

static struct jv arith(struct jctx *c, int op, struct jv a, struct jv b)
{
    if (op == JOP_CONCAT) {
        struct jbuf buf = { 0 };
        jv_str_into(c, &buf, a);
        jv_str_into(c, &buf, b);
        return jbuf_take(c, &buf);
    }
    if (op == JOP_ADD) {
        if (a.t == JV_STR && b.t == JV_STR) {
            int markup = a.markup || b.markup;
            if (markup) { a = jinja_escape(c, a); b = jinja_escape(c, b); }
            struct jbuf buf = { 0 };
            jbuf_add(c, &buf, a.u.s->p, a.u.s->n);
            jbuf_add(c, &buf, b.u.s->p, b.u.s->n);
            struct jv r = jbuf_take(c, &buf);
            r.markup = (unsigned char)markup;
            return r;
        }
        if (a.t == JV_LIST && b.t == JV_LIST && !a.u.l->gen && !b.u.l->gen) {
            struct jv r = jv_list(c, a.u.l->n + b.u.l->n);
            for (size_t i = 0; i < a.u.l->n; i++) jlist_push(c, r.u.l, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) jlist_push(c, r.u.l, b.u.l->v[i]);
            r.u.l->tuple = a.u.l->tuple;
            return r;
        }
    }
    if (op == JOP_MUL) {
        if ((a.t == JV_STR || (a.t == JV_LIST && !a.u.l->gen)) && is_intlike(b)) return repeat(c, a, ival(b));
        if ((b.t == JV_STR || (b.t == JV_LIST && !b.u.l->gen)) && is_intlike(a)) return repeat(c, b, ival(a));
    }
    if (!is_num(a) || !is_num(b)) {
        if (op == JOP_MOD && a.t == JV_STR)
            jinja_fail(c, COLIBRI_EUNSUPPORTED, "unsupported: printf-style string formatting with %%");
        bad_operands(c, op, a, b);
    }
    if (is_intlike(a) && is_intlike(b) && op != JOP_DIV) {
        int64_t x = ival(a), y = ival(b), r;
        switch (op) {
        case JOP_ADD: if (__builtin_add_overflow(x, y, &r)) goto overflow; return jv_int(r);
        case JOP_SUB: if (__builtin_sub_overflow(x, y, &r)) goto overflow; return jv_int(r);
        case JOP_MUL: if (__builtin_mul_overflow(x, y, &r)) goto overflow; return jv_int(r);
        case JOP_FLOORDIV: case JOP_MOD: {
            if (y == 0) jinja_fail(c, COLIBRI_EINVAL, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) goto overflow;
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
            return jv_int(op == JOP_FLOORDIV ? q : m);
        }
        case JOP_POW:
            if (y < 0) return jv_float(pow((double)x, (double)y));
            r = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(r, x, &r)) goto overflow;
                if (r == 0 || r == 1) break;
                jinja_step(c);
            }
            if (r == -1 || (r == 1 && x == -1)) r = (y % 2) ? x : 1;
            return jv_int(r);
        }
    overflow:
        jinja_fail(c, COLIBRI_EUNSUPPORTED, "integer overflow in %s (64-bit integers only)", OPNAME[op]);
    }
    double x = fval(a), y = fval(b);
    switch (op) {
    case JOP_ADD: return jv_float(x + y);
    case JOP_SUB: return jv_float(x - y);
    case JOP_MUL: return jv_float(x * y);
    case JOP_DIV: if (y == 0) jinja_fail(c, COLIBRI_EINVAL, "division by zero"); return jv_float(x / y);
    case JOP_FLOORDIV: if (y == 0) jinja_fail(c, COLIBRI_EINVAL, "float floor division by zero"); return jv_float(floor(x / y));
    case JOP_MOD: {
        if (y == 0) jinja_fail(c, COLIBRI_EINVAL, "float modulo by zero");
        double m = fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return jv_float(m);
    }
    default: return jv_float(pow(x, y));
    }
}

static int contains(struct jctx *c, struct jv item, struct jv seq)
{
    switch (seq.t) {
    case JV_STR:
        if (item.t != JV_STR) jinja_fail(c, COLIBRI_EINVAL, "'in <string>' requires string as left operand, not '%s'", jv_type_name(item));
        if (!item.u.s->n) return 1;
        return memmem(seq.u.s->p, seq.u.s->n, item.u.s->p, item.u.s->n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++) if (jv_eq(item, seq.u.l->v[i])) return 1;
        return 0;
    case JV_DICT: case JV_NS: return jdict_get(seq.u.d, item) != NULL;
    case JV_UNDEF: return 0;
    default: jinja_fail(c, COLIBRI_EINVAL, "argument of type '%s' is not iterable", jv_type_name(seq));
    }
}

/* ------------------------------------------------------------ evaluation */

static struct jv eval(struct jctx *c, struct jscope *sc, const struct jnode *n);
static void exec_body(struct jctx *c, struct jscope *sc, const struct jnode *body);

static void eval_args(struct jctx *c, struct jscope *sc, const struct jnode *n, struct jv **args, struct jv **kw)
{
    *args = n->nkids ? ja_alloc(&c->arena, n->nkids * sizeof **args) : NULL;
    *kw = n->nkids2 ? ja_alloc(&c->arena, n->nkids2 * sizeof **kw) : NULL;
    if ((n->nkids && !*args) || (n->nkids2 && !*kw)) jinja_fail(c, COLIBRI_ENOMEM, "out of memory");
    for (size_t i = 0; i < n->nkids; i++) (*args)[i] = eval(c, sc, n->kids[i]);
    for (size_t i = 0; i < n->nkids2; i++) (*kw)[i] = eval(c, sc, n->kids2[i]);
}

static struct jv call_macro(struct jctx *c, struct jv m, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    const struct jnode *mn = m.u.macro;
    if (nargs > mn->nnames)
        jinja_fail(c, COLIBRI_EINVAL, "macro '%s' takes %zu arguments, %zu given", mn->name->p, mn->nnames, nargs);
    if (++c->depth > c->lim.max_depth)
        jinja_fail(c, COLIBRI_EINVAL, "macro calls nested more than %d deep", c->lim.max_depth);
    struct jscope *s = scope_new(c, m.scope);
    int line = c->line;
    for (size_t i = 0; i < mn->nnames; i++) {
        struct jv v = jv_undef();
        int have = 0;
        if (i < nargs) { v = args[i]; have = 1; }
        for (size_t k = 0; k < nkw; k++)
            if (kwn[k]->n == mn->names[i]->n && !memcmp(kwn[k]->p, mn->names[i]->p, kwn[k]->n)) {
                if (have) jinja_fail(c, COLIBRI_EINVAL, "macro '%s' got argument '%s' twice", mn->name->p, kwn[k]->p);
                v = kwv[k]; have = 1;
            }
        if (!have && mn->kids2[i]) v = eval(c, s, mn->kids2[i]);
        bind(c, s, mn->names[i], v);
    }
    for (size_t k = 0; k < nkw; k++) {
        size_t i;
        for (i = 0; i < mn->nnames; i++)
            if (kwn[k]->n == mn->names[i]->n && !memcmp(kwn[k]->p, mn->names[i]->p, kwn[k]->n)) break;
        if (i == mn->nnames) jinja_fail(c, COLIBRI_EINVAL, "macro '%s' has no argument '%s'", mn->name->p, kwn[k]->p);
    }
    struct jbuf out = { 0 }, *saved = c->out;
    int saved_ctl = c->loop_ctl;
    c->out = &out;
    exec_body(c, s, mn->b);
    c->out = saved;
    c->loop_ctl = saved_ctl;
    c->depth--;
    c->line = line;
    return jbuf_take(c, &out);
}

static struct jv call_value(struct jctx *c, struct jv f, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw)
{
    switch (f.t) {
    case JV_MACRO: return call_macro(c, f, args, nargs, kwn, kwv, nkw);
    case JV_FUNC: return jinja_call_global(c, f.u.fn, args, nargs, kwn, kwv, nkw);
    case JV_METHOD: return jinja_call_method(c, *f.self, f.mname, args, nargs, kwn, kwv, nkw);
    case JV_UNDEF: tok_jinja_fail_undef(c, f);
    default: jinja_fail(c, COLIBRI_EINVAL, "'%s' object is not callable", jv_type_name(f));
    }
}

static struct jv eval(struct jctx *c, struct jscope *sc, const struct jnode *n)
{
    jinja_step(c);
    c->line = n->line;
    switch (n->k) {
    case JN_LIT: return n == c->hole ? c->hole_val : n->lit;
    case JN_NAME: return lookup(sc, n->name);
    case JN_GETATTR: {
        struct jv o = eval(c, sc, n->a);
        c->line = n->line;
        struct jv r = jinja_getattr(c, o, n->name->p, n->name->n);
        if (r.t == JV_UNDEF) r.mname = n->name;
        return r;
    }
    case JN_GETITEM: {
        struct jv o = eval(c, sc, n->a), k = eval(c, sc, n->b);
        c->line = n->line;
        struct jv r = jinja_getitem(c, o, k);
        if (r.t == JV_UNDEF && k.t == JV_STR) r.mname = k.u.s;
        return r;
    }
    case JN_SLICE: {
        struct jv o = eval(c, sc, n->a), s[3];
        for (int i = 0; i < 3; i++) s[i] = n->kids[i] ? eval(c, sc, n->kids[i]) : jv_none();
        c->line = n->line;
        return do_slice(c, o, s[0], s[1], s[2]);
    }
    case JN_CALL: {
        struct jv f = eval(c, sc, n->a);
        struct jv *args, *kw;
        eval_args(c, sc, n, &args, &kw);
        c->line = n->line;
        return call_value(c, f, args, n->nkids, n->names, kw, n->nkids2);
    }
    case JN_FILTER: {
        struct jv v = eval(c, sc, n->a);
        struct jv *args, *kw;
        eval_args(c, sc, n, &args, &kw);
        c->line = n->line;
        return jinja_call_filter(c, n->op, v, args, n->nkids, n->names, kw, n->nkids2);
    }
    case JN_TEST: {
        struct jv v = eval(c, sc, n->a);
        struct jv *args, *kw;
        eval_args(c, sc, n, &args, &kw);
        c->line = n->line;
        int r = jinja_call_test(c, n->op, v, args, n->nkids);
        return jv_bool(n->c ? !r : r);
    }
    case JN_BINOP: {
        struct jv a = eval(c, sc, n->a), b = eval(c, sc, n->b);
        c->line = n->line;
        return arith(c, n->op, a, b);
    }
    case JN_NEG: case JN_POS: {
        struct jv a = eval(c, sc, n->a);
        c->line = n->line;
        if (!is_num(a)) {
            if (a.t == JV_UNDEF) tok_jinja_fail_undef(c, a);
            jinja_fail(c, COLIBRI_EINVAL, "bad operand type for unary %c: '%s'", n->k == JN_NEG ? '-' : '+', jv_type_name(a));
        }
        if (n->k == JN_POS) return a.t == JV_BOOL ? jv_int(a.u.b) : a;
        if (a.t == JV_FLOAT) return jv_float(-a.u.f);
        if (ival(a) == INT64_MIN) jinja_fail(c, COLIBRI_EUNSUPPORTED, "integer overflow in unary -");
        return jv_int(-ival(a));
    }
    case JN_NOT: return jv_bool(!jv_truthy(eval(c, sc, n->a)));
    case JN_AND: { struct jv a = eval(c, sc, n->a); return jv_truthy(a) ? eval(c, sc, n->b) : a; }
    case JN_OR: { struct jv a = eval(c, sc, n->a); return jv_truthy(a) ? a : eval(c, sc, n->b); }
    case JN_COND:
        if (jv_truthy(eval(c, sc, n->a))) return eval(c, sc, n->b);
        return n->c ? eval(c, sc, n->c) : jv_undef();
    case JN_COMPARE: {
        struct jv a = eval(c, sc, n->kids[0]);
        for (size_t i = 1; i < n->nkids; i++) {
            struct jv b = eval(c, sc, n->kids[i]);
            int op = n->ops[i - 1], r;
            c->line = n->line;
            switch (op) {
            case JOP_EQ: r = jv_eq(a, b); break;
            case JOP_NE: r = !jv_eq(a, b); break;
            case JOP_IN: r = contains(c, a, b); break;
            case JOP_NOTIN: r = !contains(c, a, b); break;
            default: {
                if (a.t == JV_UNDEF) tok_jinja_fail_undef(c, a);
                if (b.t == JV_UNDEF) tok_jinja_fail_undef(c, b);
                int k = jv_cmp(c, a, b);
                r = op == JOP_LT ? k < 0 : op == JOP_LE ? k <= 0 : op == JOP_GT ? k > 0 : k >= 0;
            }
            }
            if (!r) return jv_bool(0);
            a = b;
        }
        return jv_bool(1);
    }
    case JN_LIST: case JN_TUPLE: {
        struct jv l = jv_list(c, n->nkids);
        for (size_t i = 0; i < n->nkids; i++) jlist_push(c, l.u.l, eval(c, sc, n->kids[i]));
        l.u.l->tuple = n->k == JN_TUPLE;
        return l;
    }
    case JN_DICT: {
        struct jv d = jv_dict(c, n->nkids);
        for (size_t i = 0; i < n->nkids; i++) {
            struct jv k = eval(c, sc, n->kids[i]);
            jdict_set(c, d.u.d, k, eval(c, sc, n->kids2[i]));
        }
        return d;
    }
    default:
        jinja_fail(c, COLIBRI_EINVAL, "internal: node %d is not an expression", (int)n->k);
    }
}

/* the value of a placeholder expression (block set, filter block) applied to text */
static struct jv apply_hole(struct jctx *c, struct jscope *sc, const struct jnode *n, struct jv text)
{
    const struct jnode *saved = c->hole;
    struct jv saved_v = c->hole_val;
    c->hole = n->c;
    c->hole_val = text;
    struct jv r = eval(c, sc, n->a);
    c->hole = saved;
    c->hole_val = saved_v;
    return r;
}

static struct jv render_to_str(struct jctx *c, struct jscope *sc, const struct jnode *body)
{
    struct jbuf out = { 0 }, *saved = c->out;
    c->out = &out;
    exec_body(c, sc, body);
    c->out = saved;
    return jbuf_take(c, &out);
}

static void exec_for(struct jctx *c, struct jscope *sc, const struct jnode *n)
{
    struct jv seq = eval(c, sc, n->a);
    struct jlist all = { 0 };
    c->line = n->line;
    jinja_iter(c, seq, &all);
    struct jlist *items = &all;
    if (n->c) {   /* {% for x in xs if cond %}: loop.* counts only the kept items */
        items = ja_alloc(&c->arena, sizeof *items);
        if (!items) jinja_fail(c, COLIBRI_ENOMEM, "out of memory");
        for (size_t i = 0; i < all.n; i++) {
            struct jscope *s = scope_new(c, sc);
            if (n->nnames == 1) bind(c, s, n->names[0], all.v[i]);
            else for (size_t k = 0; k < n->nnames; k++)
                bind(c, s, n->names[k], all.v[i].t == JV_LIST && k < all.v[i].u.l->n ? all.v[i].u.l->v[k] : jv_undef());
            if (jv_truthy(eval(c, s, n->c))) jlist_push(c, items, all.v[i]);
        }
    }
    struct jloop lp = { .items = items };
    for (lp.i = 0; lp.i < items->n; lp.i++) {
        struct jscope *s = scope_new(c, sc);
        struct jv it = items->v[lp.i];
        if (n->nnames == 1) bind(c, s, n->names[0], it);
        else {
            struct jlist parts = { 0 };
            jinja_iter(c, it, &parts);
            if (parts.n != n->nnames)
                jinja_fail(c, COLIBRI_EINVAL, "cannot unpack %zu values into %zu loop variables", parts.n, n->nnames);
            for (size_t k = 0; k < n->nnames; k++) bind(c, s, n->names[k], parts.v[k]);
        }
        bind(c, s, jv_str(c, "loop").u.s, (struct jv){ .t = JV_LOOP, .u.loop = &lp });
        exec_body(c, s, n->b);
        int ctl = c->loop_ctl;
        c->loop_ctl = 0;
        if (ctl == 1) break;
    }
    if (!items->n && n->nkids2) exec_body(c, scope_new(c, sc), n->kids2[0]);
}

static void exec_stmt(struct jctx *c, struct jscope *sc, const struct jnode *n)
{
    jinja_step(c);
    c->line = n->line;
    switch (n->k) {
    case JN_TEXT: jbuf_add(c, c->out, n->lit.u.s->p, n->lit.u.s->n); return;
    case JN_OUTPUT: { struct jv v = eval(c, sc, n->a); jv_str_into(c, c->out, v); return; }
    case JN_IF:
        if (jv_truthy(eval(c, sc, n->a))) exec_body(c, sc, n->b);
        else if (n->c) { if (n->c->k == JN_IF) exec_stmt(c, sc, n->c); else exec_body(c, sc, n->c); }
        return;
    case JN_FOR: exec_for(c, sc, n); return;
    case JN_SET: bind(c, sc, n->name, eval(c, sc, n->a)); return;
    case JN_SET_ATTR: {
        struct jv ns = lookup(sc, n->names[0]);
        struct jv v = eval(c, sc, n->a);
        c->line = n->line;
        if (ns.t != JV_NS) jinja_fail(c, COLIBRI_EINVAL, "cannot assign attribute '%s' on '%s' (not a namespace)", n->names[1]->p, n->names[0]->p);
        jdict_set(c, ns.u.d, (struct jv){ .t = JV_STR, .u.s = n->names[1] }, v);
        return;
    }
    case JN_SET_BLOCK: {
        struct jv text = render_to_str(c, sc, n->b);
        bind(c, sc, n->name, apply_hole(c, sc, n, text));
        return;
    }
    case JN_FILTER_BLOCK: {
        struct jv text = render_to_str(c, sc, n->b);
        jv_str_into(c, c->out, apply_hole(c, sc, n, text));
        return;
    }
    case JN_MACRO: {
        struct jv m = { .t = JV_MACRO, .u.macro = n, .scope = sc };
        bind(c, sc, n->name, m);
        return;
    }
    case JN_BREAK: c->loop_ctl = 1; return;
    case JN_CONTINUE: c->loop_ctl = 2; return;
    case JN_BODY: exec_body(c, sc, n); return;
    default: jinja_fail(c, COLIBRI_EINVAL, "internal: node %d is not a statement", (int)n->k);
    }
}

static void exec_body(struct jctx *c, struct jscope *sc, const struct jnode *body)
{
    for (size_t i = 0; i < body->nkids && !c->loop_ctl; i++) exec_stmt(c, sc, body->kids[i]);
}

/* ------------------------------------------------------------ entry points */

int jinja_compile(const char *src, size_t len, struct jinja_tpl **out, struct colibri_err *err)
{
    if (!src || !out) return base_err_set(err, COLIBRI_EINVAL, "jinja_compile: NULL argument");
    struct jinja_tpl *t = calloc(1, sizeof *t);
    if (!t) return base_err_set(err, COLIBRI_ENOMEM, "chat template: out of memory");
    struct jlex_out toks;
    int rc = jinja_lex(src, len, &t->arena, &toks, err);
    if (!rc) rc = jinja_parse(&toks, &t->arena, &t->root, err);
    if (rc) { jinja_free(t); return rc; }
    *out = t;
    return 0;
}

void jinja_free(struct jinja_tpl *t)
{
    if (!t) return;
    ja_free(&t->arena);
    free(t);
}

int jinja_render(const struct jinja_tpl *t, const cJSON *ctx, const struct jinja_limits *lim,
                 char **out, size_t *out_len, struct colibri_err *err)
{
    if (!t || !out || !out_len) return base_err_set(err, COLIBRI_EINVAL, "jinja_render: NULL argument");
    if (ctx && !cJSON_IsObject(ctx)) return base_err_set(err, COLIBRI_EINVAL, "jinja_render: the context must be a JSON object");
    struct jctx *c = calloc(1, sizeof *c);
    if (!c) return base_err_set(err, COLIBRI_ENOMEM, "chat template: out of memory");
    c->err = err;
    c->lim = lim ? *lim : jinja_default_limits();
    c->arena.base.limit = c->lim.max_memory;
    struct jbuf body = { 0 };
    int rc = 0;
    if (setjmp(c->fail)) {
        rc = c->err_code ? c->err_code : COLIBRI_EINVAL;
        goto done;
    }
    c->globals = scope_new(c, NULL);
    static const char *const GLOBALS[] = { "raise_exception", "namespace", "range", "dict", "strftime_now", NULL };
    for (int i = 0; GLOBALS[i]; i++)
        bind(c, c->globals, jv_str(c, GLOBALS[i]).u.s,
             (struct jv){ .t = JV_FUNC, .u.fn = jinja_global_index(GLOBALS[i], strlen(GLOBALS[i])) });
    if (ctx) {
        const cJSON *it;
        cJSON_ArrayForEach(it, ctx) bind(c, c->globals, jv_str(c, it->string).u.s, jv_from_json(c, it));
    }
    struct jscope *top = scope_new(c, c->globals);
    c->out = &body;
    exec_body(c, top, t->root);
    char *s = malloc(body.n + 1);
    if (!s) { rc = base_err_set(err, COLIBRI_ENOMEM, "chat template: out of memory"); goto done; }
    if (body.n) memcpy(s, body.p, body.n);
    s[body.n] = 0;
    *out = s;
    *out_len = body.n;
done:
    ja_free(&c->arena);
    free(c);
    return rc;
}
