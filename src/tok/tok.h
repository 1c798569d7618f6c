/* tok/tok.h - a Hugging Face byte-level BPE tokenizer read from a model
 * directory (tokenizer.json or tiktoken.model, tokenizer_config.json,
 * generation_config.json),
 * its chat template, and a streaming decoder.
 *
 * What is supported (anything else is refused at load, by name):
 *  - model.type "BPE" without dropout, continuing_subword_prefix or
 *    end_of_word_suffix; merges as "a b" strings or ["a","b"] pairs, rank =
 *    position; ignore_merges; unk_token.
 *  - normalizer null or an empty Sequence.
 *  - pre_tokenizer: Split (Regex or String pattern, behavior Isolated, invert
 *    false) and ByteLevel (add_prefix_space false; use_regex true adds the
 *    GPT-2 split), alone or in a Sequence. Regexes run in PCRE2 with UTF and
 *    UCP, each piece matched as its own subject, as Hugging Face does.
 *  - decoder ByteLevel or null; post_processor ByteLevel or null. BOS/EOS
 *    come from tokenizer_config.json add_bos_token / add_eos_token.
 *  - added tokens: split out before pre-tokenization, leftmost-longest,
 *    tokens with normalized=false first, then the others in the gaps;
 *    lstrip, rstrip and single_word honoured.
 * A directory with tiktoken.model and no tokenizer.json (Kimi K2) is read as
 * a tiktoken BPE with Kimi K2's pre-tokenizer and special ids
 * (tok_tiktoken.c).
 * Invalid UTF-8 in the input is replaced by U+FFFD (see tok_utf8.h).
 *
 * A struct tok is read-only after tok_load() and may be used by any number of
 * threads at once; every mutable scratch lives in the call or in the caller's
 * struct tok_stream.
 */
#ifndef COLIBRI_TOK_H
#define COLIBRI_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

struct tok;
struct cJSON;

/* Loads the tokenizer of a model directory: dir/tokenizer.json is required,
 * dir/tokenizer_config.json and dir/generation_config.json are read when
 * present. Free with tok_free(). */
int  tok_load(const char *dir, struct tok **out, struct colibri_err *err);
void tok_free(struct tok *t);

/* A growable id array owned by the caller; free ids with free(). */
struct tok_ids { int32_t *ids; size_t n, cap; };
int tok_ids_push(struct tok_ids *v, int32_t id);

enum tok_encode_flags {
    TOK_ADD_SPECIAL   = 1 << 0,  /* BOS/EOS per tokenizer_config.json */
    TOK_NO_PARSE_SPECIAL = 1 << 1, /* treat added-token text as plain text */
};

/* Appends the ids of text[0..len) to out. *n_replaced (may be NULL) gets the
 * number of invalid UTF-8 subsequences replaced by U+FFFD. */
int tok_encode(const struct tok *t, const char *text, size_t len, unsigned flags,
               struct tok_ids *out, size_t *n_replaced, struct colibri_err *err);

/* The exact bytes a token stands for (not NUL-terminated), or NULL for an id
 * outside the vocabulary. Valid while t lives. */
const char *tok_piece(const struct tok *t, int32_t id, size_t *len);

/* Decodes ids to their bytes into a new malloc'd NUL-terminated buffer (*out,
 * length *out_len). skip_special drops special added tokens. An id outside
 * the vocabulary is an error (COLIBRI_ERANGE naming its position). */
int tok_decode(const struct tok *t, const int32_t *ids, size_t n, int skip_special,
               char **out, size_t *out_len, struct colibri_err *err);

int32_t tok_n_vocab(const struct tok *t);       /* largest id + 1 */
int32_t tok_bos(const struct tok *t);           /* -1 if none */
int32_t tok_eos(const struct tok *t);           /* -1 if none */
int     tok_is_eog(const struct tok *t, int32_t id); /* an end-of-generation id */
int     tok_is_special(const struct tok *t, int32_t id);
int32_t tok_token_id(const struct tok *t, const char *text, size_t len); /* -1 if none */
const char *tok_bos_text(const struct tok *t);  /* "" if none */
const char *tok_eos_text(const struct tok *t);
const char *tok_chat_template(const struct tok *t); /* NULL if none shipped */
/* The special tokens a chat template gets as variables, as transformers'
 * special_tokens_map: a JSON object {"bos_token": "<s>", "pad_token": ...,
 * "image_token": ...} from tokenizer_config.json (and special_tokens_map.json
 * where transformers reads it). Never NULL once loaded; valid while t lives. */
const struct cJSON *tok_special_tokens(const struct tok *t);
const char *tok_chat_template_from(const struct tok *t); /* its file name, NULL if none */

/* Streaming decoder: feed ids one at a time, get bytes that end on a whole
 * UTF-8 character. The concatenation of every output plus tok_stream_flush()
 * equals tok_decode() of the same ids byte for byte; bytes that can never
 * start a valid character are passed on as soon as that is certain. */
struct tok_stream {
    const struct tok *t;
    int skip_special;
    char pend[4];
    int n_pend;
    char *buf;
    size_t cap;
};
void tok_stream_init(struct tok_stream *s, const struct tok *t, int skip_special);
void tok_stream_free(struct tok_stream *s);
/* *text (valid until the next call) and *len get the bytes ready now. */
int  tok_stream_push(struct tok_stream *s, int32_t id, const char **text, size_t *len,
                     struct colibri_err *err);
void tok_stream_flush(struct tok_stream *s, const char **text, size_t *len);

#endif
