/* sample/grammar_match.c - running a compiled grammar over tokens
 * (contract in grammar.h; layout in grammar_internal.h).
 *
 * A state is a set of stacks (linked nodes, top first; NULL is the empty
 * stack: the text is complete). Rule ends are resolved when a node is made
 * (cont()), so a repetition like x* does not grow the stack, and rules are
 * expanded until every stack's top is a character class. Which tokens may
 * come next is found by walking the vocabulary's byte trie from the state,
 * dropping a subtree as soon as no stack survives; the answer is cached per
 * state, since a state recurs (every character inside a JSON string leaves
 * the same one). */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "sample/grammar_internal.h"

#define MAX_STACKS 1024         /* an ambiguous grammar past this is cut off (dead) */
#define MAX_EXPAND 100000       /* node creations per expansion */
#define N_CACHE 64               /* masks kept per state, as bits (16 KB each for 129k ids) */

struct gnode { uint32_t pos; struct gnode *up; };

struct gset { struct gnode **s; uint64_t *h; uint32_t n; };   /* h: each stack's hash */

struct gcache { uint64_t key; uint32_t *ser; uint32_t n_ser; uint64_t *bits; int32_t count; uint64_t used; };

struct grammar_state {
    const struct grammar *g;
    struct base_arena cur, next, scratch;
    struct gset set;
    int dead, eog;
    uint64_t clock;
    struct gcache cache[N_CACHE];
    /* partial UTF-8 carried between tokens */
    uint32_t cp, need, lo, hi, min;
    long budget;
};

int32_t sample_grammar_n_vocab(const struct grammar *g) { return g->n_vocab; }

/* ------------------------------------------------------------ stacks */

static struct gnode *cont(struct grammar_state *st, struct base_arena *a, uint32_t pos, struct gnode *up, int *ok)
{
    const struct gitem *it = st->g->items;
    while (it[pos].kind == GI_END) {   /* the rule is done: go on where its caller continues */
        if (!up) return NULL;
        pos = up->pos;
        up = up->up;
    }
    struct gnode *n = base_arena_alloc(a, sizeof *n);
    if (!n) { *ok = 0; return NULL; }
    n->pos = pos;
    n->up = up;
    return n;
}

static int same_stack(const struct gnode *a, const struct gnode *b)
{
    while (a && b) {
        if (a == b) return 1;
        if (a->pos != b->pos) return 0;
        a = a->up;
        b = b->up;
    }
    return a == b;
}

static uint64_t stack_hash(const struct gnode *n)
{
    uint64_t h = 1469598103934665603ull;
    for (; n; n = n->up) h = (h ^ n->pos) * 1099511628211ull;
    return h;
}

/* Adds stack n unless the set holds an equal one: the hashes are compared
 * first, since a grammar of many alternatives makes sets of hundreds of
 * stacks and each advance adds as many. */
static int set_add(struct grammar_state *st, struct base_arena *a, struct gset *out, struct gnode *n)
{
    (void)st;
    uint64_t h = stack_hash(n);
    for (uint32_t i = 0; i < out->n; i++) if (out->h[i] == h && same_stack(out->s[i], n)) return 1;
    if (out->n >= MAX_STACKS) return 0;
    if ((out->n & (out->n - 1)) == 0) {   /* grow at powers of two */
        uint32_t cap = out->n ? out->n * 2 : 4;
        struct gnode **ns = base_arena_alloc(a, cap * sizeof *ns);
        uint64_t *nh = base_arena_alloc(a, cap * sizeof *nh);
        if (!ns || !nh) return 0;
        if (out->n) memcpy(ns, out->s, out->n * sizeof *ns), memcpy(nh, out->h, out->n * sizeof *nh);
        out->s = ns;
        out->h = nh;
    }
    out->h[out->n] = h;
    out->s[out->n++] = n;
    return 1;
}

