/* tok/jinja_internal.h - what the Jinja files share: the arena, values,
 * tokens and syntax tree. jinja_lex.c turns source into tokens,
 * jinja_parse.c tokens into a tree, jinja_eval.c runs the tree,
 * jinja_value.c holds values and their Python conversions (str, repr,
 * json.dumps), jinja_builtin.c the filters, tests, methods and globals,
 * jinja_case.c Python's Unicode case methods.
 * Not a public interface: included only by those files. */
#ifndef COLIBRI_TOK_JINJA_INTERNAL_H
#define COLIBRI_TOK_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "tok/jinja.h"

/* ------------------------------------------------------------ arena
 * Everything a compile or a render builds lives in one arena and is freed
 * at once; errors inside unwind with longjmp (jinja_fail), which is safe
 * because nothing else owns memory. */
struct jarena {
    struct base_arena base;   /* its limit bounds a render's memory */
};
void *ja_alloc(struct jarena *a, size_t n);   /* zeroed; NULL past the limit or on OOM */
void  ja_free(struct jarena *a);

/* ------------------------------------------------------------ values */
enum jv_type { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
               JV_NS, JV_MACRO, JV_FUNC, JV_LOOP, JV_METHOD };

struct jstr  { size_t n; char p[]; };             /* NUL-terminated too */
/* tuple: repr as (a, b). gen: what Jinja2 returns as a generator (select,
 * map, unique, reverse...): iterable and always true, but it has no len(),
 * no JSON form, no index and no printable form. */
struct jlist { size_t n, cap; struct jv *v; int tuple, gen; };
struct jdict { size_t n, cap; struct jv *k, *v; }; /* insertion-ordered */

struct jv {
    enum jv_type t;
    union {
        int b;
        int64_t i;
        double f;
        const struct jstr *s;
        struct jlist *l;
        struct jdict *d;               /* JV_DICT and JV_NS */
        const struct jnode *macro;
        int fn;                        /* JV_FUNC: a global's index */
        struct jloop *loop;
    } u;
    /* JV_METHOD: a bound method (name in mname, receiver in *self);
     * JV_UNDEF: the name that was looked up (may be NULL), for messages;
     * JV_MACRO: the scope it was defined in (scope) */
    const struct jstr *mname;
    struct jv *self;
    struct jscope *scope;
    /* JV_STR: a markupsafe.Markup (|safe); adding a plain string to it
     * HTML-escapes that string, as Python's Markup.__add__ does */
    unsigned char markup;
};

struct jloop {
    struct jlist *items;
    size_t i;
};

/* ------------------------------------------------------------ tokens */
enum jt_kind { JT_TEXT, JT_BLOCK_BEGIN, JT_BLOCK_END, JT_VAR_BEGIN, JT_VAR_END,
               JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP, JT_EOF };

struct jtok {
    enum jt_kind k;
    int line;
    const char *s; size_t n;   /* JT_NAME/JT_OP spelling, into the source */
    const struct jstr *str;    /* JT_TEXT and JT_STRING: the decoded text */
    int64_t i; double f;
};

/* ------------------------------------------------------------ tree */
enum jn_kind {
    /* statements */
    JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_ATTR, JN_SET_BLOCK, JN_MACRO,
    JN_BREAK, JN_CONTINUE, JN_FILTER_BLOCK, JN_BODY,
    /* expressions */
    JN_LIT, JN_NAME, JN_GETATTR, JN_GETITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
    JN_BINOP, JN_NEG, JN_POS, JN_NOT, JN_AND, JN_OR, JN_COND, JN_COMPARE, JN_LIST, JN_TUPLE,
    JN_DICT,
};

enum jop { JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
           JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN };

struct jnode {
    enum jn_kind k;
    int line;
    int op;                        /* enum jop; a filter/test index; negation of a test */
    const struct jstr *name;       /* names, attributes, filter/test/macro names */
    struct jnode *a, *b, *c;       /* operands: condition/iterable, then/else, ... */
    struct jnode **kids; size_t nkids;     /* body, args, list items, compare operands */
    struct jnode **kids2; size_t nkids2;   /* else body, kwarg values, dict values */
    const struct jstr **names; size_t nnames; /* for targets, kwarg names, macro params */
    int *ops;                      /* JN_COMPARE: nkids-1 operators */
    struct jv lit;
};

struct jinja_tpl {
    struct jarena arena;
    struct jnode *root;            /* JN_BODY */
};

/* ------------------------------------------------------------ lexer/parser */
struct jlex_out { struct jtok *t; size_t n; };
/* 0 or an error (err set, line named). Tokens and strings live in a. */
int jinja_lex(const char *src, size_t len, struct jarena *a, struct jlex_out *out, struct colibri_err *err);
int jinja_parse(const struct jlex_out *toks, struct jarena *a, struct jnode **root, struct colibri_err *err);

/* ------------------------------------------------------------ render state */
struct jscope { struct jdict vars; struct jscope *parent; };

struct jbuf { char *p; size_t n, cap; };

