/* sample/grammar_parse.c - GBNF text to the flattened rules of
 * grammar_internal.h (contract in grammar.h). Groups and repetitions become
 * rules of their own: x* is R ::= x R | (empty), x+ is x x*, x? is
 * R ::= x | (empty), x{m,n} is m copies of x then n-m nested optionals. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sample/grammar_internal.h"

#define MAX_REPEAT 1000

struct vec { void *p; size_t n, cap, sz; };

static int vpush(struct vec *v, const void *x)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 8;
        void *np = realloc(v->p, nc * v->sz);
        if (!np) return -1;
        v->p = np;
        v->cap = nc;
    }
    memcpy((char *)v->p + v->n * v->sz, x, v->sz);
    v->n++;
    return 0;
}

struct prule {                  /* a rule while parsing */
    char *name;                 /* NULL for synthesized rules */
    int defined, line;
    struct vec alts;            /* of struct vec (of struct gitem) */
};

struct gparser {
    const char *s, *end;
    int line;
    struct vec rules;           /* of struct prule */
    struct vec cls;             /* of struct gclass */
    struct colibri_err *err;
    int rc;
};

__attribute__((format(printf, 2, 3)))
static int perr(struct gparser *P, const char *fmt, ...)
{
    if (P->rc) return P->rc;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->rc = base_err_set(P->err, COLIBRI_EINVAL, "grammar line %d: %s", P->line, msg);
    return P->rc;
}

static int oom(struct gparser *P) { return P->rc ? P->rc : (P->rc = base_err_set(P->err, COLIBRI_ENOMEM, "grammar: out of memory")); }

static void skip_space(struct gparser *P, int newlines)
{
    while (P->s < P->end) {
        char c = *P->s;
        if (c == '#') { while (P->s < P->end && *P->s != '\n') P->s++; continue; }
        if (c == '\n') { if (!newlines) return; P->line++; P->s++; continue; }
        if (c == ' ' || c == '\t' || c == '\r') { P->s++; continue; }
        return;
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Does a `name ::=` start here (after spaces)? */
static int at_rule_def(const struct gparser *P)
{
    const char *p = P->s;
    if (p >= P->end || !is_name_char(*p)) return 0;
    while (p < P->end && is_name_char(*p)) p++;
    while (p < P->end && (*p == ' ' || *p == '\t')) p++;
    return P->end - p >= 3 && !memcmp(p, "::=", 3);
}

static int rule_index(struct gparser *P, const char *name, size_t n, int line)
{
    struct prule *r = P->rules.p;
    for (size_t i = 0; i < P->rules.n; i++)
        if (r[i].name && strlen(r[i].name) == n && !memcmp(r[i].name, name, n)) return (int)i;
    if (P->rules.n >= GRAMMAR_MAX_RULES) { perr(P, "more than %d rules", GRAMMAR_MAX_RULES); return -1; }
    struct prule nr = { .name = strndup(name, n), .line = line, .alts = { .sz = sizeof(struct vec) } };
    if (!nr.name || vpush(&P->rules, &nr)) { free(nr.name); oom(P); return -1; }
    return (int)P->rules.n - 1;
}

static int new_rule(struct gparser *P)
{
    if (P->rules.n >= GRAMMAR_MAX_RULES) { perr(P, "more than %d rules (repetitions count)", GRAMMAR_MAX_RULES); return -1; }
    struct prule nr = { .defined = 1, .line = P->line, .alts = { .sz = sizeof(struct vec) } };
    if (vpush(&P->rules, &nr)) { oom(P); return -1; }
    return (int)P->rules.n - 1;
}

static int add_alt(struct gparser *P, int rule, const struct vec *items)
{
    struct prule *r = (struct prule *)P->rules.p + rule;
    if (vpush(&r->alts, items)) return oom(P);
    return 0;
}

static int range_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Ranges sorted and merged, and a negated class replaced by its complement
 * over [0, U+10FFFF]: the matcher's class_meets then tests exact sets (a
 * negated class whose ranges only together cover a UTF-8 lead byte's block
 * would otherwise allow that byte). 0, or -1 out of memory. */
static int class_normalize(struct gclass *c)
{
    uint32_t n = 0, *r = c->r;
    if (c->n) qsort(r, c->n, 2 * sizeof *r, range_cmp);
    for (uint32_t i = 0; i < c->n; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1] > 0x10ffff ? 0x10ffff : r[2 * i + 1];
        if (lo > hi) continue;
        if (n && lo <= r[2 * n - 1] + 1) {
            if (hi > r[2 * n - 1]) r[2 * n - 1] = hi;
        } else {
            r[2 * n] = lo;
            r[2 * n + 1] = hi;
            n++;
        }
    }
    if (c->neg) {
        uint32_t *o = malloc(2 * (n + 1) * sizeof *o), m = 0, next = 0;
        if (!o) return -1;
        for (uint32_t i = 0; i < n; i++) {
            if (r[2 * i] > next) o[2 * m] = next, o[2 * m + 1] = r[2 * i] - 1, m++;
            next = r[2 * i + 1] + 1;
        }
        if (next <= 0x10ffff) o[2 * m] = next, o[2 * m + 1] = 0x10ffff, m++;
        free(c->r);
        c->r = o;
        c->neg = 0;
        n = m;
    }
    c->n = n;
    return 0;
}

