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
 * the same one). Before walking, a mask asks the grammar's cache
 * (grammar_mcache.c) what each stack's top lets through whatever lies below
 * it, and walks only the ids that reach below, from the whole set.
 *
 * Nodes are interned by (item, node below) in a table per arena, so equal
 * stacks are the same pointer and the set of stacks is a graph that shares
 * every common tail. Comparing, hashing and deduplicating a stack then
 * costs one step whatever its depth, and keeping a state copies each shared
 * node once: a deeply nested or ambiguous grammar costs per step what its
 * number of stacks costs, not that times their depth. */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "sample/grammar_internal.h"

#define MAX_STACKS 1024         /* an ambiguous grammar past this is cut off (dead) */
#define MAX_EXPAND 100000       /* node creations per expansion */
#define N_CACHE 64               /* masks kept per state, as bits (16 KB each for 129k ids) */

/* id: the node's number in its state, for hashing (so a walk's work does
 * not depend on where memory lies); fwd: its copy while a state is kept;
 * mark: the last set (epoch) it joined, or the last listing that numbered
 * it idx (serialize()); xmark: the last set it was expanded into, at a cost
 * of xcount calls. */
struct gnode { uint32_t pos, id, idx, xcount; struct gnode *up, *fwd; uint64_t mark, xmark; };

/* Open addressing over node pointers; used[] lists the filled slots so a
 * table empties in the time it took to fill. */
struct gtab { struct gnode **slot; uint32_t *used; uint32_t cap, n; };

/* An arena and the table interning its nodes. */
struct ggen { struct base_arena arena; struct gtab tab; };

struct gset { struct gnode **s; uint32_t n; int empty; };   /* empty: NULL is in s */

struct gcache { uint64_t key; uint32_t *ser; uint32_t n_ser; uint64_t *bits; int32_t count; uint64_t used; };

struct grammar_state {
    const struct grammar *g;
    struct ggen cur, next, scratch;   /* the state's stacks; the next state's; one query's */
    struct gset set;
    int dead, eog;
    uint64_t clock, epoch, work;
    uint32_t n_made;                  /* nodes made, for their ids */
    struct gnode **path;              /* copy_stack's nodes still to copy */
    uint32_t path_cap;
    struct gcache cache[N_CACHE];
    /* partial UTF-8 carried between tokens */
    uint32_t cp, need, lo, hi, min;
    long budget;
    int flags;                        /* MASK_NO_CACHE, MASK_NO_MEMO (tests) */
    uint32_t masks_cached;
    /* the cached mask's buffers, grown to the largest set and list met */
    const struct gmc_entry **ents;
    uint32_t ents_cap, cd_cap;
    int32_t *cd[2];
    uint8_t *cdmark;
    int32_t *dsi;                     /* per byte of a piece: the walk's set, and its UTF-8 carry */
    struct u8 *du;
};

int32_t sample_grammar_n_vocab(const struct grammar *g) { return g->n_vocab; }

/* ------------------------------------------------------------ stacks */

static uint64_t node_hash(uint32_t pos, const struct gnode *up)
{
    uint64_t x = (up ? up->id + 1ull : 0) * 0x9E3779B97F4A7C15ull ^ (uint64_t)pos * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ x >> 29;
}

/* The slot holding (pos, up), or the empty slot where it would go. */
static uint32_t tab_slot(struct grammar_state *st, const struct gtab *t, uint32_t pos, const struct gnode *up, uint64_t h)
{
    uint32_t i = (uint32_t)h & (t->cap - 1);
    for (;;) {
        st->work++;
        const struct gnode *n = t->slot[i];
        if (!n || (n->pos == pos && n->up == up)) return i;
        i = (i + 1) & (t->cap - 1);
    }
}

static struct gnode *tab_get(struct grammar_state *st, const struct gtab *t, uint32_t pos, const struct gnode *up, uint64_t h)
{
    return t->n ? t->slot[tab_slot(st, t, pos, up, h)] : NULL;
}

