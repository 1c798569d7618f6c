/* serve/info.h - the bodies of the server's non-generating endpoints:
 * GET /v1/models and /v1/models/{id} (OpenAI), POST /tokenize and
 * /detokenize, GET /props and /slots (the JSON shapes llama-server uses, so
 * its clients and scripts work unchanged).
 *
 * Pure functions of their inputs; thread-safe. Every string returned is
 * malloc'd and NUL-terminated (NULL when out of memory); the caller frees it.
 * Internal to src/serve/. */
#ifndef COLIBRI_SERVE_INFO_H
#define COLIBRI_SERVE_INFO_H

#include <stddef.h>

#include "serve/oai.h"
#include "serve/sched.h"

/* What GET /props reports besides the model. */
struct serve_info_props {
    const char *model_path;     /* the directory given to --model */
    int n_slots;
    const char *kv_tier;        /* the slots' KV tier name */
    const char *kv_rope;        /* its RoPE part's precision, NULL = the tier's default */
    const char *build;          /* version and build string */
};

/* {"object": "list", "data": [model]} */
char *serve_info_models_json(const struct oai_model *m);
/* The model object alone: id, object, created, owned_by, context_length
 * (the model's, max_position_embeddings) and max_model_len (tokens one
 * request may use: the slot size). */
char *serve_info_model_json(const struct oai_model *m);
char *serve_info_props_json(const struct oai_model *m, const struct serve_info_props *p);
/* A JSON array with one object per slot. */
char *serve_info_slots_json(const struct sched_slot_state *slots, int n);

/* POST /tokenize: {"content": string, "add_special": bool = false,
 * "parse_special": bool = true, "with_pieces": bool = false} gives
 * {"tokens": [id, ...]}, or with pieces [{"id": id, "piece": text}, ...]
 * (the piece is an array of byte values when the token alone is not valid
 * UTF-8). POST /detokenize: {"tokens": [id, ...]} gives {"content": text}
 * (bytes that are not UTF-8 replaced by U+FFFD). 0 and *out, or -1 with *e
 * filled (400 naming the field and, for a token id, its index and the valid
 * range). */
int serve_info_tokenize(const struct oai_model *m, const char *body, size_t len, char **out, struct oai_error *e);
int serve_info_detokenize(const struct oai_model *m, const char *body, size_t len, char **out,
                          struct oai_error *e);

#endif
