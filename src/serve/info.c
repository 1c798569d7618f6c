/* serve/info.c - bodies of the non-generating endpoints; see info.h. */
#include "serve/info.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_utf8.h"

#define BAD "invalid_request_error"

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static cJSON *model_object(const struct oai_model *m)
{
    cJSON *mo = cJSON_CreateObject();
    cJSON_AddStringToObject(mo, "id", m->id);
    cJSON_AddStringToObject(mo, "object", "model");
    cJSON_AddNumberToObject(mo, "created", (double)m->created);
    cJSON_AddStringToObject(mo, "owned_by", "colibri");
    cJSON_AddNumberToObject(mo, "context_length", m->n_ctx_model);
    cJSON_AddNumberToObject(mo, "max_model_len", m->n_ctx);
    return mo;
}

char *serve_info_models_json(const struct oai_model *m)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), model_object(m));
    return print(root);
}

char *serve_info_model_json(const struct oai_model *m) { return print(model_object(m)); }

char *serve_info_props_json(const struct oai_model *m, const struct serve_info_props *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", m->id);
    cJSON_AddStringToObject(o, "model_path", p->model_path);
    cJSON_AddNumberToObject(o, "context_length", m->n_ctx_model);
    cJSON_AddNumberToObject(o, "n_ctx", m->n_ctx);
    cJSON_AddNumberToObject(o, "total_slots", p->n_slots);
    cJSON_AddStringToObject(o, "kv_tier", p->kv_tier);
    if (p->kv_rope) cJSON_AddStringToObject(o, "kv_rope", p->kv_rope);
    else cJSON_AddNullToObject(o, "kv_rope");
    cJSON_AddStringToObject(o, "build_info", p->build);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "default_generation_settings"), "n_ctx", m->n_ctx);
    return print(o);
}

char *serve_info_slots_json(const struct sched_slot_state *slots, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        const struct sched_slot_state *s = &slots[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", s->id);
        cJSON_AddStringToObject(o, "state", s->processing ? "processing" : "idle");
        cJSON_AddBoolToObject(o, "is_processing", s->processing);
        cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx);
        cJSON_AddNumberToObject(o, "cached_tokens", s->cached_tokens);
        if (s->processing) {
            cJSON_AddNumberToObject(o, "n_prompt_tokens", s->n_prompt);
            cJSON_AddNumberToObject(o, "n_decoded", s->n_generated);
        }
        cJSON_AddItemToArray(a, o);
    }
    return print(a);
}

/* ------------------------------------------------------------ tokenize */

/* 1 and *out when the boolean field is given, 0 when absent or null, -1
 * with *e filled when it is not a boolean. */
static int get_bool(const cJSON *o, const char *name, int *out, struct oai_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' must be a boolean", name);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 1;
}

/* The token's text as a JSON string, or its byte values when it is not
 * valid UTF-8 alone (part of a character). */
static cJSON *piece_json(const colibri_tokenizer *t, int32_t id)
{
    char *bytes = NULL;
    size_t len = 0;
    if (colibri_tokenizer_decode(t, &id, 1, 0, &bytes, &len, NULL)) return cJSON_CreateString("");
    cJSON *p;
    if (tok_utf8_count_invalid(bytes, len) == 0) {
        p = cJSON_CreateString(bytes);
    } else {
        p = cJSON_CreateArray();
        for (size_t i = 0; i < len; i++) cJSON_AddItemToArray(p, cJSON_CreateNumber((unsigned char)bytes[i]));
    }
    free(bytes);
    return p;
}

int serve_info_tokenize(const struct oai_model *m, const char *body, size_t len, char **out, struct oai_error *e)
{
    *out = NULL;
    cJSON *root = serve_oai_parse_object(body, len, e);
    if (!root) return -1;
    int rc = -1, add_special = 0, parse_special = 1, with_pieces = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!c || !cJSON_IsString(c)) {
        oai_error_set(e, 400, BAD, NULL, "content", "'content' must be a string (the text to tokenize)%s",
                      c ? "" : "; it is missing");
        goto out;
    }
    if (get_bool(root, "add_special", &add_special, e) < 0 || get_bool(root, "parse_special", &parse_special, e) < 0 ||
        get_bool(root, "with_pieces", &with_pieces, e) < 0)
        goto out;
    unsigned flags = (add_special ? COLIBRI_ENCODE_ADD_SPECIAL : 0) | (parse_special ? 0 : COLIBRI_ENCODE_NO_PARSE_SPECIAL);
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_encode(m->tok, c->valuestring, strlen(c->valuestring), flags, &ids, &n, NULL, &err)) {
        oai_error_set(e, 400, BAD, NULL, "content", "'content' could not be tokenized: %s", err.msg);
        goto out;
    }
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens");
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(toks, cJSON_CreateNumber(ids[i]));
            continue;
        }
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", ids[i]);
        cJSON_AddItemToObject(t, "piece", piece_json(m->tok, ids[i]));
        cJSON_AddItemToArray(toks, t);
    }
    if (!(*out = print(o))) {
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    rc = 0;
out:
    free(ids);
    cJSON_Delete(root);
    return rc;
}

int serve_info_detokenize(const struct oai_model *m, const char *body, size_t len, char **out,
                          struct oai_error *e)
{
    *out = NULL;
    cJSON *root = serve_oai_parse_object(body, len, e);
    if (!root) return -1;
    int rc = -1;
    int32_t *ids = NULL;
    char *text = NULL, *clean = NULL;
    size_t n_text = 0;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!a || !cJSON_IsArray(a)) {
        oai_error_set(e, 400, BAD, NULL, "tokens", "'tokens' must be an array of token ids%s",
                      a ? "" : "; it is missing");
        goto out;
    }
    int n = cJSON_GetArraySize(a), i = 0;
    int32_t n_vocab = colibri_tokenizer_n_vocab(m->tok);
    if (n > 0 && !(ids = malloc((size_t)n * sizeof *ids))) {
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    for (const cJSON *t = a->child; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= n_vocab) {
            oai_error_set(e, 400, BAD, NULL, "tokens", "'tokens[%d]' must be a token id in [0, %d), got %s", i,
                          n_vocab, cJSON_IsNumber(t) ? "a number outside it" : "something else");
            goto out;
        }
        ids[i] = (int32_t)t->valuedouble;
    }
    struct colibri_err err = { 0 };
    if (n > 0 && colibri_tokenizer_decode(m->tok, ids, (size_t)n, 0, &text, &n_text, &err)) {
        oai_error_set(e, 400, BAD, NULL, "tokens", "'tokens' could not be decoded: %s", err.msg);
        goto out;
    }
    clean = tok_utf8_sanitize(text ? text : "", n_text, NULL);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "content", clean ? clean : "");
    if (!clean || !(*out = print(o))) {
        if (!clean) cJSON_Delete(o);
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    rc = 0;
out:
    free(clean);
    free(text);
    free(ids);
    cJSON_Delete(root);
    return rc;
}
