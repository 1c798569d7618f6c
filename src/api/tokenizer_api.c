/* api/tokenizer_api.c - the tokenizer, chat-template, detokenizer, sampler
 * and stop-string parts of include/colibri.h, as thin wrappers over tok/ and
 * sample/ (contracts in colibri.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/err.h"
#include "colibri.h"
#include "sample/grammar.h"
#include "sample/sample.h"
#include "tok/jinja.h"
#include "tok/tok.h"
#include "tok/tok_chat.h"
#include "tok/tok_chat_v4.h"
#include "tok/tok_template.h"
#include "base/util.h"

/* The chat template in use: the model's own Jinja (tpl) when it ships one or
 * the user names one; a built-in renderer (chat) only when it ships none.
 * A shipped template colibri cannot run leaves tpl NULL and its reason in
 * tpl_err, so chat rendering reports it instead of falling back. */
struct colibri_tokenizer {
    struct tok *tok;
    enum tok_chat_kind chat;
    struct tok_template *tpl;
    char *tpl_src;              /* tpl's source text (colibri_tokenizer_chat_reads) */
    struct colibri_err tpl_err;
};

/* The built-in template dir/config.json's model_type chooses when the model
 * ships none, else TOK_CHAT_NONE (the tokens decide): DeepSeek-V4 ships its
 * prompt format as DeepSeek's Python encoder, not as a template or tokens to
 * know it by; GLM-5.3 (glm5_next) takes GLM-5's format, the GLM renderer. A
 * missing or unreadable config chooses nothing. */
static enum tok_chat_kind chat_of_model_type(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t n = 0;
    char *text = base_read_file_all(path, &n);
    cJSON *cfg = text ? cJSON_ParseWithLength(text, n) : NULL;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    enum tok_chat_kind k = !cJSON_IsString(mt) ? TOK_CHAT_NONE
                         : !strcmp(mt->valuestring, "deepseek_v4") ? TOK_CHAT_DEEPSEEK_V4
                         : !strcmp(mt->valuestring, "glm5_next") ? TOK_CHAT_GLM : TOK_CHAT_NONE;
    cJSON_Delete(cfg);
    free(text);
    return k;
}

int colibri_tokenizer_load(const char *dir, colibri_tokenizer **out, struct colibri_err *err)
{
    if (!dir || !out) return base_err_set(err, COLIBRI_EINVAL, "tokenizer_load: NULL argument");
    colibri_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return base_err_set(err, COLIBRI_ENOMEM, "tokenizer_load");
    int rc = tok_load(dir, &t->tok, err);
    if (rc) { free(t); return rc; }
    const char *src = tok_chat_template(t->tok);
    if (src) {
        char origin[512];
        snprintf(origin, sizeof origin, "%s/%s", dir, tok_chat_template_from(t->tok));
        rc = tok_template_new(src, strlen(src), origin, &t->tpl, &t->tpl_err);
        if (!rc && !(t->tpl_src = strdup(src))) rc = base_err_set(&t->tpl_err, COLIBRI_ENOMEM, "out of memory");
        if (rc == COLIBRI_ENOMEM) {
            base_err_set(err, rc, "%s", t->tpl_err.msg);
            colibri_tokenizer_free(t);
            return rc;
        }
    } else {
        enum tok_chat_kind k = chat_of_model_type(dir);
        t->chat = k != TOK_CHAT_NONE ? k : tok_chat_detect(t->tok);
    }
    *out = t;
    return 0;
}

int colibri_tokenizer_set_chat_template(colibri_tokenizer *t, const char *src, size_t len, const char *origin,
                                        struct colibri_err *err)
{
    if (!t || !src) return base_err_set(err, COLIBRI_EINVAL, "set_chat_template: NULL argument");
    struct tok_template *tt = NULL;
    int rc = tok_template_new(src, len, origin, &tt, err);
    if (rc) return rc;
    char *copy = malloc(len + 1);
    if (!copy) { tok_template_free(tt); return base_err_set(err, COLIBRI_ENOMEM, "set_chat_template: out of memory"); }
    memcpy(copy, src, len);
    copy[len] = 0;
    tok_template_free(t->tpl);
    free(t->tpl_src);
    t->tpl = tt;
    t->tpl_src = copy;
    t->tpl_err = (struct colibri_err){ 0 };
    t->chat = TOK_CHAT_NONE;
    return 0;
}