static int add_class(struct gparser *P, struct gclass *c)
{
    if (class_normalize(c) || vpush(&P->cls, c)) { free(c->r); oom(P); return -1; }
    return (int)P->cls.n - 1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: UTF-8 or an escape. */
static int read_char(struct gparser *P, uint32_t *cp)
{
    if (P->s >= P->end) return perr(P, "unexpected end of the grammar");
    unsigned char c = (unsigned char)*P->s;
    if (c == '\\') {
        P->s++;
        if (P->s >= P->end) return perr(P, "a lone '\\' at the end");
        char e = *P->s++;
        int nd = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nd) {
            uint32_t v = 0;
            for (int i = 0; i < nd; i++) {
                int h = P->s < P->end ? hexval(*P->s) : -1;
                if (h < 0) return perr(P, "bad \\%c escape", e);
                v = v * 16 + (uint32_t)h;
                P->s++;
            }
            if (v > 0x10ffff) return perr(P, "escape \\%c beyond U+10FFFF", e);
            *cp = v;
            return 0;
        }
        switch (e) {
        case 'n': *cp = '\n'; return 0;
        case 't': *cp = '\t'; return 0;
        case 'r': *cp = '\r'; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': *cp = (uint32_t)e; return 0;
        default: return perr(P, "unknown escape '\\%c'", e);
        }
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || P->end - P->s < n) return perr(P, "invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < n; i++) {
        unsigned char k = (unsigned char)P->s[i];
        if ((k & 0xc0) != 0x80) return perr(P, "invalid UTF-8");
        v = v << 6 | (k & 0x3f);
    }
    P->s += n;
    *cp = v;
    return 0;
}

static int single_class(struct gparser *P, uint32_t lo, uint32_t hi, int neg)
{
    struct gclass c = { .neg = (uint32_t)neg, .n = 1, .r = malloc(2 * sizeof(uint32_t)) };
    if (!c.r) { oom(P); return -1; }
    c.r[0] = lo;
    c.r[1] = hi;
    return add_class(P, &c);
}

static int parse_alternatives(struct gparser *P, int rule, int nested);

