/* serve/oai_parse.c - OpenAI request bodies into jobs; see oai.h.
 *
 * A field given as JSON null counts as absent (clients send null for unset
 * options). Numbers that must be integers must be integral and in range;
 * ranges follow the OpenAI API reference. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/oai.h"
#include "base/strbuf.h"

#define BAD "invalid_request_error"

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "null";
}

/* The field, or NULL when absent or null. */
static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* 1 and *out when given, 0 when absent, -1 with *e filled when wrong. */
static int get_number(const cJSON *o, const char *name, double lo, double hi, double *out, struct oai_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' must be a number, got %s", name, type_name(v));
        return -1;
    }
    /* a literal too large for a double (1e999) parses to inf: out of range too */
    if (!(v->valuedouble >= lo && v->valuedouble <= hi)) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' is out of range: it must be between %g and %g, got %.6g", name, lo,
                      hi, v->valuedouble);
        return -1;
    }
    *out = v->valuedouble;
    return 1;
}

static int get_int(const cJSON *o, const char *name, double lo, double hi, long long *out, struct oai_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' is out of range: it must be between %.0f and %.0f, got %g", name,
                      lo, hi, v->valuedouble);
        return -1;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' must be an integer, got %s", name,
                      cJSON_IsNumber(v) ? "a fractional number" : type_name(v));
        return -1;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' must be between %.0f and %.0f, got %.0f", name, lo, hi,
                      v->valuedouble);
        return -1;
    }
    *out = (long long)v->valuedouble;
    return 1;
}

static int get_bool(const cJSON *o, const char *name, int *out, struct oai_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) {
        oai_error_set(e, 400, BAD, NULL, name, "'%s' must be a boolean, got %s", name, type_name(v));
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 1;
}

static int parse_stop(const cJSON *root, struct job_params *p, struct oai_error *e)
{
    const cJSON *v = field(root, "stop");
    if (!v) return 0;
    if (cJSON_IsString(v)) {
        if (!(p->stop[0] = strdup(v->valuestring))) goto oom;
        p->n_stop = 1;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return -oai_error_set(e, 400, BAD, NULL, "stop", "'stop' must be a string or an array of strings, got %s",
                              type_name(v));
    int n = cJSON_GetArraySize(v);
    if (n > JOB_MAX_STOP)
        return -oai_error_set(e, 400, BAD, NULL, "stop", "'stop' holds %d strings; at most %d are allowed", n,
                              JOB_MAX_STOP);
    int i = 0;
    for (const cJSON *s = v->child; s; s = s->next, i++) {
        if (!cJSON_IsString(s))
            return -oai_error_set(e, 400, BAD, NULL, "stop", "'stop[%d]' must be a string, got %s", i, type_name(s));
        if (!(p->stop[p->n_stop] = strdup(s->valuestring))) goto oom;
        p->n_stop++;
    }
    return 0;
oom:
    return -oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
}

/* Options common to both endpoints. */
static int parse_common(const struct oai_model *m, const cJSON *root, struct job *j, struct oai_error *e)
{
    struct job_params *p = &j->p;
    const cJSON *v = field(root, "model");
    if (v && !cJSON_IsString(v))
        return -oai_error_set(e, 400, BAD, NULL, "model", "'model' must be a string, got %s", type_name(v));
    if (v && strcmp(v->valuestring, m->id))
        return -oai_error_set(e, 404, BAD, "model_not_found", "model",
                              "The model '%s' does not exist; this server serves '%s'", v->valuestring, m->id);
    long long n = 1;
    if (get_int(root, "n", 1, 1e9, &n, e) < 0) return -1;
    /* each choice runs in a slot of its own, so n is bounded by the slots
     * (fewer free ones make the rest wait in the queue, as requests do) */
    if (n > 1 && n > m->n_slots)
        return -oai_error_set(e, 400, BAD, NULL, "n",
                              "'n' is %lld, but this server has %d slot%s (--slots) and runs each choice in a "
                              "slot of its own", n, m->n_slots, m->n_slots == 1 ? "" : "s");
    if (n > 1 && n > m->max_queue)
        return -oai_error_set(e, 400, BAD, NULL, "n",
                              "'n' is %lld, but this server queues at most %d (--queue) and queues each choice",
                              n, m->max_queue);
    p->n = (int)n;
    long long best_of = 1;
    if (get_int(root, "best_of", 1, 1e9, &best_of, e) < 0) return -1;
    if (best_of != 1)
        return -oai_error_set(e, 400, BAD, NULL, "best_of", "'best_of' must be 1 (got %lld)", best_of);

    double x;
    p->temperature = m->dflt.has_temp ? m->dflt.temp : 1.0f;
    p->top_p = 1.0f;
    int r;
    if ((r = get_number(root, "temperature", 0, 2, &x, e)) < 0) return -1;
    if (r) p->temperature = (float)x;
    if ((r = get_number(root, "top_p", 0, 1, &x, e)) < 0) return -1;
    if (r) p->top_p = (float)x;
    if ((r = get_number(root, "presence_penalty", -2, 2, &x, e)) < 0) return -1;
    if (r) p->presence_penalty = (float)x;
    if ((r = get_number(root, "frequency_penalty", -2, 2, &x, e)) < 0) return -1;
    if (r) p->frequency_penalty = (float)x;
    long long seed;
    if ((r = get_int(root, "seed", -9.2e18, 9.2e18, &seed, e)) < 0) return -1;
    p->seed = r ? (uint64_t)seed : m->dflt.has_seed ? (uint64_t)m->dflt.seed
                                                    : ((uint64_t)time(NULL) << 20) ^ (uint64_t)(uintptr_t)j;
    if (oai_parse_sampling(m, root, p, e) || oai_parse_format(m, root, p, e)) return -1;
    if (get_bool(root, "stream", &p->stream, e) < 0) return -1;
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return -oai_error_set(e, 400, BAD, NULL, "stream_options", "'stream_options' must be an object, got %s",
                                  type_name(so));
        if (get_bool(so, "include_usage", &p->include_usage, e) < 0) return -1;
    }
    return parse_stop(root, p, e);
}

