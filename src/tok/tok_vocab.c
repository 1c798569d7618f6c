/* tok/tok_vocab.c - looking a piece up in the vocabulary: the map's key
 * function and text -> id (added tokens first), shared by the loaders and
 * the encoder. */
#include <string.h>

#include "tok/tok_internal.h"

const char *tok_key_of(const void *ctx, int32_t id, size_t *len)
{
    const struct tok *t = ctx;
    *len = t->piece_len[id];
    return t->pieces + t->piece_off[id];
}

int32_t tok_token_id(const struct tok *t, const char *text, size_t len)
{
    if (len == 0) return -1;
    for (int s = 0; s < 2; s++) {
        const struct tok_added_set *set = &t->added[s];
        unsigned b = (unsigned char)text[0];
        for (int k = set->first[b]; k < set->first[b + 1]; k++)
            if (set->tok[k].len == len && !memcmp(set->tok[k].text, text, len)) return set->tok[k].id;
    }
    return tok_strmap_get(&t->vocab, text, len, tok_key_of, t);
}