/* One atom and its postfix operator, appended to seq. */
static int parse_item(struct gparser *P, struct vec *seq)
{
    struct vec atom = { .sz = sizeof(struct gitem) };
    char c = *P->s;
    if (c == '"') {
        P->s++;
        while (P->s < P->end && *P->s != '"') {
            if (*P->s == '\n') { free(atom.p); return perr(P, "a newline inside a string literal"); }
            uint32_t cp;
            if (read_char(P, &cp)) { free(atom.p); return P->rc; }
            int k = single_class(P, cp, cp, 0);
            struct gitem it = { GI_CLASS, (uint32_t)k };
            if (k < 0 || vpush(&atom, &it)) { free(atom.p); return oom(P); }
        }
        if (P->s >= P->end) { free(atom.p); return perr(P, "unterminated string literal"); }
        P->s++;
    } else if (c == '[') {
        P->s++;
        struct gclass cl = { 0 };
        if (P->s < P->end && *P->s == '^') { cl.neg = 1; P->s++; }
        struct vec r = { .sz = sizeof(uint32_t) };
        while (P->s < P->end && *P->s != ']') {
            uint32_t lo, hi;
            if (read_char(P, &lo)) { free(r.p); return P->rc; }
            hi = lo;
            if (P->s + 1 < P->end && *P->s == '-' && P->s[1] != ']') {
                P->s++;
                if (read_char(P, &hi)) { free(r.p); return P->rc; }
                if (hi < lo) { free(r.p); return perr(P, "class range U+%04X-U+%04X is backwards", lo, hi); }
            }
            if (vpush(&r, &lo) || vpush(&r, &hi)) { free(r.p); return oom(P); }
        }
        if (P->s >= P->end) { free(r.p); return perr(P, "unterminated character class"); }
        P->s++;
        cl.r = r.p;
        cl.n = (uint32_t)(r.n / 2);
        int k = add_class(P, &cl);
        struct gitem it = { GI_CLASS, (uint32_t)k };
        if (k < 0 || vpush(&atom, &it)) { free(atom.p); return oom(P); }
    } else if (c == '.') {
        P->s++;
        int k = single_class(P, 0, 0x10ffff, 0);
        struct gitem it = { GI_CLASS, (uint32_t)k };
        if (k < 0 || vpush(&atom, &it)) { free(atom.p); return oom(P); }
    } else if (c == '(') {
        P->s++;
        int r = new_rule(P);
        if (r < 0 || parse_alternatives(P, r, 1)) { free(atom.p); return P->rc; }
        skip_space(P, 1);
        if (P->s >= P->end || *P->s != ')') { free(atom.p); return perr(P, "missing ')'"); }
        P->s++;
        struct gitem it = { GI_RULE, (uint32_t)r };
        if (vpush(&atom, &it)) { free(atom.p); return oom(P); }
    } else if (is_name_char(c)) {
        const char *n0 = P->s;
        while (P->s < P->end && is_name_char(*P->s)) P->s++;
        int r = rule_index(P, n0, (size_t)(P->s - n0), P->line);
        struct gitem it = { GI_RULE, (uint32_t)r };
        if (r < 0 || vpush(&atom, &it)) { free(atom.p); return oom(P); }
    } else {
        return perr(P, "unexpected '%c'", c);
    }

    /* postfix: wrap a multi-item atom in a rule first */
    if (P->s < P->end && (*P->s == '*' || *P->s == '+' || *P->s == '?' || *P->s == '{')) {
        long lo = 0, hi = -1;
        char op = *P->s++;
        if (op == '+') lo = 1;
        else if (op == '?') hi = 1;
        else if (op == '{') {
            char *e;
            lo = strtol(P->s, &e, 10);
            if (e == P->s) lo = 0;
            P->s = e;
            if (P->s < P->end && *P->s == ',') {
                P->s++;
                hi = strtol(P->s, &e, 10);
                if (e == P->s) hi = -1;
                P->s = e;
            } else {
                hi = lo;
            }
            if (P->s >= P->end || *P->s != '}') { free(atom.p); return perr(P, "bad {m,n} repetition"); }
            P->s++;
            if (lo < 0 || (hi >= 0 && hi < lo) || lo > MAX_REPEAT || hi > MAX_REPEAT) {
                free(atom.p);
                return perr(P, "repetition {%ld,%ld} out of range (0..%d)", lo, hi, MAX_REPEAT);
            }
        }
        struct gitem x;
        if (atom.n == 1) x = ((struct gitem *)atom.p)[0];
        else {
            int r = new_rule(P);
            if (r < 0 || add_alt(P, r, &atom)) { free(atom.p); return P->rc; }
            atom = (struct vec){ .sz = sizeof(struct gitem) };
            x = (struct gitem){ GI_RULE, (uint32_t)r };
        }
        free(atom.p);
        for (long i = 0; i < lo; i++) if (vpush(seq, &x)) return oom(P);
        if (hi < 0) {           /* R ::= x R | empty */
            int r = new_rule(P);
            if (r < 0) return P->rc;
            struct vec a = { .sz = sizeof(struct gitem) }, b = { .sz = sizeof(struct gitem) };
            struct gitem self = { GI_RULE, (uint32_t)r };
            if (vpush(&a, &x) || vpush(&a, &self) || add_alt(P, r, &a) || add_alt(P, r, &b)) return oom(P);
            return vpush(seq, &self) ? oom(P) : 0;
        }
        /* hi - lo nested optionals: O1 ::= x | empty; Ok ::= x O(k-1) | empty */
        struct gitem inner = { 0 };
        int have = 0;
        for (long k = 0; k < hi - lo; k++) {
            int r = new_rule(P);
            if (r < 0) return P->rc;
            struct vec a = { .sz = sizeof(struct gitem) }, b = { .sz = sizeof(struct gitem) };
            if (vpush(&a, &x) || (have && vpush(&a, &inner)) || add_alt(P, r, &a) || add_alt(P, r, &b)) return oom(P);
            inner = (struct gitem){ GI_RULE, (uint32_t)r };
            have = 1;
        }
        if (have && vpush(seq, &inner)) return oom(P);
        return 0;
    }
    for (size_t i = 0; i < atom.n; i++)
        if (vpush(seq, (struct gitem *)atom.p + i)) { free(atom.p); return oom(P); }
    free(atom.p);
    return 0;
}

