/* sample/grammar_internal.h - the compiled form shared by grammar_parse.c
 * (which builds it) and grammar_match.c (which runs it). Not a public
 * interface.
 *
 * Rules are flattened into one item array: alternative a of rule r is the
 * run items[alt_start[a]] .. up to an END item; rule r's alternatives are
 * alt_start[rule_alt[r]] .. alt_start[rule_alt[r + 1] - 1]. A position in the
 * text is a stack of item indexes: the top is the item to match next (a
 * CLASS), the ones below are where to continue when the rule ends. */
#ifndef COLIBRI_SAMPLE_GRAMMAR_INTERNAL_H
#define COLIBRI_SAMPLE_GRAMMAR_INTERNAL_H

#include "sample/grammar.h"

enum gitem_kind { GI_END = 0, GI_CLASS = 1, GI_RULE = 2 };

struct gitem { uint32_t kind : 2, v : 30; };       /* v: class or rule index */
struct gclass { uint32_t neg, n; uint32_t *r; };   /* n ranges [r[2i], r[2i+1]]; compiled: sorted, merged, neg 0 */

struct gtrie {                  /* the vocabulary's pieces as a byte trie */
    uint32_t *first_child, *n_child;   /* per node: children in child[] */
    uint32_t *child;            /* node ids, sorted by byte */
    uint8_t *byte;              /* per node: the byte leading to it */
    uint32_t *tok_first, *n_tok; /* per node: ids ending here in tok[] */
    int32_t *tok;
    uint32_t n_nodes;
    uint32_t *tok_rank;         /* per id: its end node's place in a preorder walk (merges lists in walk order) */
    uint32_t max_piece;         /* the longest piece, in bytes */
};

struct grammar {
    struct gitem *items;
    uint32_t n_items;
    uint32_t *alt_start, n_alts;
    uint32_t *rule_alt, n_rules;   /* rule_alt has n_rules + 1 entries */
    uint32_t root;
    struct gclass *cls;
    uint32_t n_cls;
    /* the vocabulary */
    int32_t n_vocab;
    char **piece;
    uint32_t *piece_len;
    uint8_t *is_eog;
    struct gtrie trie;
    uint32_t sent;                 /* an item outside every rule: a class matching nothing (the mask cache's "stack below") */
    struct gmc *mc;                /* the mask cache, filled lazily under its lock (grammar_mcache.c) */
};

/* The mask cache. A key is the top GMC_DEPTH nodes of a stack (positions,
 * top first) and whether the stack ends there; its entry says which ids such
 * a stack lets through whatever lies below it (acc), and which ids reach
 * below it, so their fate needs the whole set walked (cd, in trie preorder);
 * every other id is refused. max_charge and max_set bound what one step of
 * the entry's walks costs (expansions, stacks), so a set whose bounds sum
 * within MAX_EXPAND and MAX_STACKS cannot be cut off where its stacks alone
 * were not. refused: the precompute met MC_MAX_WORK or a walk limit. */
#define GMC_DEPTH 4
struct gmc_entry {
    int refused;
    uint32_t n_acc, n_cd;
    int32_t *acc;               /* the accepted ids, or NULL and acc_bits when there are many */
    uint64_t *acc_bits;
    int32_t *cd;
    uint32_t max_charge, max_set;
    size_t bytes;
};
struct gmc;
int  sample_grammar_mc_new(struct grammar *g);
void sample_grammar_mc_free(struct gmc *mc);
/* The entry for the stack top key[0..n) (bottom_null: nothing below it), made
 * if new; NULL when the cache is at its limits (GMC_MAX_ENTRIES, GMC_MAX_BYTES):
 * the caller walks. Entries live until the grammar is freed. */
const struct gmc_entry *sample_grammar_mc_get(const struct grammar *g, const uint32_t *key, uint32_t n, int bottom_null);
/* Fills e for a key by walking the vocabulary from that stack top with the
 * sentinel below (grammar_match.c); 0, or COLIBRI_ENOMEM. */
int  sample_grammar_mc_classify(const struct grammar *g, const uint32_t *key, uint32_t n, int bottom_null,
                                struct gmc_entry *e);
struct gmc_stats { uint32_t entries, refused; size_t bytes; double seconds; };
void sample_grammar_mc_stats(const struct grammar *g, struct gmc_stats *out);
/* Test hooks: flags MASK_NO_CACHE (walk the whole vocabulary, as before the
 * cache) and MASK_NO_MEMO (no per-state memo of masks) for one state. */
#define MASK_NO_CACHE 1
#define MASK_NO_MEMO 2
void sample_grammar_mask_flags(struct grammar_state *st, int flags);

/* What a state has cost, for tests that bound it without timing: work
 * counts elementary steps since sample_grammar_state_new (a node looked up,
 * made or copied, a stack added to a set, a number serialized); stacks and
 * nodes are the kept state's stacks and the distinct nodes they hold. */
struct grammar_stats { uint64_t work; uint32_t stacks, nodes, masks_cached; };   /* masks_cached: masks the cache made */
void sample_grammar_stats(const struct grammar_state *st, struct grammar_stats *out);

int sample_grammar_build_trie(struct grammar *g, struct colibri_err *err);
void sample_grammar_free_trie(struct gtrie *t);

#endif