/* Doubles t (kept at most half full); 0 out of memory. */
static int tab_grow(struct grammar_state *st, struct gtab *t)
{
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    struct gnode **slot = calloc(cap, sizeof *slot);
    uint32_t *used = malloc(cap / 2 * sizeof *used);
    if (!slot || !used) { free(slot); free(used); return 0; }
    struct gtab nt = { slot, used, cap, 0 };
    for (uint32_t k = 0; k < t->n; k++) {
        struct gnode *n = t->slot[t->used[k]];
        uint32_t i = tab_slot(st, &nt, n->pos, n->up, node_hash(n->pos, n->up));
        nt.slot[i] = n;
        nt.used[nt.n++] = i;
    }
    free(t->slot);
    free(t->used);
    *t = nt;
    return 1;
}

static void gen_reset(struct ggen *gen)
{
    for (uint32_t k = 0; k < gen->tab.n; k++) gen->tab.slot[gen->tab.used[k]] = NULL;
    gen->tab.n = 0;
    base_arena_reset(&gen->arena);
}

static void gen_free(struct ggen *gen)
{
    free(gen->tab.slot);
    free(gen->tab.used);
    base_arena_free(&gen->arena);
}

/* The node (pos, up) of gen, made if new. A scratch stack may rest on the
 * kept state's nodes, so scratch asks the kept table first: a stack has one
 * node whichever arena holds it. */
static struct gnode *node_get(struct grammar_state *st, struct ggen *gen, uint32_t pos, struct gnode *up, int *ok)
{
    uint64_t h = node_hash(pos, up);
    if (gen == &st->scratch) {
        struct gnode *n = tab_get(st, &st->cur.tab, pos, up, h);
        if (n) return n;
    }
    struct gtab *t = &gen->tab;
    if (2 * (t->n + 1) > t->cap && !tab_grow(st, t)) { *ok = 0; return NULL; }
    uint32_t i = tab_slot(st, t, pos, up, h);
    if (t->slot[i]) return t->slot[i];
    struct gnode *n = base_arena_alloc(&gen->arena, sizeof *n);
    if (!n) { *ok = 0; return NULL; }
    *n = (struct gnode){ .pos = pos, .id = st->n_made++, .up = up };
    t->slot[i] = n;
    t->used[t->n++] = i;
    return n;
}

static struct gnode *cont(struct grammar_state *st, struct ggen *gen, uint32_t pos, struct gnode *up, int *ok)
{
    const struct gitem *it = st->g->items;
    while (it[pos].kind == GI_END) {   /* the rule is done: go on where its caller continues */
        if (!up) return NULL;
        pos = up->pos;
        up = up->up;
    }
    return node_get(st, gen, pos, up, ok);
}

/* A new set: members are marked with a fresh epoch, so a stack already in
 * the set is found by its mark. */
static void set_begin(struct grammar_state *st, struct gset *out)
{
    *out = (struct gset){ 0 };
    st->epoch++;
}

/* Adds stack n unless the set (the last begun) holds it. 0 past MAX_STACKS
 * or out of memory. */
static int set_add(struct grammar_state *st, struct ggen *gen, struct gset *out, struct gnode *n)
{
    st->work++;
    if (n ? n->mark == st->epoch : out->empty) return 1;
    if (out->n >= MAX_STACKS) return 0;
    if ((out->n & (out->n - 1)) == 0) {   /* grow at powers of two */
        uint32_t cap = out->n ? out->n * 2 : 4;
        struct gnode **ns = base_arena_alloc(&gen->arena, cap * sizeof *ns);
        if (!ns) return 0;
        if (out->n) memcpy(ns, out->s, out->n * sizeof *ns);
        out->s = ns;
    }
    if (n) n->mark = st->epoch;
    else out->empty = 1;
    out->s[out->n++] = n;
    return 1;
}

/* Adds the stacks n expands to (tops on classes, or NULL). 0 on overflow.
 * The budget counts calls. A node expanded before into the same set added
 * all it leads to then, so it is charged what it cost then and not walked
 * again: alternatives that reach one rule by many paths cost each path
 * once, and a grammar is refused at exactly the budget a full walk meets. */