static int parse_logprobs(const cJSON *root, enum job_kind kind, struct job_params *p, struct oai_error *e)
{
    long long k = 0;
    if (kind == JOB_COMPLETION) {
        /* completions: logprobs is the number of alternatives, 0..20 */
        int r = get_int(root, "logprobs", 0, JOB_MAX_TOP, &k, e);
        if (r < 0) return -1;
        p->logprobs = r;
        p->n_top = (int)k;
        return 0;
    }
    if (get_bool(root, "logprobs", &p->logprobs, e) < 0) return -1;
    int r = get_int(root, "top_logprobs", 0, JOB_MAX_TOP, &k, e);
    if (r < 0) return -1;
    if (r && k > 0 && !p->logprobs)
        return -oai_error_set(e, 400, BAD, NULL, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    p->n_top = (int)k;
    return 0;
}

static int push_ids(struct job *j, const int32_t *ids, size_t n)
{
    int32_t *np = realloc(j->prompt, ((size_t)j->n_prompt + n) * sizeof *np);
    if (!np && n) return -1;
    if (n) memcpy(np + j->n_prompt, ids, n * sizeof *np);
    j->prompt = np;
    j->n_prompt += (int)n;
    return 0;
}

static int encode(const struct oai_model *m, struct job *j, const char *text, unsigned flags, const char *param,
                  struct oai_error *e)
{
    int32_t *ids = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_encode(m->tok, text, strlen(text), flags, &ids, &n, NULL, &err))
        return -oai_error_set(e, 400, BAD, NULL, param, "'%s' could not be tokenized: %s", param, err.msg);
    /* An empty text starts from BOS even where the tokenizer adds none, as
     * OpenAI's completions start an empty prompt from <|endoftext|>. */
    int32_t bos = colibri_tokenizer_bos(m->tok);
    int rc = n ? push_ids(j, ids, n) : bos >= 0 ? push_ids(j, &bos, 1) : 0;
    free(ids);
    return rc ? -oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory") : 0;
}