struct jctx {
    struct jarena arena;
    jmp_buf fail;
    struct colibri_err *err;
    int err_code;
    struct jinja_limits lim;
    long steps;
    int depth;
    int line;                      /* the line being evaluated, for messages */
    struct jbuf *out;              /* where output goes (a macro call swaps it) */
    size_t out_total;
    int loop_ctl;                  /* 1 break, 2 continue */
    struct jscope *globals;
    const struct jnode *hole;      /* a block set's or filter block's placeholder */
    struct jv hole_val;
};

_Noreturn void jinja_fail(struct jctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* values (jinja_value.c) */
struct jv jv_undef(void);
struct jv jv_none(void);
struct jv jv_bool(int b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_strn(struct jctx *c, const char *p, size_t n);
struct jv jv_str(struct jctx *c, const char *p);
const struct jstr *jstr_new(struct jarena *a, const char *p, size_t n); /* NULL on OOM */
struct jv jv_list(struct jctx *c, size_t cap);
struct jv jv_dict(struct jctx *c, size_t cap);
void jlist_push(struct jctx *c, struct jlist *l, struct jv v);
void jdict_set(struct jctx *c, struct jdict *d, struct jv k, struct jv v);
struct jv *jdict_get(const struct jdict *d, struct jv k);       /* NULL if absent */
struct jv *jdict_gets(const struct jdict *d, const char *k, size_t n);
int  jv_truthy(struct jv v);
int  jv_eq(struct jv a, struct jv b);
int  jv_cmp(struct jctx *c, struct jv a, struct jv b);          /* <0 0 >0, or fails */
const char *jv_type_name(struct jv v);
struct jv jv_from_json(struct jctx *c, const cJSON *j);
/* Python's str() and repr(), and json.dumps(v, ensure_ascii, indent (<0: None),
 * separators (NULL: the default), sort_keys). */
void jv_str_into(struct jctx *c, struct jbuf *b, struct jv v);
void jv_repr_into(struct jctx *c, struct jbuf *b, struct jv v);
void jv_json_into(struct jctx *c, struct jbuf *b, struct jv v, int ensure_ascii, int indent,
                  const char *item_sep, const char *key_sep, int sort_keys, int level);
struct jv jv_to_str(struct jctx *c, struct jv v);              /* str(v) as a JV_STR */
void jbuf_add(struct jctx *c, struct jbuf *b, const char *p, size_t n);
struct jv jbuf_take(struct jctx *c, struct jbuf *b);            /* b's text as a JV_STR */
void jfloat_repr(double f, char *out, size_t cap);
/* UTF-8 helpers: code points in s, byte offset of code point i. */
size_t ju_len(const char *s, size_t n);
size_t ju_off(const char *s, size_t n, size_t i);
size_t ju_space(const char *s, size_t n);  /* bytes of a Python-whitespace char at s, or 0 */

/* builtins (jinja_builtin.c): indexes resolved at parse time */
int jinja_filter_index(const char *name, size_t n);   /* -1 if unknown */
int jinja_test_index(const char *name, size_t n);
int jinja_method_known(const char *name, size_t n);
int jinja_global_index(const char *name, size_t n);
struct jv jinja_call_filter(struct jctx *c, int idx, struct jv v, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw);
int jinja_call_test(struct jctx *c, int idx, struct jv v, const struct jv *args, size_t nargs);
struct jv jinja_call_method(struct jctx *c, struct jv self, const struct jstr *name, const struct jv *args,
                            size_t nargs, const struct jstr *const *kwn, const struct jv *kwv, size_t nkw);
struct jv jinja_call_global(struct jctx *c, int idx, const struct jv *args, size_t nargs,
                            const struct jstr *const *kwn, const struct jv *kwv, size_t nkw);
/* used by the builtins: evaluator services */
struct jv jinja_getattr(struct jctx *c, struct jv obj, const char *name, size_t n);
struct jv jinja_getitem(struct jctx *c, struct jv obj, struct jv key);
void jinja_iter(struct jctx *c, struct jv v, struct jlist *into);  /* list(v) */
/* Fails the render naming the undefined value v (its name when known). */
_Noreturn void tok_jinja_fail_undef(struct jctx *c, struct jv v);
/* An index value (int or bool) as an integer; anything else fails the render. */
int64_t tok_jinja_index_of(struct jctx *c, struct jv k);
void jinja_step(struct jctx *c);
struct jv jinja_escape(struct jctx *c, struct jv v);   /* markupsafe.escape of str(v) */

/* case (jinja_case.c): Python's s.lower(), s.upper(), s.capitalize(),
 * s.title(), and Jinja's |title; s.isupper() / s.islower() */
enum jcase { JCASE_LOWER, JCASE_UPPER, JCASE_CAPITALIZE, JCASE_TITLE, JCASE_JINJA_TITLE };
struct jv tok_jinja_case(struct jctx *c, const struct jstr *s, enum jcase mode);
int tok_jinja_case_test(struct jctx *c, const struct jstr *s, int want_upper);

#endif