static int expand(struct grammar_state *st, struct ggen *gen, struct gnode *n, struct gset *out)
{
    long before = st->budget;
    if (--st->budget < 0) return 0;
    if (!n) return set_add(st, gen, out, NULL);
    const struct grammar *g = st->g;
    struct gitem it = g->items[n->pos];
    if (it.kind == GI_CLASS) return set_add(st, gen, out, n);
    st->work++;
    if (n->xmark == st->epoch) { st->budget = before - n->xcount; return st->budget >= 0; }
    int ok = 1;
    struct gnode *up = cont(st, gen, n->pos + 1, n->up, &ok);
    if (!ok) return 0;
    for (uint32_t k = g->rule_alt[it.v]; k < g->rule_alt[it.v + 1]; k++) {
        struct gnode *m = cont(st, gen, g->alt_start[k], up, &ok);
        if (!ok || !expand(st, gen, m, out)) return 0;
    }
    n->xmark = st->epoch;
    n->xcount = (uint32_t)(before - st->budget);
    return 1;
}

static int class_has(const struct gclass *c, uint32_t cp)
{
    int in = 0;
    for (uint32_t i = 0; i < c->n && !in; i++) in = cp >= c->r[2 * i] && cp <= c->r[2 * i + 1];
    return c->neg ? !in : in;
}

/* Whether any code point of [lo, hi] is in c. Classes are sorted, merged and
 * never negated after compiling (grammar_parse.c), so this is exact. */
static int class_meets(const struct gclass *c, uint32_t lo, uint32_t hi)
{
    for (uint32_t i = 0; i < c->n; i++) if (c->r[2 * i] <= hi && c->r[2 * i + 1] >= lo) return 1;
    return 0;
}

