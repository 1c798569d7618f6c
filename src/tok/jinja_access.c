/* tok/jinja_access.c - attribute and item access and iteration over values
 * (jinja_internal.h), shared by the evaluator and the builtins; the names of
 * the methods a value answers to. */
#include <string.h>

#include "base/err.h"
#include "tok/jinja_internal.h"

_Noreturn void tok_jinja_fail_undef(struct jctx *c, struct jv v)
{
    if (v.mname) jinja_fail(c, COLIBRI_EINVAL, "'%s' is undefined", v.mname->p);
    jinja_fail(c, COLIBRI_EINVAL, "an undefined value was used");
}

static const char *const METHODS[] = {
    "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "lower", "upper", "title",
    "capitalize", "replace", "find", "rfind", "count", "format", "join", "splitlines", "isdigit", "isalpha",
    "isspace", "isalnum", "islower", "isupper", "get", "items", "keys", "values", "cycle", NULL };

int jinja_method_known(const char *name, size_t n)
{
    for (int i = 0; METHODS[i]; i++) if (strlen(METHODS[i]) == n && !memcmp(METHODS[i], name, n)) return 1;
    return 0;
}

/* ------------------------------------------------------------ access */

static const char *const LOOP_ATTRS[] = { "index", "index0", "revindex", "revindex0", "first", "last",
                                          "length", "previtem", "nextitem", "depth", "depth0", NULL };

static struct jv loop_attr(struct jctx *c, const struct jloop *lp, const char *name, size_t n)
{
    size_t len = lp->items->n, i = lp->i;
    int k;
    for (k = 0; LOOP_ATTRS[k]; k++) if (strlen(LOOP_ATTRS[k]) == n && !memcmp(LOOP_ATTRS[k], name, n)) break;
    switch (k) {
    case 0: return jv_int((int64_t)i + 1);
    case 1: return jv_int((int64_t)i);
    case 2: return jv_int((int64_t)(len - i));
    case 3: return jv_int((int64_t)(len - i - 1));
    case 4: return jv_bool(i == 0);
    case 5: return jv_bool(i + 1 == len);
    case 6: return jv_int((int64_t)len);
    case 7: return i > 0 ? lp->items->v[i - 1] : jv_undef();
    case 8: return i + 1 < len ? lp->items->v[i + 1] : jv_undef();
    case 9: return jv_int(1);
    case 10: return jv_int(0);
    default: return jv_undef();
    }
}

static struct jv bound(struct jctx *c, struct jv obj, const char *name, size_t n)
{
    struct jv *self = ja_alloc(&c->arena, sizeof *self);
    if (!self) jinja_fail(c, COLIBRI_ENOMEM, "out of memory");
    *self = obj;
    struct jv m = { .t = JV_METHOD, .self = self, .mname = jv_strn(c, name, n).u.s };
    return m;
}

struct jv jinja_getattr(struct jctx *c, struct jv obj, const char *name, size_t n)
{
    switch (obj.t) {
    case JV_UNDEF: tok_jinja_fail_undef(c, obj);
    case JV_DICT: {
        if (jinja_method_known(name, n) && (n == 3 ? !memcmp(name, "get", 3) :
            (n == 5 && (!memcmp(name, "items", 5))) || (n == 4 && !memcmp(name, "keys", 4)) ||
            (n == 6 && !memcmp(name, "values", 6))))
            return bound(c, obj, name, n);
        struct jv *v = jdict_gets(obj.u.d, name, n);
        return v ? *v : jv_undef();
    }
    case JV_NS: {
        struct jv *v = jdict_gets(obj.u.d, name, n);
        return v ? *v : jv_undef();
    }
    case JV_LOOP:
        if (n == 5 && !memcmp(name, "cycle", 5)) return bound(c, obj, name, n);
        return loop_attr(c, obj.u.loop, name, n);
    case JV_STR:
        if (jinja_method_known(name, n)) return bound(c, obj, name, n);
        return jv_undef();
    default:
        return jv_undef();
    }
}

int64_t tok_jinja_index_of(struct jctx *c, struct jv k)
{
    if (k.t == JV_INT) return k.u.i;
    if (k.t == JV_BOOL) return k.u.b;
    jinja_fail(c, COLIBRI_EINVAL, "indices must be integers, not '%s'", jv_type_name(k));
}

struct jv jinja_getitem(struct jctx *c, struct jv obj, struct jv key)
{
    switch (obj.t) {
    case JV_UNDEF: tok_jinja_fail_undef(c, obj);
    case JV_DICT: case JV_NS: {
        struct jv *v = jdict_get(obj.u.d, key);
        if (v) return *v;
        if (key.t == JV_STR && obj.t == JV_DICT) return jinja_getattr(c, obj, key.u.s->p, key.u.s->n).t == JV_METHOD ?
            jinja_getattr(c, obj, key.u.s->p, key.u.s->n) : jv_undef();
        return jv_undef();
    }
    case JV_LIST: {
        if (obj.u.l->gen || (key.t != JV_INT && key.t != JV_BOOL)) return jv_undef();
        int64_t i = tok_jinja_index_of(c, key), n = (int64_t)obj.u.l->n;
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.u.l->v[i] : jv_undef();
    }
    case JV_STR: {
        if (key.t != JV_INT && key.t != JV_BOOL) return jv_undef();
        int64_t i = tok_jinja_index_of(c, key), n = (int64_t)ju_len(obj.u.s->p, obj.u.s->n);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return jv_undef();
        size_t a = ju_off(obj.u.s->p, obj.u.s->n, (size_t)i), b = ju_off(obj.u.s->p, obj.u.s->n, (size_t)i + 1);
        return jv_strn(c, obj.u.s->p + a, b - a);
    }
    case JV_LOOP:
        if (key.t == JV_STR) return jinja_getattr(c, obj, key.u.s->p, key.u.s->n);
        return jv_undef();
    default:
        return jv_undef();
    }
}

void jinja_iter(struct jctx *c, struct jv v, struct jlist *into)
{
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_LIST: for (size_t i = 0; i < v.u.l->n; i++) jlist_push(c, into, v.u.l->v[i]); return;
    case JV_DICT: for (size_t i = 0; i < v.u.d->n; i++) jlist_push(c, into, v.u.d->k[i]); return;
    case JV_STR:
        for (size_t i = 0; i < v.u.s->n;) {
            size_t j = i + 1;
            while (j < v.u.s->n && ((unsigned char)v.u.s->p[j] & 0xc0) == 0x80) j++;
            jlist_push(c, into, jv_strn(c, v.u.s->p + i, j - i));
            i = j;
        }
        return;
    default:
        jinja_fail(c, COLIBRI_EINVAL, "'%s' object is not iterable", jv_type_name(v));
    }
}
