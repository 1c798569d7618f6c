/* tok/tok_map.c - open-addressing hash tables for vocabulary, merges and the
 * per-call word cache (contract in tok_map.h). */
#include "tok/tok_map.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "colibri.h"

uint64_t tok_hash(const void *p, size_t n) { return XXH3_64bits(p, n); }

static size_t cap_for(size_t expect)
{
    size_t cap = 16;
    while (cap < 2 * expect + 2) cap *= 2;
    return cap;
}

/* ------------------------------------------------------------ strmap */

int tok_strmap_init(struct tok_strmap *m, size_t expect)
{
    m->cap = cap_for(expect);
    m->n = 0;
    m->slots = calloc(m->cap, sizeof *m->slots);
    return m->slots ? 0 : COLIBRI_ENOMEM;
}

void tok_strmap_free(struct tok_strmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static int strmap_grow(struct tok_strmap *m)
{
    size_t ncap = m->cap * 2;
    struct tok_strmap_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return COLIBRI_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].used) continue;
        size_t j = m->slots[i].hash & (ncap - 1);
        while (ns[j].used) j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t val,
                   tok_key_fn key_of, const void *ctx, int32_t *existing)
{
    if (existing) *existing = -1;
    if (2 * (m->n + 1) > m->cap && strmap_grow(m)) return COLIBRI_ENOMEM;
    uint64_t h = tok_hash(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].used) {
        if (m->slots[j].hash == h) {
            size_t klen;
            const char *k = key_of(ctx, m->slots[j].val, &klen);
            if (klen == len && memcmp(k, key, len) == 0) {
                if (existing) *existing = m->slots[j].val;
                return 0;
            }
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = (struct tok_strmap_slot){ .hash = h, .val = val, .used = 1 };
    m->n++;
    return 0;
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len,
                       tok_key_fn key_of, const void *ctx)
{
    uint64_t h = tok_hash(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].used) {
        if (m->slots[j].hash == h) {
            size_t klen;
            const char *k = key_of(ctx, m->slots[j].val, &klen);
            if (klen == len && memcmp(k, key, len) == 0) return m->slots[j].val;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* ----------------------------------------------------------- pairmap */

static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }

static size_t pair_slot(uint64_t key, size_t cap)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

int tok_pairmap_init(struct tok_pairmap *m, size_t expect)
{
    m->cap = cap_for(expect);
    m->n = 0;
    m->slots = malloc(m->cap * sizeof *m->slots);
    if (!m->slots) return COLIBRI_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) m->slots[i].rank = -1;
    return 0;
}

void tok_pairmap_free(struct tok_pairmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static int pairmap_grow(struct tok_pairmap *m)
{
    size_t ncap = m->cap * 2;
    struct tok_pair_slot *ns = malloc(ncap * sizeof *ns);
    if (!ns) return COLIBRI_ENOMEM;
    for (size_t i = 0; i < ncap; i++) ns[i].rank = -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].rank < 0) continue;
        size_t j = pair_slot(m->slots[i].key, ncap);
        while (ns[j].rank >= 0) j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int tok_pairmap_put(struct tok_pairmap *m, int32_t left, int32_t right, int32_t rank,
                    int32_t merged)
{
    if (2 * (m->n + 1) > m->cap && pairmap_grow(m)) return COLIBRI_ENOMEM;
    uint64_t key = pair_key(left, right);
    size_t j = pair_slot(key, m->cap);
    while (m->slots[j].rank >= 0) {
        if (m->slots[j].key == key) return 0;
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = (struct tok_pair_slot){ .key = key, .rank = rank, .merged = merged };
    m->n++;
    return 0;
}

int32_t tok_pairmap_get(const struct tok_pairmap *m, int32_t left, int32_t right,
                        int32_t *merged)
{
    uint64_t key = pair_key(left, right);
    size_t j = pair_slot(key, m->cap);
    while (m->slots[j].rank >= 0) {
        if (m->slots[j].key == key) {
            *merged = m->slots[j].merged;
            return m->slots[j].rank;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* --------------------------------------------------------- wordcache */

static void wc_clear(struct tok_wordcache *c)
{
    for (size_t i = 0; i < c->cap; i++) c->slots[i].key_len = UINT32_MAX;
    c->n = 0;
    c->keys_len = 0;
    c->ids_len = 0;
}

int tok_wordcache_init(struct tok_wordcache *c, size_t max_entries)
{
    memset(c, 0, sizeof *c);
    c->max_entries = max_entries;
    c->cap = cap_for(max_entries);
    c->slots = malloc(c->cap * sizeof *c->slots);
    if (!c->slots) return COLIBRI_ENOMEM;
    wc_clear(c);
    return 0;
}

void tok_wordcache_free(struct tok_wordcache *c)
{
    free(c->slots);
    free(c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

int tok_wordcache_get(const struct tok_wordcache *c, const char *w, size_t len,
                      const int32_t **ids)
{
    uint64_t h = tok_hash(w, len);
    size_t j = h & (c->cap - 1);
    while (c->slots[j].key_len != UINT32_MAX) {
        const struct tok_wc_slot *s = &c->slots[j];
        if (s->hash == h && s->key_len == len && memcmp(c->keys + s->key_off, w, len) == 0) {
            *ids = c->ids + s->ids_off;
            return (int)s->n_ids;
        }
        j = (j + 1) & (c->cap - 1);
    }
    return -1;
}

/* Also allocates when nothing is there yet, so that after a put both arrays
 * exist and a cached word of no bytes or no ids points into one. */
static int grow_bytes(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && *p) return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need) ncap *= 2;
    void *np = realloc(*p, ncap * elem);
    if (!np) return COLIBRI_ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

int tok_wordcache_put(struct tok_wordcache *c, const char *w, size_t len,
                      const int32_t *ids, size_t n)
{
    if (len >= UINT32_MAX || n >= UINT32_MAX) return 0;   /* too big to be worth caching */
    if (c->n >= c->max_entries) wc_clear(c);
    if (grow_bytes((void **)&c->keys, &c->keys_cap, c->keys_len + len, 1) ||
        grow_bytes((void **)&c->ids, &c->ids_cap, c->ids_len + n, sizeof(int32_t)))
        return COLIBRI_ENOMEM;
    uint64_t h = tok_hash(w, len);
    size_t j = h & (c->cap - 1);
    while (c->slots[j].key_len != UINT32_MAX) j = (j + 1) & (c->cap - 1);
    if (len) memcpy(c->keys + c->keys_len, w, len);
    if (n) memcpy(c->ids + c->ids_len, ids, n * sizeof(int32_t)); /* ids may be NULL when n is 0 */
    c->slots[j] = (struct tok_wc_slot){ .hash = h, .key_off = (uint32_t)c->keys_len,
                                        .key_len = (uint32_t)len,
                                        .ids_off = (uint32_t)c->ids_len, .n_ids = (uint32_t)n };
    c->keys_len += len;
    c->ids_len += n;
    c->n++;
    return 0;
}