/* The set after code point cp. 0 on overflow (out then undefined). */
static int advance(struct grammar_state *st, struct ggen *a, const struct gset *in, uint32_t cp, struct gset *out)
{
    const struct grammar *g = st->g;
    set_begin(st, out);
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
static int run_bytes(struct grammar_state *st, struct ggen *a, struct gset *set, struct u8 *u,
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

/* The copy of stack n in st->next. A node is copied once (then found by
 * fwd), so a set whose stacks share their tails copies in the time of its
 * distinct nodes; the nodes still to copy are gathered first, since a stack
 * can be as deep as the text is long. */
static struct gnode *copy_stack(struct grammar_state *st, struct gnode *n, int *ok)
{
    uint32_t k = 0;
    for (; n && !n->fwd; n = n->up) {
        st->work++;
        if (k == st->path_cap) {
            uint32_t cap = st->path_cap ? st->path_cap * 2 : 64;
            struct gnode **p = realloc(st->path, cap * sizeof *p);
            if (!p) { *ok = 0; return NULL; }
            st->path = p;
            st->path_cap = cap;
        }
        st->path[k++] = n;
    }
    struct gnode *below = n ? n->fwd : NULL;
    while (k-- > 0) {
        below = node_get(st, &st->next, st->path[k]->pos, below, ok);
        if (!*ok) return NULL;
        st->path[k]->fwd = below;
    }
    return below;
}

static int copy_set(struct grammar_state *st, const struct gset *in, struct gset *out)
{
    set_begin(st, out);
    for (uint32_t i = 0; i < in->n; i++) {
        int ok = 1;
        struct gnode *c = copy_stack(st, in->s[i], &ok);
        if (!ok || !set_add(st, &st->next, out, c)) return 0;
    }
    return 1;
}

int sample_grammar_state_new(const struct grammar *g, struct grammar_state **out, struct colibri_err *err)
{
    struct grammar_state *st = calloc(1, sizeof *st);
    if (!st) return base_err_set(err, COLIBRI_ENOMEM, "grammar: out of memory");
    st->g = g;
    st->budget = MAX_EXPAND;
    struct gset start;
    set_begin(st, &start);
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
    gen_free(&st->cur);
    gen_free(&st->next);
    gen_free(&st->scratch);
    free(st->path);
    for (int i = 0; i < N_CACHE; i++) { free(st->cache[i].ser); free(st->cache[i].bits); }
    free(st->ents);
    free(st->cd[0]);
    free(st->cd[1]);
    free(st->cdmark);
    free(st->dsi);
    free(st->du);
    free(st);
}

static int accepting(const struct gset *s) { return s->empty; }

void sample_grammar_stats(const struct grammar_state *st, struct grammar_stats *out)
{
    *out = (struct grammar_stats){ .work = st->work, .stacks = st->set.n, .nodes = st->cur.tab.n, .masks_cached = st->masks_cached };
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
    gen_reset(&st->scratch);
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
        gen_reset(&st->scratch);
        st->dead = 1;
        return COLIBRI_EINVAL;
    }
    /* keep the new set in a fresh arena; the old one (and scratch) go */
    gen_reset(&st->next);
    struct gset kept;
    if (!copy_set(st, &set, &kept)) { st->dead = 1; return COLIBRI_ENOMEM; }
    struct ggen t = st->cur;
    st->cur = st->next;
    st->next = t;
    gen_reset(&st->scratch);
    st->set = kept;
    st->cp = u.cp; st->need = u.need; st->lo = u.lo; st->hi = u.hi; st->min = u.min;
    return 0;
}

/* ------------------------------------------------------------ masks */

/* During one mask walk the same sets recur at many trie nodes (inside a
 * JSON string every ordinary character leads back to the same set), so sets
 * are interned by structure and each one remembers where each ASCII
 * character takes it: most trie nodes then cost a table lookup. */
struct wset { struct gset set; uint64_t hash; int32_t next[128]; int sent; };   /* next: -2 unknown, -1 dead */
struct walker { struct grammar_state *st; struct wset *v; int32_t n, cap; uint8_t *allowed; int32_t *count; int oom;
                const struct gnode *sent; };   /* sent: the sentinel node, when classifying; wset.sent: the set holds it */

static uint64_t set_hash(const struct gset *s)
{
    uint64_t h = 1469598103934665603ull ^ s->n;
    for (uint32_t i = 0; i < s->n; i++) h = (h ^ (uint64_t)(uintptr_t)s->s[i]) * 1099511628211ull;
    return h;
}

static int same_set(const struct gset *a, const struct gset *b)
{
    if (a->n != b->n) return 0;
    for (uint32_t i = 0; i < a->n; i++) if (a->s[i] != b->s[i]) return 0;   /* interned: equal is same */
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
    e->sent = 0;
    for (uint32_t i = 0; w->sent && i < s->n; i++) e->sent |= s->s[i] == w->sent;
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

/* The state as a list of numbers, for the cache: the UTF-8 carry, then per
 * stack the items of the nodes not yet listed, top first, and the number of
 * the node they rest on (UINT32_MAX: none). Shared tails are listed once,
 * and since nodes are interned, equal states give equal lists. */
static uint32_t *serialize(struct grammar_state *st, uint32_t *n_out)
{
    uint32_t n = 5;
    st->epoch++;
    for (uint32_t i = 0; i < st->set.n; i++) {
        n += 2;
        for (struct gnode *x = st->set.s[i]; x && x->mark != st->epoch; x = x->up) { x->mark = st->epoch; n++; }
    }
    st->work += n;
    uint32_t *s = malloc(n * sizeof *s), k = 0, idx = 0;
    if (!s) return NULL;
    s[k++] = st->cp; s[k++] = st->need; s[k++] = st->lo; s[k++] = st->hi; s[k++] = st->min;
    st->epoch++;
    for (uint32_t i = 0; i < st->set.n; i++) {
        uint32_t at = k++, c = 0;
        struct gnode *x = st->set.s[i];
        for (; x && x->mark != st->epoch; x = x->up) { x->mark = st->epoch; x->idx = idx++; s[k++] = x->pos; c++; }
        s[at] = c;
        s[k++] = x ? x->idx : UINT32_MAX;
    }
    *n_out = n;
    return s;
}

/* ------------------------------------------------------------ mask cache */

#define MC_MAX_WORK 50000000ull   /* steps (grammar_stats' work) one key's precompute may take before it is refused */

/* One key's classification walk: the stack top with the sentinel below.
 * A trie node whose set holds the sentinel has reached below the key, so
 * every id at or under it depends on what is there (cd); an id whose every
 * prefix keeps a set without it is accepted whatever is below (acc). */
struct mcw {
    struct walker w;
    struct gmc_entry *e;
    uint32_t cap_acc, cap_cd;
    uint64_t work0;
    int stop;                     /* refused, or out of memory (oom) */
};

static int push_id(int32_t **v, uint32_t *n, uint32_t *cap, int32_t id)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 256;
        int32_t *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return 0;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = id;
    return 1;
}

static void mc_subtree(struct mcw *m, uint32_t node)
{
    const struct gtrie *t = &m->w.st->g->trie;
    m->w.st->work++;
    for (uint32_t q = 0; q < t->n_tok[node] && !m->stop; q++)
        if (!push_id(&m->e->cd, &m->e->n_cd, &m->cap_cd, t->tok[t->tok_first[node] + q])) m->stop = m->w.oom = 1;
    for (uint32_t k = 0; k < t->n_child[node] && !m->stop; k++) mc_subtree(m, t->child[t->first_child[node] + k]);
}

static void mc_walk(struct mcw *m, uint32_t node, int32_t si, struct u8 u)
{
    struct walker *w = &m->w;
    struct grammar_state *st = w->st;
    const struct gtrie *t = &st->g->trie;
    for (uint32_t k = 0; k < t->n_child[node] && !m->stop; k++) {
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
                if (!advance(st, &st->scratch, &w->v[si].set, v.cp, &next)) { m->stop = 1; return; }
                uint32_t charge = (uint32_t)(MAX_EXPAND - st->budget);
                if (charge > m->e->max_charge) m->e->max_charge = charge;
                if (next.n > m->e->max_set) m->e->max_set = next.n;
                ni = next.n ? intern(w, &next) : -1;
                if (w->oom) { m->stop = 1; return; }
                if (ascii) w->v[si].next[v.cp] = ni;
            }
            if (ni < 0) continue;
            if (w->v[ni].sent) { mc_subtree(m, ch); continue; }
        } else if (!any_meets(st, &w->v[si].set, v.lo, v.hi)) {
            continue;
        }
        for (uint32_t q = 0; q < t->n_tok[ch] && !m->stop; q++)
            if (!push_id(&m->e->acc, &m->e->n_acc, &m->cap_acc, t->tok[t->tok_first[ch] + q])) m->stop = w->oom = 1;
        if (st->work - m->work0 > MC_MAX_WORK) m->stop = 1;
        else mc_walk(m, ch, ni, v);
    }
}