/* Adds the stacks n expands to (tops on classes, or NULL). 0 on overflow. */
static int expand(struct grammar_state *st, struct base_arena *a, struct gnode *n, struct gset *out)
{
    if (--st->budget < 0) return 0;
    if (!n) return set_add(st, a, out, NULL);
    const struct grammar *g = st->g;
    struct gitem it = g->items[n->pos];
    if (it.kind == GI_CLASS) return set_add(st, a, out, n);
    int ok = 1;
    struct gnode *up = cont(st, a, n->pos + 1, n->up, &ok);
    if (!ok) return 0;
    for (uint32_t k = g->rule_alt[it.v]; k < g->rule_alt[it.v + 1]; k++) {
        struct gnode *m = cont(st, a, g->alt_start[k], up, &ok);
        if (!ok || !expand(st, a, m, out)) return 0;
    }
    return 1;
}

static int class_has(const struct gclass *c, uint32_t cp)
{
    int in = 0;
    for (uint32_t i = 0; i < c->n && !in; i++) in = cp >= c->r[2 * i] && cp <= c->r[2 * i + 1];
    return c->neg ? !in : in;
}

static int class_meets(const struct gclass *c, uint32_t lo, uint32_t hi)
{
    if (c->neg) {   /* excluded only when one range covers all of [lo, hi] (a union could too: allowed then) */
        for (uint32_t i = 0; i < c->n; i++) if (c->r[2 * i] <= lo && c->r[2 * i + 1] >= hi) return 0;
        return 1;
    }
    for (uint32_t i = 0; i < c->n; i++) if (c->r[2 * i] <= hi && c->r[2 * i + 1] >= lo) return 1;
    return 0;
}

/* The set after code point cp. 0 on overflow (out then undefined). */
static int advance(struct grammar_state *st, struct base_arena *a, const struct gset *in, uint32_t cp, struct gset *out)
{
    const struct grammar *g = st->g;
    *out = (struct gset){ 0 };
    st->budget = MAX_EXPAND;
    for (uint32_t i = 0; i < in->n; i++) {
        struct gnode *n = in->s[i];
        if (!n || !class_has(&g->cls[g->items[n->pos].v], cp)) continue;
        int ok = 1;
        struct gnode *m = cont(st, a, n->pos + 1, n->up, &ok);
        if (!ok || !expand(st, a, m, out)) return 0;
    }
    return 1;
}

static int any_meets(const struct grammar_state *st, const struct gset *in, uint32_t lo, uint32_t hi)
{
    const struct grammar *g = st->g;
    for (uint32_t i = 0; i < in->n; i++)
        if (in->s[i] && class_meets(&g->cls[g->items[in->s[i]->pos].v], lo, hi)) return 1;
    return 0;
}

/* UTF-8 decoding carried byte by byte. */
struct u8 { uint32_t cp, need, lo, hi, min; };

/* Feeds one byte: 1 and *done with a whole code point, 1 without (more
 * bytes to come; [lo, hi] bounds it), 0 for bytes no character starts with. */
static int u8_feed(struct u8 *u, unsigned char b, int *done)
{
    *done = 0;
    if (!u->need) {
        if (b < 0x80) { u->cp = b; *done = 1; return 1; }
        int n = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
        if (n < 0) return 0;
        u->cp = b & (n == 1 ? 0x1f : n == 2 ? 0x0f : 0x07);
        u->need = (uint32_t)n;
        u->min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
    } else {
        if ((b & 0xc0) != 0x80) return 0;
        u->cp = u->cp << 6 | (b & 0x3f);
        if (--u->need == 0) {
            /* overlong forms, surrogates and values past U+10FFFF are not characters */
            if (u->cp < u->min || (u->cp >= 0xd800 && u->cp <= 0xdfff) || u->cp > 0x10ffff) return 0;
            *done = 1;
            return 1;
        }
    }
    u->lo = u->cp << (6 * u->need);
    u->hi = u->lo | ((1u << (6 * u->need)) - 1);
    if (u->lo < u->min) u->lo = u->min;
    if (u->hi > 0x10ffff) u->hi = 0x10ffff;
    /* a prefix that can only end in a surrogate (ED A0..BF) starts no character */
    if (u->lo >= 0xd800 && u->hi <= 0xdfff) return 0;
    return u->lo <= u->hi;
}

