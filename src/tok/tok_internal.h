/* tok/tok_internal.h - the layout of struct tok, shared by tok_load.c (which
 * fills it), tok_encode.c, tok_decode.c and tok_chat.c (which read it). Not
 * for use outside src/tok/. */
#ifndef COLIBRI_TOK_INTERNAL_H
#define COLIBRI_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tok/tok.h"
#include "tok/tok_map.h"

#define TOK_MAX_STEPS 8

enum tok_id_flag {
    TOK_ID_VALID   = 1,
    TOK_ID_ADDED   = 2,
    TOK_ID_SPECIAL = 4,
    TOK_ID_EOG     = 8,
};

struct tok_added {
    const char *text;           /* points into tok.added_text */
    uint32_t len;
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
};

/* Added tokens of one matching pass, sorted by first byte then length
 * (longest first), so the first hit at a position is the longest. */
struct tok_added_set {
    struct tok_added *tok;
    int n;
    int first[257];             /* tok[first[b] .. first[b+1]) start with byte b */
};

struct cJSON;

struct tok {
    int32_t n_ids;              /* largest id + 1 */
    uint8_t *id_flags;          /* TOK_ID_* per id */
    uint32_t *piece_off, *piece_len; /* decode bytes of each id in `pieces` */
    char *pieces;

    struct tok_strmap vocab;    /* BPE vocabulary: raw bytes -> id */
    struct tok_pairmap merges;  /* (left id, right id) -> rank, merged id */
    int32_t byte_id[256];       /* the single-byte tokens, -1 if absent */
    int32_t unk_id;             /* -1 if none */
    int ignore_merges;

    pcre2_code *steps[TOK_MAX_STEPS]; /* Split(Isolated) regexes, in order */
    int n_steps;

    struct tok_added_set added[2];    /* [0] normalized=false, [1] normalized=true */
    char *added_text;

    int32_t bos_id, eos_id;
    int add_bos, add_eos;
    char *bos_text, *eos_text;  /* "" when absent */
    char *chat_template;        /* NULL when absent */
    struct cJSON *specials;     /* {name: text} a chat template gets (tok_special_tokens) */
    const char *chat_template_from; /* the file it came from (a static name) */
};

/* tiktoken.model in dir into t (tok_tiktoken.c): ids, pieces, vocabulary,
 * merges; *added (the caller's) the special tokens as tokenizer.json's
 * added_tokens list. tok_tiktoken_pattern() is the pre-tokenizer regex. */
int tok_tiktoken_load(const char *dir, struct tok *t, struct cJSON **added, struct colibri_err *err);
const char *tok_tiktoken_pattern(void);

/* The stored bytes of an id, as a tok_key_fn for the vocabulary map. */
const char *tok_key_of(const void *ctx, int32_t id, size_t *len);

#endif