int colibri_tokenizer_chat_check(const colibri_tokenizer *t, struct colibri_err *err)
{
    if (!t) return base_err_set(err, COLIBRI_EINVAL, "chat_check: NULL argument");
    if (t->tpl) return 0;
    if (t->tpl_err.code) return base_err_set(err, t->tpl_err.code, "%s", t->tpl_err.msg);
    if (t->chat == TOK_CHAT_NONE)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: the model ships no chat template and its tokens match "
                       "no built-in one (deepseek_v3, kimi_k2, glm); give one with --chat-template FILE");
    return 0;
}

void colibri_tokenizer_free(colibri_tokenizer *t)
{
    if (!t) return;
    tok_template_free(t->tpl);
    free(t->tpl_src);
    tok_free(t->tok);
    free(t);
}

int colibri_tokenizer_encode(const colibri_tokenizer *t, const char *text, size_t len, unsigned flags,
                             int32_t **ids, size_t *n_ids, size_t *n_replaced, struct colibri_err *err)
{
    if (!t || (!text && len) || !ids || !n_ids) return base_err_set(err, COLIBRI_EINVAL, "encode: NULL argument");
    unsigned f = (flags & COLIBRI_ENCODE_ADD_SPECIAL ? TOK_ADD_SPECIAL : 0) |
                 (flags & COLIBRI_ENCODE_NO_PARSE_SPECIAL ? TOK_NO_PARSE_SPECIAL : 0);
    struct tok_ids v = { 0 };
    int rc = tok_encode(t->tok, text ? text : "", len, f, &v, n_replaced, err);
    if (rc) { free(v.ids); return rc; }
    *ids = v.ids;
    *n_ids = v.n;
    return 0;
}

int colibri_tokenizer_decode(const colibri_tokenizer *t, const int32_t *ids, size_t n_ids, int skip_special,
                             char **text, size_t *len, struct colibri_err *err)
{
    if (!t || (!ids && n_ids) || !text || !len) return base_err_set(err, COLIBRI_EINVAL, "decode: NULL argument");
    return tok_decode(t->tok, ids, n_ids, skip_special, text, len, err);
}

int32_t colibri_tokenizer_n_vocab(const colibri_tokenizer *t) { return tok_n_vocab(t->tok); }

int32_t colibri_tokenizer_bos(const colibri_tokenizer *t) { return tok_bos(t->tok); }
int32_t colibri_tokenizer_eos(const colibri_tokenizer *t) { return tok_eos(t->tok); }
int colibri_tokenizer_is_eog(const colibri_tokenizer *t, int32_t id) { return tok_is_eog(t->tok, id); }

int32_t colibri_tokenizer_token_id(const colibri_tokenizer *t, const char *text)
{
    return text ? tok_token_id(t->tok, text, strlen(text)) : -1;
}

int colibri_tokenizer_chat_reads(const colibri_tokenizer *t, const char *name)
{
    if (!t || !t->tpl || !t->tpl_src || !name || !name[0]) return -1;
    size_t n = strlen(name);
    for (const char *p = t->tpl_src; (p = strstr(p, name)); p += n) {
        char a = p > t->tpl_src ? p[-1] : ' ', b = p[n];
        int ident_a = (a >= 'a' && a <= 'z') || (a >= 'A' && a <= 'Z') || (a >= '0' && a <= '9') || a == '_';
        int ident_b = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '_';
        if (!ident_a && !ident_b) return 1;
    }
    return 0;
}

const char *colibri_tokenizer_chat_name(const colibri_tokenizer *t)
{
    return t->tpl ? "jinja" : tok_chat_name(t->chat);
}

const char *colibri_tokenizer_chat_origin(const colibri_tokenizer *t)
{
    return t->tpl ? tok_template_origin(t->tpl) : t->chat != TOK_CHAT_NONE ? "built-in" : "none";
}