/* Runs bytes p[0..n) from *set; 1 if something survives (*set updated). */
static int run_bytes(struct grammar_state *st, struct base_arena *a, struct gset *set, struct u8 *u,
                     const char *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int done;
        if (!u8_feed(u, (unsigned char)p[i], &done)) return 0;
        if (!done) { if (!any_meets(st, set, u->lo, u->hi)) return 0; continue; }
        struct gset next;
        if (!advance(st, a, set, u->cp, &next) || !next.n) return 0;
        *set = next;
    }
    return 1;
}

/* ------------------------------------------------------------ state */

static int copy_set(struct grammar_state *st, struct base_arena *a, const struct gset *in, struct gset *out)
{
    *out = (struct gset){ 0 };
    for (uint32_t i = 0; i < in->n; i++) {
        struct gnode *head = NULL, **link = &head;
        for (const struct gnode *n = in->s[i]; n; n = n->up) {
            struct gnode *c = base_arena_alloc(a, sizeof *c);
            if (!c) return 0;
            c->pos = n->pos;
            c->up = NULL;
            *link = c;
            link = &c->up;
        }
        if (!set_add(st, a, out, head)) return 0;
    }
    return 1;
}

int sample_grammar_state_new(const struct grammar *g, struct grammar_state **out, struct colibri_err *err)
{
    struct grammar_state *st = calloc(1, sizeof *st);
    if (!st) return base_err_set(err, COLIBRI_ENOMEM, "grammar: out of memory");
    st->g = g;
    st->budget = MAX_EXPAND;
    struct gset start = { 0 };
    int ok = 1;
    for (uint32_t k = g->rule_alt[g->root]; ok && k < g->rule_alt[g->root + 1]; k++) {
        struct gnode *m = cont(st, &st->cur, g->alt_start[k], NULL, &ok);
        ok = ok && expand(st, &st->cur, m, &start);
    }
    if (!ok) { sample_grammar_state_free(st); return base_err_set(err, COLIBRI_EINVAL, "grammar: the root expands to too many alternatives"); }
    st->set = start;
    *out = st;
    return 0;
}

void sample_grammar_state_free(struct grammar_state *st)
{
    if (!st) return;
    base_arena_free(&st->cur);
    base_arena_free(&st->next);
    base_arena_free(&st->scratch);
    for (int i = 0; i < N_CACHE; i++) { free(st->cache[i].ser); free(st->cache[i].bits); }
    free(st);
}

static int accepting(const struct gset *s)
{
    for (uint32_t i = 0; i < s->n; i++) if (!s->s[i]) return 1;
    return 0;
}

int sample_grammar_done(const struct grammar_state *st)
{
    return st->eog || (!st->dead && st->set.n == 1 && !st->set.s[0]);
}

int sample_grammar_allows(struct grammar_state *st, int32_t id)
{
    const struct grammar *g = st->g;
    if (st->dead || st->eog || id < 0 || id >= g->n_vocab) return 0;
    if (g->is_eog[id]) return !st->need && accepting(&st->set);
    if (!g->piece[id]) return 0;
    struct gset set = st->set;
    struct u8 u = { st->cp, st->need, st->lo, st->hi, st->min };
    int r = run_bytes(st, &st->scratch, &set, &u, g->piece[id], g->piece_len[id]);
    base_arena_reset(&st->scratch);
    return r;
}