static int parse_alternatives(struct gparser *P, int rule, int nested)
{
    for (;;) {
        struct vec seq = { .sz = sizeof(struct gitem) };
        for (;;) {
            skip_space(P, nested);
            if (!nested && P->s < P->end && *P->s == '\n') {
                /* a rule continues on the next line unless a new rule starts there */
                const char *save = P->s;
                int line = P->line;
                skip_space(P, 1);
                if (P->s >= P->end || at_rule_def(P) || *P->s == ')') { P->s = save; P->line = line; break; }
                continue;
            }
            if (P->s >= P->end || *P->s == '|' || *P->s == ')') break;
            if (at_rule_def(P)) break;
            if (parse_item(P, &seq)) { free(seq.p); return P->rc; }
        }
        if (add_alt(P, rule, &seq)) { free(seq.p); return P->rc; }
        if (P->s < P->end && *P->s == '|') { P->s++; continue; }
        if (!nested) skip_space(P, 1);
        if (P->s < P->end && *P->s == '|') { P->s++; continue; }
        return 0;
    }
}

static void free_parser(struct gparser *P)
{
    struct prule *r = P->rules.p;
    for (size_t i = 0; i < P->rules.n; i++) {
        struct vec *a = r[i].alts.p;
        for (size_t k = 0; k < r[i].alts.n; k++) free(a[k].p);
        free(r[i].alts.p);
        free(r[i].name);
    }
    free(P->rules.p);
}

/* Left recursion would make the matcher expand forever: refuse it. A rule
 * reaches another at the left when some alternative starts with it, or with
 * rules that can match nothing followed by it. */