static int check_roles(const struct colibri_chat_msg *msgs, size_t n, struct colibri_err *err)
{
    static const char *const ROLES[] = { "system", "user", "assistant", "tool" };
    for (size_t i = 0; i < n; i++) {
        int ok = 0;
        for (int r = 0; r < 4 && !ok; r++) ok = msgs[i].role && !strcmp(msgs[i].role, ROLES[r]);
        if (!ok) return base_err_set(err, COLIBRI_EINVAL, "chat: message %zu has role '%s' (expected system, user, "
                                "assistant or tool)", i, msgs[i].role ? msgs[i].role : "(null)");
    }
    return 0;
}

int colibri_chat_render(const colibri_tokenizer *t, const struct colibri_chat_msg *msgs, size_t n_msgs,
                        int add_generation_prompt, char **text, size_t *len, struct colibri_err *err)
{
    if (!t || (!msgs && n_msgs) || !text || !len) return base_err_set(err, COLIBRI_EINVAL, "chat: NULL argument");
    int rc = check_roles(msgs, n_msgs, err);
    if (rc) return rc;
    if (!t->tpl) {
        if ((rc = colibri_tokenizer_chat_check(t, err))) return rc;
        return tok_chat_render(t->tok, t->chat, msgs, n_msgs, add_generation_prompt, text, len, err);
    }
    cJSON *arr = tok_chat_msgs_json(msgs, n_msgs);
    if (!arr) return base_err_set(err, COLIBRI_ENOMEM, "chat: out of memory");
    rc = tok_template_render(t->tpl, t->tok, arr, NULL, NULL, add_generation_prompt, text, len, err);
    cJSON_Delete(arr);
    return rc;
}

int colibri_chat_render_json(const colibri_tokenizer *t, const char *messages_json, const char *tools_json,
                             const char *vars_json, int add_generation_prompt, char **text, size_t *len,
                             struct colibri_err *err)
{
    if (!t || !messages_json || !text || !len) return base_err_set(err, COLIBRI_EINVAL, "chat: NULL argument");
    /* parsed keeping number literals, so the template sees 2.0 as a float (tok_jinja_json_parse) */
    cJSON *msgs = tok_jinja_json_parse(messages_json, strlen(messages_json)),
          *tools = tools_json ? tok_jinja_json_parse(tools_json, strlen(tools_json)) : NULL,
          *vars = vars_json ? tok_jinja_json_parse(vars_json, strlen(vars_json)) : NULL;
    int rc = 0;
    if (!cJSON_IsArray(msgs)) rc = base_err_set(err, COLIBRI_EINVAL, "chat: messages are not a JSON array");
    else if (tools_json && !cJSON_IsArray(tools)) rc = base_err_set(err, COLIBRI_EINVAL, "chat: tools are not a JSON array");
    else if (vars_json && !cJSON_IsObject(vars)) rc = base_err_set(err, COLIBRI_EINVAL, "chat: template variables are not a JSON object");
    if (!rc && t->tpl) {
        rc = tok_template_render(t->tpl, t->tok, msgs, tools, vars, add_generation_prompt, text, len, err);
    } else if (!rc && t->chat == TOK_CHAT_DEEPSEEK_V4) {
        rc = tok_chat_v4_render(msgs, tools, vars, add_generation_prompt, text, len, err);
    } else if (!rc) {
        /* the built-in renderers know role and content only: anything else
         * would be dropped from the prompt, so it is refused by name */
        if ((rc = colibri_tokenizer_chat_check(t, err))) goto out;
        if (tools && cJSON_GetArraySize(tools) > 0) {
            rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: the built-in %s template renders no tools; give the "
                         "model's Jinja template with --chat-template FILE", tok_chat_name(t->chat));
            goto out;
        }
        if (vars && vars->child) {
            rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: the built-in %s template takes no variables ('%s')",
                         tok_chat_name(t->chat), vars->child->string);
            goto out;
        }
        int n = cJSON_GetArraySize(msgs);
        struct colibri_chat_msg *m = calloc((size_t)n + 1, sizeof *m);
        if (!m) { rc = base_err_set(err, COLIBRI_ENOMEM, "chat: out of memory"); goto out; }
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, msgs) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role"), *c = it->child;
            m[i].role = cJSON_IsString(role) ? role->valuestring : NULL;
            for (; c && !rc; c = c->next) {
                if (!strcmp(c->string, "role")) continue;
                if (!strcmp(c->string, "content") && (cJSON_IsString(c) || cJSON_IsNull(c))) {
                    m[i].content = cJSON_IsString(c) ? c->valuestring : NULL;
                    continue;
                }
                rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: message %d: the built-in %s template renders only "
                             "string content, not '%s'", i, tok_chat_name(t->chat), c->string);
            }
            i++;
        }
        if (!rc) rc = colibri_chat_render(t, m, (size_t)n, add_generation_prompt, text, len, err);
        free(m);
    }