int sample_grammar_accept(struct grammar_state *st, int32_t id)
{
    const struct grammar *g = st->g;
    if (st->dead || st->eog || id < 0 || id >= g->n_vocab) { st->dead = 1; return COLIBRI_EINVAL; }
    if (g->is_eog[id]) {
        if (st->need || !accepting(&st->set)) { st->dead = 1; return COLIBRI_EINVAL; }
        st->eog = 1;
        return 0;
    }
    struct gset set = st->set;
    struct u8 u = { st->cp, st->need, st->lo, st->hi, st->min };
    if (!g->piece[id] || !run_bytes(st, &st->scratch, &set, &u, g->piece[id], g->piece_len[id])) {
        base_arena_reset(&st->scratch);
        st->dead = 1;
        return COLIBRI_EINVAL;
    }
    /* keep the new set in a fresh arena; the old one (and scratch) go */
    base_arena_reset(&st->next);
    struct gset kept;
    if (!copy_set(st, &st->next, &set, &kept)) { st->dead = 1; return COLIBRI_ENOMEM; }
    struct base_arena t = st->cur;
    st->cur = st->next;
    st->next = t;
    base_arena_reset(&st->scratch);
    st->set = kept;
    st->cp = u.cp; st->need = u.need; st->lo = u.lo; st->hi = u.hi; st->min = u.min;
    return 0;
}

/* ------------------------------------------------------------ masks */

/* During one mask walk the same sets recur at many trie nodes (inside a
 * JSON string every ordinary character leads back to the same set), so sets
 * are interned by structure and each one remembers where each ASCII
 * character takes it: most trie nodes then cost a table lookup. */
struct wset { struct gset set; uint64_t hash; int32_t next[128]; };   /* next: -2 unknown, -1 dead */
struct walker { struct grammar_state *st; struct wset *v; int32_t n, cap; uint8_t *allowed; int32_t *count; int oom; };

static uint64_t set_hash(const struct gset *s)
{
    uint64_t h = 1469598103934665603ull ^ s->n;
    for (uint32_t i = 0; i < s->n; i++) h = (h ^ s->h[i]) * 1099511628211ull;
    return h;
}

static int same_set(const struct gset *a, const struct gset *b)
{
    if (a->n != b->n) return 0;
    for (uint32_t i = 0; i < a->n; i++) if (!same_stack(a->s[i], b->s[i])) return 0;
    return 1;
}

static int32_t intern(struct walker *w, const struct gset *s)
{
    uint64_t h = set_hash(s);
    for (int32_t i = w->n; i-- > 0;)
        if (w->v[i].hash == h && same_set(&w->v[i].set, s)) return i;
    if (w->n == w->cap) {
        int32_t nc = w->cap ? w->cap * 2 : 64;
        struct wset *nv = realloc(w->v, (size_t)nc * sizeof *nv);
        if (!nv) { w->oom = 1; return -1; }
        w->v = nv;
        w->cap = nc;
    }
    struct wset *e = &w->v[w->n];
    e->set = *s;
    e->hash = h;
    for (int c = 0; c < 128; c++) e->next[c] = -2;
    return w->n++;
}

static void walk(struct walker *w, uint32_t node, int32_t si, struct u8 u)
{
    struct grammar_state *st = w->st;
    const struct gtrie *t = &st->g->trie;
    for (uint32_t k = 0; k < t->n_child[node]; k++) {
        uint32_t ch = t->child[t->first_child[node] + k];
        struct u8 v = u;
        int done;
        if (!u8_feed(&v, t->byte[ch], &done)) continue;
        int32_t ni = si;
        if (done) {
            int ascii = v.cp < 128;
            ni = ascii ? w->v[si].next[v.cp] : -2;
            if (ni == -2) {
                struct gset next;
                int ok = advance(st, &st->scratch, &w->v[si].set, v.cp, &next) && next.n;
                ni = ok ? intern(w, &next) : -1;
                if (ascii) w->v[si].next[v.cp] = ni;
            }
            if (ni < 0) continue;
        } else if (!any_meets(st, &w->v[si].set, v.lo, v.hi)) {
            continue;
        }
        for (uint32_t q = 0; q < t->n_tok[ch]; q++) {
            int32_t id = t->tok[t->tok_first[ch] + q];
            if (!w->allowed[id]) { w->allowed[id] = 1; (*w->count)++; }
        }
        walk(w, ch, ni, v);
    }
}