static int check_left_recursion(struct gparser *P, const struct grammar *g)
{
    uint8_t *nullable = calloc(g->n_rules, 1), *color = calloc(g->n_rules, 1);
    uint32_t *stack = malloc((g->n_rules + 1) * sizeof *stack), *iter = malloc((g->n_rules + 1) * sizeof *iter);
    int rc = 0;
    if (!nullable || !color || !stack || !iter) { rc = oom(P); goto out; }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !nullable[r]; a++) {
                uint32_t i = g->alt_start[a];
                while (g->items[i].kind == GI_RULE && nullable[g->items[i].v]) i++;
                if (g->items[i].kind == GI_END) { nullable[r] = 1; changed = 1; }
            }
        }
    }
    /* iterative DFS over "left edges", colors 0 new / 1 on the path / 2 done */
    for (uint32_t s = 0; s < g->n_rules && !rc; s++) {
        if (color[s]) continue;
        size_t sp = 0;
        stack[sp] = s; iter[sp] = 0; color[s] = 1; sp++;
        while (sp && !rc) {
            uint32_t r = stack[sp - 1], k = iter[sp - 1]++;
            /* the k-th left edge of r */
            uint32_t seen = 0, target = UINT32_MAX;
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && target == UINT32_MAX; a++)
                for (uint32_t i = g->alt_start[a]; g->items[i].kind == GI_RULE; i++) {
                    if (seen++ == k) { target = g->items[i].v; break; }
                    if (!nullable[g->items[i].v]) break;
                }
            if (target == UINT32_MAX) { color[r] = 2; sp--; continue; }
            if (color[target] == 1) {
                struct prule *pr = P->rules.p;
                uint32_t named = target;
                for (size_t q = sp; q-- > 0;) if (pr[stack[q]].name) { named = stack[q]; break; }
                P->line = pr[named].line;
                rc = perr(P, "rule '%s' is left-recursive (it can reach itself before matching a character)",
                          pr[named].name ? pr[named].name : "(group)");
            } else if (!color[target]) {
                stack[sp] = target; iter[sp] = 0; color[target] = 1; sp++;
            }
        }
    }
out:
    free(nullable); free(color); free(stack); free(iter);
    return rc;
}