out:
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    cJSON_Delete(vars);
    return rc;
}

/* ------------------------------------------------------------ grammar */

static int grammar_for(const colibri_tokenizer *t, const char *gbnf, size_t len, colibri_grammar **out,
                       struct colibri_err *err)
{
    int32_t n = tok_n_vocab(t->tok);
    const char **piece = calloc((size_t)n, sizeof *piece);
    uint32_t *plen = calloc((size_t)n, sizeof *plen);
    uint8_t *eog = calloc((size_t)n, 1);
    colibri_grammar *g = calloc(1, sizeof *g);
    if (g) atomic_init(&g->refs, 1);
    int rc = 0;
    if (!piece || !plen || !eog || !g) { rc = base_err_set(err, COLIBRI_ENOMEM, "grammar: out of memory"); goto out; }
    for (int32_t i = 0; i < n; i++) {
        eog[i] = (uint8_t)tok_is_eog(t->tok, i);
        if (tok_is_special(t->tok, i)) continue;   /* control tokens never spell grammar text */
        size_t l = 0;
        const char *p = tok_piece(t->tok, i, &l);
        if (p && l) { piece[i] = p; plen[i] = (uint32_t)l; }
    }
    struct grammar_vocab v = { .n = n, .piece = piece, .piece_len = plen, .is_eog = eog };
    if ((rc = sample_grammar_compile(gbnf, len, &v, &g->g, err))) goto out;
    /* a grammar nothing in the vocabulary can start is refused now, not mid-request */
    struct grammar_state *st = NULL;
    if ((rc = sample_grammar_state_new(g->g, &st, err))) goto out;
    uint8_t *allowed = malloc((size_t)n);
    if (!allowed) { sample_grammar_state_free(st); rc = base_err_set(err, COLIBRI_ENOMEM, "grammar: out of memory"); goto out; }
    int32_t k = sample_grammar_mask(st, allowed);
    free(allowed);
    sample_grammar_state_free(st);
    if (k == 0) rc = base_err_set(err, COLIBRI_EINVAL, "grammar: no token of the vocabulary can start it (it cannot be satisfied)");
out:
    free(piece);
    free(plen);
    free(eog);
    if (rc) { colibri_grammar_free(g); return rc; }
    *out = g;
    return 0;
}

int colibri_grammar_new(const colibri_tokenizer *t, const char *gbnf, size_t len, colibri_grammar **out,
                        struct colibri_err *err)
{
    if (!t || !gbnf || !out) return base_err_set(err, COLIBRI_EINVAL, "grammar_new: NULL argument");
    return grammar_for(t, gbnf, len, out, err);
}

int colibri_grammar_from_json_schema(const colibri_tokenizer *t, const char *schema_json, colibri_grammar **out,
                                     struct colibri_err *err)
{
    if (!t || !out) return base_err_set(err, COLIBRI_EINVAL, "sample_grammar_from_json_schema: NULL argument");
    char *gbnf = NULL;
    int rc = sample_grammar_from_json_schema(schema_json, &gbnf, err);
    if (rc) return rc;
    rc = grammar_for(t, gbnf, strlen(gbnf), out, err);
    if (rc == COLIBRI_EINVAL && strstr(err->msg, "left-recursive"))   /* the converter's rules only loop through $refs */
        base_err_prefix(err, rc, "json_schema: a $ref loop that never reaches a value");
    free(gbnf);
    return rc;
}