static int parse_token_ids(const struct oai_model *m, struct job *j, const cJSON *arr, const char *param,
                           struct oai_error *e)
{
    int i = 0;
    for (const cJSON *t = arr->child; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= m->n_vocab)
            return -oai_error_set(e, 400, BAD, NULL, "prompt",
                                  "'%s[%d]' must be a token id in [0, %d), got %s", param, i, m->n_vocab,
                                  cJSON_IsNumber(t) ? "a number outside it" : type_name(t));
        int32_t id = (int32_t)t->valuedouble;
        if (push_ids(j, &id, 1)) return -oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    return 0;
}

/* prompt: a string, an array of token ids, or a one-element array of either. */
static int parse_prompt(const struct oai_model *m, const cJSON *root, struct job *j, struct oai_error *e)
{
    const cJSON *v = field(root, "prompt");
    if (!v) return -oai_error_set(e, 400, BAD, NULL, "prompt", "'prompt' is required");
    if (cJSON_IsString(v)) return encode(m, j, v->valuestring, COLIBRI_ENCODE_ADD_SPECIAL, "prompt", e);
    if (!cJSON_IsArray(v))
        return -oai_error_set(e, 400, BAD, NULL, "prompt",
                              "'prompt' must be a string, an array of token ids, or a one-element array of "
                              "either; got %s", type_name(v));
    int n = cJSON_GetArraySize(v);
    if (n == 0) return -oai_error_set(e, 400, BAD, NULL, "prompt", "'prompt' is empty");
    const cJSON *first = v->child;
    if (cJSON_IsNumber(first)) return parse_token_ids(m, j, v, "prompt", e);
    if (n != 1)
        return -oai_error_set(e, 400, BAD, NULL, "prompt",
                              "'prompt' holds %d prompts; this server takes one prompt per request", n);
    if (cJSON_IsString(first)) return encode(m, j, first->valuestring, COLIBRI_ENCODE_ADD_SPECIAL, "prompt", e);
    if (cJSON_IsArray(first)) return parse_token_ids(m, j, first, "prompt[0]", e);
    return -oai_error_set(e, 400, BAD, NULL, "prompt", "'prompt[0]' must be a string or an array of token ids, got %s",
                          type_name(first));
}

/* content: a string, null, or an array of {"type":"text","text":...} parts
 * (concatenated). *owned gets a malloc'd string when parts were joined. */
static int message_content(const cJSON *msg, int i, const char **out, char **owned, struct oai_error *e)
{
    const cJSON *c = field(msg, "content");
    *out = NULL;
    *owned = NULL;
    if (!c) return 0;
    if (cJSON_IsString(c)) { *out = c->valuestring; return 0; }
    if (!cJSON_IsArray(c))
        return -oai_error_set(e, 400, BAD, NULL, "messages", "'messages[%d].content' must be a string or an array of "
                              "content parts, got %s", i, type_name(c));
    struct strbuf b = { 0 };
    base_sb_puts(&b, "");
    int k = 0;
    for (const cJSON *part = c->child; part; part = part->next, k++) {
        const cJSON *type = cJSON_IsObject(part) ? field(part, "type") : NULL;
        const cJSON *text = cJSON_IsObject(part) ? field(part, "text") : NULL;
        if (cJSON_IsString(type) && (strstr(type->valuestring, "image") || strstr(type->valuestring, "video"))) {
            base_sb_free(&b);
            return -oai_error_set(e, 400, BAD, NULL, "messages",
                                  "'messages[%d].content[%d]' is an image or video part (type '%s'): image and video "
                                  "inputs are not supported (colibri runs the language model only)", i, k,
                                  type->valuestring);
        }
        if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "text") || !text || !cJSON_IsString(text)) {
            base_sb_free(&b);
            return -oai_error_set(e, 400, BAD, NULL, "messages",
                                  "'messages[%d].content[%d]' must be {\"type\": \"text\", \"text\": string}; only "
                                  "text content is supported", i, k);
        }
        base_sb_puts(&b, text->valuestring);
    }
    if (b.failed) return -oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    *out = *owned = b.s;
    return 0;
}