/* the state as a list of numbers, for the cache */
static uint32_t *serialize(const struct grammar_state *st, uint32_t *n_out)
{
    uint32_t n = 5;
    for (uint32_t i = 0; i < st->set.n; i++) { n++; for (const struct gnode *x = st->set.s[i]; x; x = x->up) n++; }
    uint32_t *s = malloc(n * sizeof *s), k = 0;
    if (!s) return NULL;
    s[k++] = st->cp; s[k++] = st->need; s[k++] = st->lo; s[k++] = st->hi; s[k++] = st->min;
    for (uint32_t i = 0; i < st->set.n; i++) {
        for (const struct gnode *x = st->set.s[i]; x; x = x->up) s[k++] = x->pos;
        s[k++] = UINT32_MAX;
    }
    *n_out = n;
    return s;
}

int32_t sample_grammar_mask(struct grammar_state *st, uint8_t *allowed)
{
    const struct grammar *g = st->g;
    memset(allowed, 0, (size_t)g->n_vocab);
    if (st->dead || st->eog) return 0;
    uint32_t n_ser = 0;
    uint32_t *ser = serialize(st, &n_ser);
    uint64_t key = 1469598103934665603ull;
    for (uint32_t i = 0; ser && i < n_ser; i++) key = (key ^ ser[i]) * 1099511628211ull;
    st->clock++;
    for (int i = 0; ser && i < N_CACHE; i++) {
        struct gcache *c = &st->cache[i];
        if (c->bits && c->key == key && c->n_ser == n_ser && !memcmp(c->ser, ser, n_ser * sizeof *ser)) {
            for (int32_t v = 0; v < g->n_vocab; v++) allowed[v] = (uint8_t)(c->bits[v >> 6] >> (v & 63) & 1);
            c->used = st->clock;
            free(ser);
            return c->count;
        }
    }
    int32_t count = 0;
    struct u8 u = { st->cp, st->need, st->lo, st->hi, st->min };
    struct walker w = { .st = st, .allowed = allowed, .count = &count };
    int32_t root = intern(&w, &st->set);
    if (root >= 0) walk(&w, 0, root, u);
    free(w.v);
    base_arena_reset(&st->scratch);
    if (!st->need && accepting(&st->set))
        for (int32_t i = 0; i < g->n_vocab; i++) if (g->is_eog[i] && !allowed[i]) { allowed[i] = 1; count++; }
    if (ser) {   /* replace the least recently used entry */
        int lru = 0;
        for (int i = 1; i < N_CACHE; i++) if (st->cache[i].used < st->cache[lru].used) lru = i;
        struct gcache *c = &st->cache[lru];
        size_t n_words = ((size_t)g->n_vocab + 63) / 64;
        if (!c->bits) c->bits = malloc(n_words * sizeof *c->bits);
        if (c->bits) {
            free(c->ser);
            c->ser = ser;
            c->n_ser = n_ser;
            c->key = key;
            memset(c->bits, 0, n_words * sizeof *c->bits);
            for (int32_t v = 0; v < g->n_vocab; v++) c->bits[v >> 6] |= (uint64_t)allowed[v] << (v & 63);
            c->count = count;
            c->used = st->clock;
            ser = NULL;
        }
        free(ser);
    }
    return count;
}

/* ------------------------------------------------------------ trie */

struct tedge { uint32_t parent; uint8_t byte; uint32_t node; };