int sample_grammar_mc_classify(const struct grammar *g, const uint32_t *key, uint32_t n, int bottom_null,
                               struct gmc_entry *e)
{
    struct grammar_state *st = calloc(1, sizeof *st);
    if (!st) return COLIBRI_ENOMEM;
    st->g = g;
    int ok = 1;
    struct gnode *sent = bottom_null ? NULL : node_get(st, &st->cur, g->sent, NULL, &ok), *top = sent;
    for (uint32_t i = n; ok && i-- > 0;) top = node_get(st, &st->cur, key[i], top, &ok);
    struct gset start;
    set_begin(st, &start);
    ok = ok && set_add(st, &st->cur, &start, top);
    struct mcw m = { .w = { .st = st, .sent = sent }, .e = e };
    e->max_set = 1;
    int32_t root = ok ? intern(&m.w, &start) : -1;
    if (root >= 0) mc_walk(&m, 0, root, (struct u8){ 0 });
    int rc = !ok || m.w.oom ? COLIBRI_ENOMEM : 0;
    free(m.w.v);
    sample_grammar_state_free(st);
    if (!rc && m.stop) {   /* refused: keep nothing but the verdict */
        free(e->acc); free(e->cd);
        *e = (struct gmc_entry){ .refused = 1 };
    }
    if (!rc && !e->refused && (size_t)e->n_acc * 32 > (size_t)g->n_vocab) {   /* many: as bits */
        size_t n_words = ((size_t)g->n_vocab + 63) / 64;
        e->acc_bits = calloc(n_words, sizeof *e->acc_bits);
        if (!e->acc_bits) return COLIBRI_ENOMEM;
        for (uint32_t i = 0; i < e->n_acc; i++) e->acc_bits[e->acc[i] >> 6] |= 1ull << (e->acc[i] & 63);
        free(e->acc);
        e->acc = NULL;
    }
    e->bytes = sizeof *e + (e->acc ? e->n_acc * sizeof *e->acc : 0) + e->n_cd * sizeof *e->cd +
               (e->acc_bits ? ((size_t)g->n_vocab + 63) / 64 * 8 : 0);
    return rc;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t sz)
{
    if (need <= *cap) return 1;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * sz);
    if (!np) return 0;
    *p = np;
    *cap = nc;
    return 1;
}

