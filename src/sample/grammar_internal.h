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
};

/* What a state has cost, for tests that bound it without timing: work
 * counts elementary steps since sample_grammar_state_new (a node looked up,
 * made or copied, a stack added to a set, a number serialized); stacks and
 * nodes are the kept state's stacks and the distinct nodes they hold. */
struct grammar_stats { uint64_t work; uint32_t stacks, nodes; };
void sample_grammar_stats(const struct grammar_state *st, struct grammar_stats *out);

int sample_grammar_build_trie(struct grammar *g, struct colibri_err *err);
void sample_grammar_free_trie(struct gtrie *t);

#endif