int sample_grammar_compile(const char *gbnf, size_t len, const struct grammar_vocab *vocab, struct grammar **out,
                    struct colibri_err *err)
{
    struct gparser P = { .s = gbnf, .end = gbnf + len, .line = 1, .err = err,
                         .rules = { .sz = sizeof(struct prule) }, .cls = { .sz = sizeof(struct gclass) } };
    struct grammar *g = calloc(1, sizeof *g);
    if (!g) return base_err_set(err, COLIBRI_ENOMEM, "grammar: out of memory");
    for (;;) {
        skip_space(&P, 1);
        if (P.s >= P.end) break;
        if (!at_rule_def(&P)) { perr(&P, "expected a rule 'name ::= ...'"); break; }
        const char *n0 = P.s;
        while (is_name_char(*P.s)) P.s++;
        int r = rule_index(&P, n0, (size_t)(P.s - n0), P.line);
        if (r < 0) break;
        struct prule *pr = (struct prule *)P.rules.p + r;
        if (pr->defined) { perr(&P, "rule '%s' is defined twice", pr->name); break; }
        pr->defined = 1;
        pr->line = P.line;
        while (*P.s != ':') P.s++;
        P.s += 3;
        if (parse_alternatives(&P, r, 0)) break;
        skip_space(&P, 1);
        if (P.s < P.end && *P.s == ')') { perr(&P, "unbalanced ')'"); break; }
    }
    g->cls = P.cls.p;
    g->n_cls = (uint32_t)P.cls.n;
    struct prule *pr = P.rules.p;
    int root = -1;
    for (size_t i = 0; !P.rc && i < P.rules.n; i++) {
        if (!pr[i].defined) { P.line = pr[i].line; perr(&P, "rule '%s' is used but never defined", pr[i].name); }
        if (pr[i].name && !strcmp(pr[i].name, "root")) root = (int)i;
    }
    if (!P.rc && root < 0) perr(&P, "no 'root' rule");
    if (!P.rc) {   /* flatten */
        size_t n_items = 0, n_alts = 0;
        for (size_t i = 0; i < P.rules.n; i++) {
            n_alts += pr[i].alts.n;
            struct vec *a = pr[i].alts.p;
            for (size_t k = 0; k < pr[i].alts.n; k++) n_items += a[k].n + 1;
        }
        g->n_rules = (uint32_t)P.rules.n;
        g->items = malloc((n_items + 2) * sizeof *g->items);
        g->alt_start = malloc((n_alts + 1) * sizeof *g->alt_start);
        g->rule_alt = malloc((P.rules.n + 1) * sizeof *g->rule_alt);
        if (!g->items || !g->alt_start || !g->rule_alt) oom(&P);
        size_t it = 0, al = 0;
        for (size_t i = 0; !P.rc && i < P.rules.n; i++) {
            g->rule_alt[i] = (uint32_t)al;
            struct vec *a = pr[i].alts.p;
            for (size_t k = 0; k < pr[i].alts.n; k++) {
                g->alt_start[al++] = (uint32_t)it;
                if (a[k].n) memcpy(g->items + it, a[k].p, a[k].n * sizeof *g->items);
                it += a[k].n;
                g->items[it++] = (struct gitem){ GI_END, 0 };
            }
        }
        if (!P.rc) {
            g->rule_alt[P.rules.n] = (uint32_t)al;
            g->n_items = (uint32_t)it;
            g->n_alts = (uint32_t)al;
            g->root = (uint32_t)root;
            check_left_recursion(&P, g);
        }
        if (!P.rc) {   /* the sentinel: a class matching nothing, then END, in no rule */
            struct gclass *nc = realloc(g->cls, (g->n_cls + 1) * sizeof *nc);
            if (!nc) oom(&P);
            else {
                g->cls = nc;
                g->cls[g->n_cls] = (struct gclass){ 0, 0, NULL };
                g->sent = (uint32_t)it;
                g->items[it] = (struct gitem){ GI_CLASS, g->n_cls++ };
                g->items[it + 1] = (struct gitem){ GI_END, 0 };
            }
        }
    }
    if (!P.rc) {   /* the vocabulary */
        g->n_vocab = vocab->n;
        g->piece = calloc((size_t)vocab->n, sizeof *g->piece);
        g->piece_len = calloc((size_t)vocab->n, sizeof *g->piece_len);
        g->is_eog = calloc((size_t)vocab->n, 1);
        if (!g->piece || !g->piece_len || !g->is_eog) oom(&P);
        for (int32_t i = 0; !P.rc && i < vocab->n; i++) {
            g->is_eog[i] = vocab->is_eog ? vocab->is_eog[i] : 0;
            if (!vocab->piece[i] || !vocab->piece_len[i]) continue;
            g->piece[i] = malloc(vocab->piece_len[i]);
            if (!g->piece[i]) { oom(&P); break; }
            memcpy(g->piece[i], vocab->piece[i], vocab->piece_len[i]);
            g->piece_len[i] = vocab->piece_len[i];
        }
        if (!P.rc && sample_grammar_build_trie(g, err)) P.rc = COLIBRI_ENOMEM;
        if (!P.rc && sample_grammar_mc_new(g)) oom(&P);
    }
    free_parser(&P);
    if (P.rc) {
        sample_grammar_free(g);
        return P.rc;
    }
    *out = g;
    return 0;
}

void sample_grammar_free(struct grammar *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->n_cls; i++) free(g->cls[i].r);
    free(g->cls);
    free(g->items);
    free(g->alt_start);
    free(g->rule_alt);
    if (g->piece) for (int32_t i = 0; i < g->n_vocab; i++) free(g->piece[i]);
    free(g->piece);
    free(g->piece_len);
    free(g->is_eog);
    sample_grammar_free_trie(&g->trie);
    sample_grammar_mc_free(g->mc);
    free(g);
}
