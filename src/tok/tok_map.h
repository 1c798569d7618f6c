/* tok/tok_map.h - the three hash tables the tokenizer needs, open addressing
 * with linear probing, sized to a power of two at most half full.
 *
 *  - tok_strmap: byte string -> int32. Keys are NOT copied: the caller hands a
 *    resolver (`key_of`) that returns the bytes stored for a value, so the
 *    vocabulary map costs 8 bytes a slot and reuses the id -> bytes table.
 *  - tok_pairmap: (int32 left, int32 right) -> (rank, merged id), the BPE merges.
 *  - tok_wordcache: byte string -> a run of ids, with its own key and id
 *    storage; used for one encode call, so the tokenizer itself stays
 *    read-only and can be shared between threads.
 *
 * Every function returns 0 or COLIBRI_ENOMEM; lookups return -1 when absent.
 * Not thread-safe for writes; concurrent lookups on a finished map are fine.
 */
#ifndef COLIBRI_TOK_MAP_H
#define COLIBRI_TOK_MAP_H

#include <stddef.h>
#include <stdint.h>

uint64_t tok_hash(const void *p, size_t n);

/* ---- byte string -> value (keys live elsewhere) */
struct tok_strmap_slot { uint64_t hash; int32_t val; int32_t used; };
struct tok_strmap {
    struct tok_strmap_slot *slots;
    size_t cap, n;              /* cap is a power of two */
};
/* Returns the stored key bytes of a value (set by the owner). */
typedef const char *(*tok_key_fn)(const void *ctx, int32_t val, size_t *len);

int  tok_strmap_init(struct tok_strmap *m, size_t expect);
void tok_strmap_free(struct tok_strmap *m);
/* Inserts val under the given key unless the key is present; *existing gets
 * the old value (or -1). Never replaces. */
int  tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t val,
                    tok_key_fn key_of, const void *ctx, int32_t *existing);
int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len,
                       tok_key_fn key_of, const void *ctx);

/* ---- (left, right) -> (rank, merged) */
struct tok_pair_slot { uint64_t key; int32_t rank; int32_t merged; };
struct tok_pairmap {
    struct tok_pair_slot *slots; /* rank < 0 marks an empty slot */
    size_t cap, n;
};
int  tok_pairmap_init(struct tok_pairmap *m, size_t expect);
void tok_pairmap_free(struct tok_pairmap *m);
/* Keeps the first rank given for a pair (later duplicates are ignored, as in
 * Hugging Face tokenizers where the lowest rank wins). */
int  tok_pairmap_put(struct tok_pairmap *m, int32_t left, int32_t right, int32_t rank,
                     int32_t merged);
/* Returns the rank (and *merged) or -1. */
int32_t tok_pairmap_get(const struct tok_pairmap *m, int32_t left, int32_t right,
                        int32_t *merged);

/* ---- word cache: bytes -> ids */
struct tok_wc_slot { uint64_t hash; uint32_t key_off, key_len, ids_off, n_ids; };
struct tok_wordcache {
    struct tok_wc_slot *slots;  /* key_len == UINT32_MAX marks empty */
    size_t cap, n, max_entries;
    char *keys; size_t keys_len, keys_cap;
    int32_t *ids; size_t ids_len, ids_cap;
};
int  tok_wordcache_init(struct tok_wordcache *c, size_t max_entries);
void tok_wordcache_free(struct tok_wordcache *c);
/* Points *ids at the cached ids (valid until the next put) and returns the
 * count, or -1 when the word is not cached. */
int  tok_wordcache_get(const struct tok_wordcache *c, const char *w, size_t len,
                       const int32_t **ids);
/* Adds a word; when the cache holds max_entries it is emptied first. */
int  tok_wordcache_put(struct tok_wordcache *c, const char *w, size_t len,
                       const int32_t *ids, size_t n);

#endif