int sample_grammar_build_trie(struct grammar *g, struct colibri_err *err)
{
    struct gtrie *t = &g->trie;
    /* nodes are made in insertion order; children found by scanning a
     * per-node sorted list kept in a hash-free way: first build with a
     * (parent, byte) -> node map in a simple open-addressing table */
    size_t total = 1;
    for (int32_t i = 0; i < g->n_vocab; i++) total += g->piece_len[i];
    size_t cap = 16;
    while (cap < total * 2) cap *= 2;
    struct tedge *tab = calloc(cap, sizeof *tab);
    uint32_t *end_node = calloc((size_t)g->n_vocab, sizeof *end_node);
    uint32_t n_nodes = 1;
    if (!tab || !end_node) { free(tab); free(end_node); return base_err_set(err, COLIBRI_ENOMEM, "grammar: vocabulary trie"); }
    uint8_t *byte = calloc(total, 1);
    uint32_t *parent = calloc(total, sizeof *parent);
    if (!byte || !parent) { free(tab); free(end_node); free(byte); free(parent); return base_err_set(err, COLIBRI_ENOMEM, "grammar: vocabulary trie"); }
    for (int32_t id = 0; id < g->n_vocab; id++) {
        uint32_t node = 0;
        for (uint32_t k = 0; k < g->piece_len[id]; k++) {
            uint8_t b = (uint8_t)g->piece[id][k];
            size_t h = ((size_t)node * 257 + b + 1) * 0x9E3779B97F4A7C15ull & (cap - 1);
            while (tab[h].node && !(tab[h].parent == node && tab[h].byte == b)) h = (h + 1) & (cap - 1);
            if (!tab[h].node) {
                tab[h] = (struct tedge){ node, b, n_nodes };
                byte[n_nodes] = b;
                parent[n_nodes] = node;
                n_nodes++;
            }
            node = tab[h].node;
        }
        end_node[id] = node;
    }
    free(tab);
    t->n_nodes = n_nodes;
    t->first_child = calloc(n_nodes + 1, sizeof *t->first_child);
    t->n_child = calloc(n_nodes, sizeof *t->n_child);
    t->child = calloc(n_nodes, sizeof *t->child);
    t->byte = byte;
    t->tok_first = calloc(n_nodes + 1, sizeof *t->tok_first);
    t->n_tok = calloc(n_nodes, sizeof *t->n_tok);
    t->tok = calloc((size_t)g->n_vocab + 1, sizeof *t->tok);
    int rc = 0;
    if (!t->first_child || !t->n_child || !t->child || !t->tok_first || !t->n_tok || !t->tok) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "grammar: vocabulary trie");
        goto out;
    }
    for (uint32_t v = 1; v < n_nodes; v++) t->n_child[parent[v]]++;
    for (uint32_t v = 0; v < n_nodes; v++) t->first_child[v + 1] = t->first_child[v] + t->n_child[v];
    memset(t->n_child, 0, n_nodes * sizeof *t->n_child);
    for (uint32_t v = 1; v < n_nodes; v++) {   /* children in creation order: stable, byte order not needed */
        uint32_t p = parent[v];
        t->child[t->first_child[p] + t->n_child[p]++] = v;
    }
    for (int32_t id = 0; id < g->n_vocab; id++) if (g->piece_len[id]) t->n_tok[end_node[id]]++;
    for (uint32_t v = 0; v < n_nodes; v++) t->tok_first[v + 1] = t->tok_first[v] + t->n_tok[v];
    memset(t->n_tok, 0, n_nodes * sizeof *t->n_tok);
    for (int32_t id = 0; id < g->n_vocab; id++)
        if (g->piece_len[id]) { uint32_t v = end_node[id]; t->tok[t->tok_first[v] + t->n_tok[v]++] = id; }
out:
    free(parent);
    free(end_node);
    return rc;
}

void sample_grammar_free_trie(struct gtrie *t)
{
    free(t->first_child);
    free(t->n_child);
    free(t->child);
    free(t->byte);
    free(t->tok_first);
    free(t->n_tok);
    free(t->tok);
    memset(t, 0, sizeof *t);
}