static int parse_messages(const struct oai_model *m, const cJSON *root, const char *body, size_t body_len,
                          struct job *j, struct oai_error *e)
{
    const cJSON *v = field(root, "messages");
    if (!v) return -oai_error_set(e, 400, BAD, NULL, "messages", "'messages' is required");
    if (!cJSON_IsArray(v))
        return -oai_error_set(e, 400, BAD, NULL, "messages", "'messages' must be an array, got %s", type_name(v));
    int n = cJSON_GetArraySize(v);
    if (n == 0) return -oai_error_set(e, 400, BAD, NULL, "messages", "'messages' must hold at least one message");
    struct colibri_chat_msg *msgs = calloc((size_t)n, sizeof *msgs);
    char **owned = calloc((size_t)n, sizeof *owned);
    int rc = 0, i = 0;
    if (!msgs || !owned) { rc = -oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); goto out; }
    static const char *const roles[] = { "system", "user", "assistant", "tool", "developer" };
    for (const cJSON *msg = v->child; msg; msg = msg->next, i++) {
        if (!cJSON_IsObject(msg)) {
            rc = -oai_error_set(e, 400, BAD, NULL, "messages", "'messages[%d]' must be an object, got %s", i,
                                type_name(msg));
            goto out;
        }
        const cJSON *role = field(msg, "role");
        if (!role || !cJSON_IsString(role)) {
            rc = -oai_error_set(e, 400, BAD, NULL, "messages", "'messages[%d].role' must be a string", i);
            goto out;
        }
        int known = -1;
        for (int r = 0; r < 5; r++)
            if (!strcmp(role->valuestring, roles[r])) known = r;
        if (known < 0) {
            rc = -oai_error_set(e, 400, BAD, NULL, "messages",
                                "'messages[%d].role' is '%s'; expected system, user, assistant, tool or developer",
                                i, role->valuestring);
            goto out;
        }
        msgs[i].role = known == 4 ? "system" : roles[known];    /* developer is the newer name of system */
        if ((rc = message_content(msg, i, &msgs[i].content, &owned[i], e))) goto out;
    }
    char *text = NULL;
    size_t len = 0;
    if (oai_render_chat(m, root, body, body_len, msgs, n, &j->p, &text, &len, e)) {
        rc = -e->status;
        goto out;
    }
    rc = encode(m, j, text, 0, "messages", e);
    free(text);
out:
    if (owned)
        for (int k = 0; k < n; k++) free(owned[k]);
    free(owned);
    free(msgs);
    return rc;
}

static int parse_body(const struct oai_model *m, const cJSON *root, const char *body, size_t body_len, struct job *j,
                      struct oai_error *e)
{
    if (parse_common(m, root, j, e)) return -1;
    if (parse_logprobs(root, j->kind, &j->p, e)) return -1;
    long long max_tokens = 0;
    int r = get_int(root, "max_tokens", 1, 1e15, &max_tokens, e);
    if (r < 0) return -1;
    const char *mt_name = "max_tokens";
    if (!r && j->kind == JOB_CHAT) {
        r = get_int(root, "max_completion_tokens", 1, 1e15, &max_tokens, e);
        if (r < 0) return -1;
        mt_name = "max_completion_tokens";
    }
    if (j->kind == JOB_COMPLETION) {
        int echo = 0;
        if (get_bool(root, "echo", &echo, e) < 0) return -1;
        if (echo) return -oai_error_set(e, 400, BAD, NULL, "echo", "'echo' is not supported");
        const cJSON *suffix = field(root, "suffix");
        if (suffix && !(cJSON_IsString(suffix) && !suffix->valuestring[0]))
            return -oai_error_set(e, 400, BAD, NULL, "suffix", "'suffix' is not supported");
        if (parse_prompt(m, root, j, e)) return -1;
    } else if (parse_messages(m, root, body, body_len, j, e)) {
        return -1;
    }
    const char *pname = j->kind == JOB_CHAT ? "messages" : "prompt";
    if (j->n_prompt == 0) return -oai_error_set(e, 400, BAD, NULL, pname, "the prompt has no tokens");
    if (j->n_prompt >= m->n_ctx)
        return -oai_error_set(e, 400, BAD, "context_length_exceeded", pname,
                              "This model's maximum context length is %d tokens, but the prompt has %d tokens "
                              "(at least one more is needed to generate)", m->n_ctx, j->n_prompt);
    if (!r && m->dflt.has_max_tokens && m->dflt.max_tokens < m->n_ctx - j->n_prompt) max_tokens = m->dflt.max_tokens;
    else if (!r) max_tokens = m->n_ctx - j->n_prompt;
    if (j->n_prompt + max_tokens > m->n_ctx)
        return -oai_error_set(e, 400, BAD, "context_length_exceeded", mt_name,
                              "This model's maximum context length is %d tokens; the request asks for %d prompt "
                              "tokens + %lld %s = %lld tokens", m->n_ctx, j->n_prompt, max_tokens, mt_name,
                              j->n_prompt + max_tokens);
    j->p.max_tokens = (int)max_tokens;
    return 0;
}

