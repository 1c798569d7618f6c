/* api/tokenizer_api.c - the tokenizer, chat-template, detokenizer, sampler
 * and stop-string parts of include/colibri.h, as thin wrappers over tok/ and
 * sample/ (contracts in colibri.h). */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "colibri.h"
#include "sample/sample.h"
#include "tok/tok.h"
#include "tok/tok_chat.h"

struct colibri_tokenizer {
    struct tok *tok;
    enum tok_chat_kind chat;
};

int colibri_tokenizer_load(const char *dir, colibri_tokenizer **out, struct colibri_err *err)
{
    if (!dir || !out) return err_set(err, COLIBRI_EINVAL, "tokenizer_load: NULL argument");
    colibri_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, COLIBRI_ENOMEM, "tokenizer_load");
    int rc = tok_load(dir, &t->tok, err);
    if (rc) { free(t); return rc; }
    t->chat = tok_chat_detect(t->tok);
    *out = t;
    return 0;
}

void colibri_tokenizer_free(colibri_tokenizer *t)
{
    if (!t) return;
    tok_free(t->tok);
    free(t);
}

int colibri_tokenizer_encode(const colibri_tokenizer *t, const char *text, size_t len, unsigned flags,
                             int32_t **ids, size_t *n_ids, size_t *n_replaced, struct colibri_err *err)
{
    if (!t || (!text && len) || !ids || !n_ids) return err_set(err, COLIBRI_EINVAL, "encode: NULL argument");
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
    if (!t || (!ids && n_ids) || !text || !len) return err_set(err, COLIBRI_EINVAL, "decode: NULL argument");
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

const char *colibri_tokenizer_chat_name(const colibri_tokenizer *t) { return tok_chat_name(t->chat); }

int colibri_chat_render(const colibri_tokenizer *t, const struct colibri_chat_msg *msgs, size_t n_msgs,
                        int add_generation_prompt, char **text, size_t *len, struct colibri_err *err)
{
    if (!t || (!msgs && n_msgs) || !text || !len) return err_set(err, COLIBRI_EINVAL, "chat: NULL argument");
    return tok_chat_render(t->tok, t->chat, msgs, n_msgs, add_generation_prompt, text, len, err);
}

/* ------------------------------------------------------------- detok */

struct colibri_detok { struct tok_stream s; };

int colibri_detok_new(const colibri_tokenizer *t, int skip_special, colibri_detok **out,
                      struct colibri_err *err)
{
    if (!t || !out) return err_set(err, COLIBRI_EINVAL, "detok_new: NULL argument");
    colibri_detok *d = calloc(1, sizeof *d);
    if (!d) return err_set(err, COLIBRI_ENOMEM, "detok_new");
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
    if (!opts || !out) return err_set(err, COLIBRI_EINVAL, "sampler_new: NULL argument");
    colibri_sampler *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, COLIBRI_ENOMEM, "sampler_new");
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
    if (!s || !logits) return err_set(err, COLIBRI_EINVAL, "sampler_sample: NULL argument");
    return sample_next(&s->s, logits);
}

void colibri_sampler_accept(colibri_sampler *s, int32_t token) { sample_accept(&s->s, token); }
void colibri_sampler_reset(colibri_sampler *s, uint64_t seed) { sample_reset(&s->s, seed); }

/* -------------------------------------------------------------- stop */

struct colibri_stop { struct sample_stop st; };

int colibri_stop_new(const char *const *stops, size_t n, colibri_stop **out, struct colibri_err *err)
{
    if ((!stops && n) || !out) return err_set(err, COLIBRI_EINVAL, "stop_new: NULL argument");
    colibri_stop *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, COLIBRI_ENOMEM, "stop_new");
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
