/* sample/grammar_trie.c - the vocabulary's pieces as a byte trie, which a
 * mask walks so tokens sharing a prefix share its work (layout in
 * grammar_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sample/grammar_internal.h"

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
    /* ranks in preorder, so lists kept in this order visit a prefix before its extensions */
    t->tok_rank = calloc((size_t)g->n_vocab + 1, sizeof *t->tok_rank);
    uint32_t *todo = malloc((size_t)n_nodes * sizeof *todo), n_todo = 0, rank = 0;
    if (!t->tok_rank || !todo) { free(todo); rc = base_err_set(err, COLIBRI_ENOMEM, "grammar: vocabulary trie"); goto out; }
    todo[n_todo++] = 0;
    while (n_todo) {
        uint32_t v = todo[--n_todo];
        for (uint32_t q = 0; q < t->n_tok[v]; q++) t->tok_rank[t->tok[t->tok_first[v] + q]] = rank;
        rank++;
        for (uint32_t k = t->n_child[v]; k-- > 0;) todo[n_todo++] = t->child[t->first_child[v] + k];
    }
    free(todo);
    for (int32_t id = 0; id < g->n_vocab; id++) if (g->piece_len[id] > t->max_piece) t->max_piece = g->piece_len[id];
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
    free(t->tok_rank);
    memset(t, 0, sizeof *t);
}