colibri_grammar *colibri_grammar_share(colibri_grammar *g)
{
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void colibri_grammar_free(colibri_grammar *g)
{
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    sample_grammar_free(g->g);
    free(g);
}

/* ------------------------------------------------------------- detok */

struct colibri_detok { struct tok_stream s; };

int colibri_detok_new(const colibri_tokenizer *t, int skip_special, colibri_detok **out,
                      struct colibri_err *err)
{
    if (!t || !out) return base_err_set(err, COLIBRI_EINVAL, "detok_new: NULL argument");
    colibri_detok *d = calloc(1, sizeof *d);
    if (!d) return base_err_set(err, COLIBRI_ENOMEM, "detok_new");
    tok_stream_init(&d->s, t->tok, skip_special);
    *out = d;
    return 0;
}

void colibri_detok_free(colibri_detok *d)
{
    if (!d) return;
    tok_stream_free(&d->s);
    free(d);
}

int colibri_detok_push(colibri_detok *d, int32_t id, const char **text, size_t *len, struct colibri_err *err)
{
    return tok_stream_push(&d->s, id, text, len, err);
}

void colibri_detok_flush(colibri_detok *d, const char **text, size_t *len) { tok_stream_flush(&d->s, text, len); }

/* ----------------------------------------------------------- sampler */

struct colibri_sampler { struct sampler s; };

struct colibri_sampler_opts colibri_sampler_default_opts(void)
{
    return (struct colibri_sampler_opts){
        .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f, .seed = 0,
    };
}

int colibri_sampler_new(const struct colibri_sampler_opts *opts, int32_t n_vocab, colibri_sampler **out,
                        struct colibri_err *err)
{
    if (!opts || !out) return base_err_set(err, COLIBRI_EINVAL, "sampler_new: NULL argument");
    colibri_sampler *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "sampler_new");
    int rc = sample_init(&s->s, opts, n_vocab, err);
    if (rc) { free(s); return rc; }
    *out = s;
    return 0;
}

void colibri_sampler_free(colibri_sampler *s)
{
    if (!s) return;
    sample_free(&s->s);
    free(s);
}

int32_t colibri_sampler_sample(colibri_sampler *s, const float *logits, struct colibri_err *err)
{
    if (!s || !logits) return base_err_set(err, COLIBRI_EINVAL, "sampler_sample: NULL argument");
    int32_t t = sample_next(&s->s, logits);
    if (t < 0) return base_err_set(err, t, "sampler: the grammar allows no token here (its text cannot be continued)");
    return t;
}

void colibri_sampler_accept(colibri_sampler *s, int32_t token) { sample_accept(&s->s, token); }
void colibri_sampler_reset(colibri_sampler *s, uint64_t seed) { sample_reset(&s->s, seed); }

/* -------------------------------------------------------------- stop */

struct colibri_stop { struct sample_stop st; };

int colibri_stop_new(const char *const *stops, size_t n, colibri_stop **out, struct colibri_err *err)
{
    if ((!stops && n) || !out) return base_err_set(err, COLIBRI_EINVAL, "stop_new: NULL argument");
    colibri_stop *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "stop_new");
    int rc = sample_stop_init(&s->st, stops, n, err);
    if (rc) { free(s); return rc; }
    *out = s;
    return 0;
}

void colibri_stop_free(colibri_stop *st)
{
    if (!st) return;
    sample_stop_free(&st->st);
    free(st);
}

int colibri_stop_feed(colibri_stop *st, const char *text, size_t len, const char **out, size_t *out_len,
                      struct colibri_err *err)
{
    return sample_stop_feed(&st->st, text, len, out, out_len, err);
}

void colibri_stop_flush(colibri_stop *st, const char **out, size_t *out_len)
{
    sample_stop_flush(&st->st, out, out_len);
}