/* What the parser would accept but must not: anything but whitespace after
 * the value, a NUL in a string (cJSON's strings end at the first NUL, so the
 * rest of the string would silently vanish) and raw control characters
 * (JSON requires them escaped; a raw NUL would cut a string the same way).
 * body[0, end) is the parsed value, inside which every backslash starts an
 * escape in a string. 0, or -1 with *e filled. */
static int check_body_bytes(const char *body, size_t len, const char *end, struct oai_error *e)
{
    size_t n = (size_t)(end - body);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)body[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            oai_error_set(e, 400, BAD, NULL, NULL,
                          "the request body holds the control character 0x%02x at byte %zu; JSON strings must "
                          "escape it", c, i);
            return -1;
        }
        if (c == '\\') {
            if (i + 5 < n && !memcmp(body + i + 1, "u0000", 5)) {
                oai_error_set(e, 400, BAD, NULL, NULL,
                              "the request body holds '\\u0000' at byte %zu; strings with a NUL character are "
                              "not accepted", i);
                return -1;
            }
            i++;                /* the escaped character: JSON "\\\\u0000" is a backslash and text */
        }
    }
    for (size_t i = n; i < len; i++)
        if (!strchr(" \t\n\r", body[i]) || !body[i]) {
            oai_error_set(e, 400, BAD, NULL, NULL,
                          "the request body has data after its JSON value, at byte %zu of %zu; send one object",
                          i, len);
            return -1;
        }
    return 0;
}

struct job *oai_parse(const struct oai_model *m, enum job_kind kind, const char *body, size_t len,
                      struct oai_error *e)
{
    cJSON *root = serve_oai_parse_object(body, len, e);
    if (!root) return NULL;
    struct job *j = job_new(kind);
    if (!j) {
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        cJSON_Delete(root);
        return NULL;
    }
    j->created = time(NULL);
    static const char hex[] = "0123456789abcdef";
    char rnd[25];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)(uintptr_t)j ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 24; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        rnd[i] = hex[x & 15];
    }
    rnd[24] = 0;
    snprintf(j->id, sizeof j->id, "%s-%s", kind == JOB_CHAT ? "chatcmpl" : "cmpl", rnd);
    int rc = parse_body(m, root, body, len, j, e);
    cJSON_Delete(root);
    if (rc) {
        job_release(j);
        return NULL;
    }
    return j;
}

struct cJSON *serve_oai_parse_object(const char *body, size_t len, struct oai_error *e)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t off = end && end >= body ? (size_t)(end - body) : 0;
        oai_error_set(e, 400, BAD, NULL, NULL, "the request body is not valid JSON (error near byte %zu)", off);
        return NULL;
    }
    if (check_body_bytes(body, len, end, e)) {
        cJSON_Delete(root);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        oai_error_set(e, 400, BAD, NULL, NULL, "the request body must be a JSON object, got %s", type_name(root));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
