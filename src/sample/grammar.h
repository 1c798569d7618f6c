/* sample/grammar.h - constrained decoding: a GBNF grammar (the format of
 * llama.cpp's grammars and llama-server's `grammar` field) compiled against
 * a tokenizer's vocabulary, and a matcher that says which tokens may come
 * next.
 *
 * Grammar text: rules `name ::= alternatives`, `root` is the start;
 * alternatives `a | b`, sequences, "literals" and [character classes]
 * (ranges, ^ negation, \x \u \U \n \t \r \\ escapes), `.` (any character),
 * (groups), and the postfix operators * + ? {m} {m,} {m,n}; # comments.
 * A rule may span lines; it ends where the next `name ::=` starts.
 * Refused at compile time, by name: undefined rules, a missing root,
 * left recursion, and grammars with more than GRAMMAR_MAX_RULES rules.
 *
 * The grammar works on Unicode code points of the UTF-8 text; a token may end
 * inside a character, in which case it is allowed when some character the
 * grammar accepts there starts with those bytes. Special tokens never match
 * grammar text; end-of-generation tokens are allowed exactly when the text
 * so far is a complete sentence of the grammar.
 *
 * A struct grammar is read-only after sample_grammar_compile() (but for its
 * mask cache, which fills under its own lock) and may be shared by any
 * number of matchers on any threads; a struct grammar_state belongs to one
 * sampler (not thread-safe). A mask may take a one-time precompute per new
 * stack top (bounded; see grammar_internal.h) and allocates the state's
 * buffers as they grow. */
#ifndef COLIBRI_SAMPLE_GRAMMAR_H
#define COLIBRI_SAMPLE_GRAMMAR_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "colibri.h"

#define GRAMMAR_MAX_RULES 4096

/* How the matcher sees the vocabulary: the bytes of each id (NULL for ids
 * that never match text: special tokens, ids past the tokenizer's) and
 * which ids end generation. */
struct grammar_vocab {
    int32_t n;
    const char *const *piece;
    const uint32_t *piece_len;
    const uint8_t *is_eog;
};

struct grammar;
struct grammar_state;

/* The public handle (include/colibri.h): a grammar compiled for one
 * tokenizer's vocabulary, with the references colibri_grammar_share adds. */
struct colibri_grammar { struct grammar *g; atomic_int refs; };

/* Compiles gbnf[0..len) for vocab (copied). COLIBRI_EINVAL names the line
 * and what is wrong. Free with sample_grammar_free(). */
int  sample_grammar_compile(const char *gbnf, size_t len, const struct grammar_vocab *vocab, struct grammar **out,
                     struct colibri_err *err);
void sample_grammar_free(struct grammar *g);
int32_t sample_grammar_n_vocab(const struct grammar *g);

/* The state at the start of the text. Free with sample_grammar_state_free(). */
int  sample_grammar_state_new(const struct grammar *g, struct grammar_state **out, struct colibri_err *err);
void sample_grammar_state_free(struct grammar_state *st);

/* Whether token id may come next (an EOG id: whether the text is complete). */
int  sample_grammar_allows(struct grammar_state *st, int32_t id);
/* Sets allowed[i] (n_vocab bytes) to 1 for every id that may come next;
 * returns how many. */
int32_t sample_grammar_mask(struct grammar_state *st, uint8_t *allowed);
/* Advances past token id; 0, or COLIBRI_EINVAL if the grammar does not allow
 * it (the state is then dead: nothing more is allowed). */
int  sample_grammar_accept(struct grammar_state *st, int32_t id);
/* 1 once the text is a complete sentence that nothing may extend, or after
 * an EOG id was accepted. */
int  sample_grammar_done(const struct grammar_state *st);

/* JSON Schema (the subset in grammar_schema.c) to GBNF text: a new malloc'd
 * string, or COLIBRI_EUNSUPPORTED naming the keyword and where it is
 * (e.g. "properties.name.pattern"), COLIBRI_EINVAL for a malformed schema
 * or a $ref loop. schema NULL: any JSON object (response_format json_object). */
int sample_grammar_from_json_schema(const char *schema_json, char **gbnf, struct colibri_err *err);

/* The same in pieces, for a grammar that holds several schemas (tool
 * arguments): the rules of one schema whose value is rule `name`, its helper
 * rules named r<N> with N from *next_rule on (advanced past those used, so
 * the next schema's never collide), as a new malloc'd string; the shared JSON
 * rules they use (ws, value, object, array, string, char, number, integer,
 * boolean, null, date with year, leap, mon31, mon30, day28, day30, time,
 * hex, uuid, email) are not included:
 * sample_grammar_json_rules() is their text, to be added once. */
int sample_grammar_json_schema_rules(const char *schema_json, const char *name, int *next_rule, char **gbnf,
                                     struct colibri_err *err);
const char *sample_grammar_json_rules(void);

#endif