/* a[0..na) and b[0..nb) (each in trie order) into out, once each; returns the length */
static uint32_t merge(const uint32_t *rank, const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb, int32_t *out)
{
    uint32_t i = 0, j = 0, k = 0;
    while (i < na || j < nb) {
        if (j == nb || (i < na && rank[a[i]] < rank[b[j]])) out[k++] = a[i++];
        else if (i == na || rank[b[j]] < rank[a[i]]) out[k++] = b[j++];
        else if (a[i] == b[j]) { out[k++] = a[i++]; j++; }
        else out[k++] = a[i++];   /* same bytes, other id: b's comes in its turn */
    }
    return k;
}

static void allow(uint8_t *allowed, int32_t *count, int32_t id)
{
    if (!allowed[id]) { allowed[id] = 1; (*count)++; }
}

/* Walks the ids cd[0..n) (trie order) from the state's whole set, sharing
 * each id's prefix with the one before: what the trie walk does for them. */
static void cd_walk(struct walker *w, const int32_t *cd, uint32_t n, int32_t root)
{
    struct grammar_state *st = w->st;
    const struct grammar *g = st->g;
    const char *prev = NULL;
    uint32_t prev_len = 0, good = 0;
    int failed = 0;
    st->dsi[0] = root;
    st->du[0] = (struct u8){ st->cp, st->need, st->lo, st->hi, st->min };
    for (uint32_t i = 0; i < n; i++) {
        const char *p = g->piece[cd[i]];
        uint32_t len = g->piece_len[cd[i]], lcp = 0, lim = len < prev_len ? len : prev_len;
        while (lcp < lim && p[lcp] == prev[lcp]) lcp++;
        prev = p;
        prev_len = len;
        if (failed && lcp > good) continue;   /* the byte the last one failed on, from the same set */
        uint32_t d = lcp < good ? lcp : good;
        failed = 0;
        for (; d < len && !failed; d++) {
            struct u8 v = st->du[d];
            int32_t si = st->dsi[d], ni = si, done;
            if (!u8_feed(&v, (unsigned char)p[d], &done)) { failed = 1; break; }
            if (done) {
                int ascii = v.cp < 128;
                ni = ascii ? w->v[si].next[v.cp] : -2;
                if (ni == -2) {
                    struct gset next;
                    int ok = advance(st, &st->scratch, &w->v[si].set, v.cp, &next) && next.n;
                    ni = ok ? intern(w, &next) : -1;
                    if (ascii) w->v[si].next[v.cp] = ni;
                }
                if (ni < 0) { failed = 1; break; }
            } else if (!any_meets(st, &w->v[si].set, v.lo, v.hi)) {
                failed = 1;
                break;
            }
            st->dsi[d + 1] = ni;
            st->du[d + 1] = v;
        }
        good = d;
        if (!failed) allow(w->allowed, w->count, cd[i]);
    }
}

/* The mask from the cache: the accepted lists of the stacks' tops, except
 * ids some top leaves to the stack below, which are walked from the whole
 * set. 0 (allowed untouched) when some top has no usable entry, the carry
 * holds a partial character, or the set's bounds could reach MAX_EXPAND or
 * MAX_STACKS: then the caller walks the whole vocabulary. */
static int mask_cached(struct grammar_state *st, uint8_t *allowed, int32_t *count)
{
    const struct grammar *g = st->g;
    if (!g->mc || st->need || (st->flags & MASK_NO_CACHE)) return 0;
    if (!grow((void **)&st->ents, &st->ents_cap, st->set.n, sizeof *st->ents)) return 0;
    uint64_t charge = 0, size = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < st->set.n; i++) {
        const struct gnode *x = st->set.s[i];
        if (!x) continue;   /* the empty stack matches no text */
        uint32_t key[GMC_DEPTH], n = 0;
        for (; x && n < GMC_DEPTH; x = x->up) key[n++] = x->pos;
        const struct gmc_entry *e = sample_grammar_mc_get(g, key, n, !x);
        if (!e || e->refused) return 0;
        charge += e->max_charge;
        size += e->max_set;
        if (charge > MAX_EXPAND || size > MAX_STACKS) return 0;   /* before making the other tops' entries */
        st->ents[k++] = e;
    }
    if (!st->dsi) {
        st->dsi = malloc((g->trie.max_piece + 1) * sizeof *st->dsi);
        st->du = malloc((g->trie.max_piece + 1) * sizeof *st->du);
        if (!st->dsi || !st->du) { free(st->dsi); free(st->du); st->dsi = NULL; st->du = NULL; return 0; }
    }
    const int32_t *cd = k ? st->ents[0]->cd : NULL;
    uint32_t n_cd = k ? st->ents[0]->n_cd : 0;
    if (k > 1) {   /* the union of the lists, in trie order */
        uint32_t total = 0;
        for (uint32_t i = 0; i < k; i++) total += st->ents[i]->n_cd;
        uint32_t c0 = st->cd_cap, c1 = st->cd_cap;
        if (!grow((void **)&st->cd[0], &c0, total, sizeof(int32_t)) || !grow((void **)&st->cd[1], &c1, total, sizeof(int32_t)))
            return 0;
        st->cd_cap = c0 < c1 ? c0 : c1;
        if (!st->cdmark && !(st->cdmark = calloc((size_t)g->n_vocab, 1))) return 0;
        int b = 0;
        n_cd = 0;
        for (uint32_t i = 0; i < k; i++) {
            n_cd = merge(g->trie.tok_rank, st->cd[b], n_cd, st->ents[i]->cd, st->ents[i]->n_cd, st->cd[!b]);
            b = !b;
        }
        cd = st->cd[b];
        for (uint32_t i = 0; i < n_cd; i++) st->cdmark[cd[i]] = 1;
    }
    for (uint32_t i = 0; i < k; i++) {
        const struct gmc_entry *e = st->ents[i];
        if (!e->acc_bits) {
            for (uint32_t j = 0; j < e->n_acc; j++) if (k == 1 || !st->cdmark[e->acc[j]]) allow(allowed, count, e->acc[j]);
            continue;
        }
        for (size_t wd = 0; wd < ((size_t)g->n_vocab + 63) / 64; wd++)
            for (uint64_t bits = e->acc_bits[wd]; bits; bits &= bits - 1) {
                int32_t id = (int32_t)(wd * 64 + (size_t)__builtin_ctzll(bits));
                if (k == 1 || !st->cdmark[id]) allow(allowed, count, id);
            }
    }
    if (k > 1) for (uint32_t i = 0; i < n_cd; i++) st->cdmark[cd[i]] = 0;
    if (n_cd) {
        struct walker w = { .st = st, .allowed = allowed, .count = count };
        int32_t root = intern(&w, &st->set);
        if (root >= 0) cd_walk(&w, cd, n_cd, root);
        free(w.v);
        gen_reset(&st->scratch);
    }
    st->masks_cached++;
    return 1;
}

void sample_grammar_mask_flags(struct grammar_state *st, int flags) { st->flags = flags; }

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
    for (int i = 0; ser && !(st->flags & MASK_NO_MEMO) && i < N_CACHE; i++) {
        struct gcache *c = &st->cache[i];
        if (c->bits && c->key == key && c->n_ser == n_ser && !memcmp(c->ser, ser, n_ser * sizeof *ser)) {
            for (int32_t v = 0; v < g->n_vocab; v++) allowed[v] = (uint8_t)(c->bits[v >> 6] >> (v & 63) & 1);
            c->used = st->clock;
            free(ser);
            return c->count;
        }
    }
    int32_t count = 0;
    if (!mask_cached(st, allowed, &count)) {
        struct u8 u = { st->cp, st->need, st->lo, st->hi, st->min };
        struct walker w = { .st = st, .allowed = allowed, .count = &count };
        int32_t root = intern(&w, &st->set);
        if (root >= 0) walk(&w, 0, root, u);
        free(w.v);
        gen_reset(&st->scratch);
    }
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
