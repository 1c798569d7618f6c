/* tok/tok_load.c - reads tokenizer.json, or a tiktoken.model
 * (tok_tiktoken.c), + tokenizer_config.json and generation_config.json into a
 * struct tok, refusing by name every feature listed as unsupported in tok.h. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tok/tok_internal.h"
#include "tok/tok_utf8.h"

/* The pattern ByteLevel(use_regex=true) splits with (GPT-2). */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void tok_free(struct tok *t)
{
    if (!t) return;
    free(t->id_flags);
    free(t->piece_off);
    free(t->piece_len);
    free(t->pieces);
    tok_strmap_free(&t->vocab);
    tok_pairmap_free(&t->merges);
    for (int i = 0; i < t->n_steps; i++) pcre2_code_free(t->steps[i]);
    free(t->added[0].tok);
    free(t->added[1].tok);
    free(t->added_text);
    free(t->bos_text);
    free(t->eos_text);
    free(t->chat_template);
    cJSON_Delete(t->specials);
    free(t);
}

static cJSON *load_json(const char *path, int required, struct colibri_err *err, int *rc)
{
    size_t len;
    char *text = base_read_file_all(path, &len);
    *rc = 0;
    if (!text) {
        if (required) *rc = base_err_set(err, COLIBRI_EIO, "%s: cannot read", path);
        return NULL;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) *rc = base_err_set(err, COLIBRI_EFORMAT, "%s: invalid JSON near byte %ld", path,
                          end ? (long)(end - text) : -1L);
    free(text);
    return j;
}

static int is_null_or_missing(const cJSON *j) { return !j || cJSON_IsNull(j); }

/* ---------------------------------------------------------- pre-tokenizer */

static int add_step(struct tok *t, const char *pattern, int literal, const char *path,
                    struct colibri_err *err)
{
    if (t->n_steps == TOK_MAX_STEPS)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: more than %d pre-tokenizer splits", path,
                       TOK_MAX_STEPS);
    int ecode;
    PCRE2_SIZE eoff;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &ecode,
                                   &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                       "%s: pre_tokenizer Split regex /%s/ does not compile in PCRE2 at offset %zu: %s",
                       path, pattern, (size_t)eoff, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  /* optional: without JIT it is only slower */
    t->steps[t->n_steps++] = re;
    return 0;
}

static int parse_pretok(struct tok *t, const cJSON *p, const char *path, int *has_bytelevel,
                        struct colibri_err *err)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
    if (!cJSON_IsString(type))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: pre_tokenizer without a type", path);
    const char *ty = type->valuestring;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        if (!cJSON_IsArray(list))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: pre_tokenizer Sequence without pretokenizers", path);
        const cJSON *it;
        cJSON_ArrayForEach(it, list) {
            int rc = parse_pretok(t, it, path, has_bytelevel, err);
            if (rc) return rc;
        }
        return 0;
    }
    if (!strcmp(ty, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(p, "behavior");
        const cJSON *inv = cJSON_GetObjectItemCaseSensitive(p, "invert");
        if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated"))
            return base_err_set(err, COLIBRI_EUNSUPPORTED,
                           "%s: pre_tokenizer Split behavior '%s' is not supported (only Isolated)",
                           path, cJSON_IsString(beh) ? beh->valuestring : "?");
        if (cJSON_IsTrue(inv))
            return base_err_set(err, COLIBRI_EUNSUPPORTED,
                           "%s: pre_tokenizer Split with invert=true is not supported", path);
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
        if (cJSON_IsString(re)) return add_step(t, re->valuestring, 0, path, err);
        if (cJSON_IsString(lit)) return add_step(t, lit->valuestring, 1, path, err);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: pre_tokenizer Split without a Regex or String pattern",
                       path);
    }
    if (!strcmp(ty, "ByteLevel")) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space")))
            return base_err_set(err, COLIBRI_EUNSUPPORTED,
                           "%s: pre_tokenizer ByteLevel with add_prefix_space=true is not supported", path);
        *has_bytelevel = 1;
        const cJSON *ur = cJSON_GetObjectItemCaseSensitive(p, "use_regex");
        if (!ur || cJSON_IsTrue(ur)) return add_step(t, GPT2_PATTERN, 0, path, err);
        return 0;
    }
    return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: pre_tokenizer type '%s' is not supported", path, ty);
}

/* --------------------------------------------------------------- vocab */

static int set_piece_bytes(struct tok *t, int32_t id, const char *s, size_t n, size_t *pos,
                           int *mappable)
{
    long b = tok_bytelevel_to_bytes(s, n, t->pieces + *pos);
    *mappable = b >= 0;
    if (b < 0) {
        memcpy(t->pieces + *pos, s, n);
        b = (long)n;
    }
    t->piece_off[id] = (uint32_t)*pos;
    t->piece_len[id] = (uint32_t)b;
    t->id_flags[id] |= TOK_ID_VALID;
    *pos += (size_t)b;
    return 0;
}

static int token_bytes_id(const struct tok *t, const char *s, char *scratch)
{
    long b = tok_bytelevel_to_bytes(s, strlen(s), scratch);
    if (b < 0) return -1;
    return tok_strmap_get(&t->vocab, scratch, (size_t)b, tok_key_of, t);
}

static int load_merges(struct tok *t, const cJSON *merges, const char *path, struct colibri_err *err)
{
    int n = cJSON_GetArraySize(merges);
    if (tok_pairmap_init(&t->merges, (size_t)n))
        return base_err_set(err, COLIBRI_ENOMEM, "%s: merges table", path);
    char a[1024], b[1024], bytes[2048];
    int rank = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        if (cJSON_IsString(m)) {
            const char *sp = strchr(m->valuestring, ' ');
            size_t la = sp ? (size_t)(sp - m->valuestring) : 0;
            if (!sp || strchr(sp + 1, ' ') || la >= sizeof a || strlen(sp + 1) >= sizeof b)
                return base_err_set(err, COLIBRI_EFORMAT, "%s: model.merges[%d] \"%s\" is not \"a b\"",
                               path, rank, m->valuestring);
            memcpy(a, m->valuestring, la);
            a[la] = 0;
            strcpy(b, sp + 1);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1)) &&
                   strlen(cJSON_GetArrayItem(m, 0)->valuestring) < sizeof a &&
                   strlen(cJSON_GetArrayItem(m, 1)->valuestring) < sizeof b) {
            strcpy(a, cJSON_GetArrayItem(m, 0)->valuestring);
            strcpy(b, cJSON_GetArrayItem(m, 1)->valuestring);
        } else {
            return base_err_set(err, COLIBRI_EFORMAT, "%s: model.merges[%d] is neither \"a b\" nor [\"a\",\"b\"]",
                           path, rank);
        }
        int ia = token_bytes_id(t, a, bytes), ib = token_bytes_id(t, b, bytes);
        long la = tok_bytelevel_to_bytes(a, strlen(a), bytes);
        long lb = la >= 0 ? tok_bytelevel_to_bytes(b, strlen(b), bytes + la) : -1;
        int im = lb >= 0 ? tok_strmap_get(&t->vocab, bytes, (size_t)(la + lb), tok_key_of, t) : -1;
        if (ia < 0 || ib < 0 || im < 0)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: model.merges[%d] (\"%s\", \"%s\"): %s not in the vocab",
                           path, rank, a, b, ia < 0 ? "left part" : ib < 0 ? "right part" : "merged token");
        if (tok_pairmap_put(&t->merges, ia, ib, rank, im))
            return base_err_set(err, COLIBRI_ENOMEM, "%s: merges table", path);
        rank++;
    }
    return 0;
}

static int load_model(struct tok *t, const cJSON *model, const cJSON *added, const char *path,
                      struct colibri_err *err)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsString(type))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: model.type missing", path);
    if (strcmp(type->valuestring, "BPE"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: model type '%s' is not supported (only BPE)",
                       path, type->valuestring);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (cJSON_IsNumber(dropout) && dropout->valuedouble != 0.0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: BPE dropout is not supported", path);
    static const char *const empty_fields[] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (int i = 0; i < 2; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(model, empty_fields[i]);
        if (cJSON_IsString(f) && f->valuestring[0])
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: BPE %s is not supported", path, empty_fields[i]);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: BPE byte_fallback is not supported", path);
    t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));

    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: model.vocab or model.merges missing", path);

    /* Size the id tables: the largest id among vocab and added tokens. */
    int32_t max_id = -1;
    size_t text_bytes = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, vocab) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e8) ||
            v->valuedouble != (double)v->valueint)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: model.vocab[\"%s\"] is not a valid id (an integer in [0, 1e8])",
                           path, v->string);
        if (v->valueint > max_id) max_id = v->valueint;
        text_bytes += strlen(v->string);
    }
    cJSON_ArrayForEach(v, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(v, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!cJSON_IsNumber(id) || !(id->valuedouble >= 0 && id->valuedouble <= 1e8) ||
            id->valuedouble != (double)id->valueint || !cJSON_IsString(content))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: an added_tokens entry lacks content or an integer id in [0, 1e8]",
                           path);
        if (id->valueint > max_id) max_id = id->valueint;
        text_bytes += strlen(content->valuestring);
    }
    t->n_ids = max_id + 1;
    t->id_flags = calloc((size_t)t->n_ids + 1, 1);
    t->piece_off = calloc((size_t)t->n_ids + 1, sizeof *t->piece_off);
    t->piece_len = calloc((size_t)t->n_ids + 1, sizeof *t->piece_len);
    t->pieces = malloc(text_bytes + 1);
    if (!t->id_flags || !t->piece_off || !t->piece_len || !t->pieces ||
        tok_strmap_init(&t->vocab, (size_t)cJSON_GetArraySize(vocab)))
        return base_err_set(err, COLIBRI_ENOMEM, "%s: vocabulary tables", path);

    size_t pos = 0;
    cJSON_ArrayForEach(v, vocab) {
        int32_t id = v->valueint;
        int mappable;
        if (t->id_flags[id] & TOK_ID_VALID)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: model.vocab id %d appears twice", path, id);
        set_piece_bytes(t, id, v->string, strlen(v->string), &pos, &mappable);
        if (!mappable) continue;   /* cannot come out of byte-level BPE */
        int32_t old;
        if (tok_strmap_put(&t->vocab, t->pieces + t->piece_off[id], t->piece_len[id], id, tok_key_of, t, &old))
            return base_err_set(err, COLIBRI_ENOMEM, "%s: vocabulary map", path);
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = tok_strmap_get(&t->vocab, &c, 1, tok_key_of, t);
    }
    t->unk_id = -1;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) {
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(vocab, unk->valuestring);
        if (!cJSON_IsNumber(uid))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: unk_token '%s' is not in the vocab", path, unk->valuestring);
        t->unk_id = uid->valueint;
    }

    /* Added tokens: their decode bytes follow the same ByteLevel rule, since
     * Hugging Face passes them through the decoder too. */
    cJSON_ArrayForEach(v, added) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(v, "content");
        int32_t id = cJSON_GetObjectItemCaseSensitive(v, "id")->valueint;
        if (!(t->id_flags[id] & TOK_ID_VALID)) {
            int mappable;
            set_piece_bytes(t, id, content->valuestring, strlen(content->valuestring), &pos, &mappable);
        }
        t->id_flags[id] |= TOK_ID_ADDED;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "special"))) t->id_flags[id] |= TOK_ID_SPECIAL;
    }
    return load_merges(t, merges, path, err);
}

/* ---------------------------------------------------------- added tokens */

static int cmp_added(const void *pa, const void *pb)
{
    const struct tok_added *a = pa, *b = pb;
    unsigned ca = (unsigned char)a->text[0], cb = (unsigned char)b->text[0];
    if (ca != cb) return ca < cb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int load_added(struct tok *t, const cJSON *added, const char *path, struct colibri_err *err)
{
    int n = cJSON_GetArraySize(added);
    size_t bytes = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, added) bytes += strlen(cJSON_GetObjectItemCaseSensitive(v, "content")->valuestring) + 1;
    t->added_text = malloc(bytes + 1);
    t->added[0].tok = calloc((size_t)n + 1, sizeof(struct tok_added));
    t->added[1].tok = calloc((size_t)n + 1, sizeof(struct tok_added));
    if (!t->added_text || !t->added[0].tok || !t->added[1].tok)
        return base_err_set(err, COLIBRI_ENOMEM, "%s: added tokens", path);
    size_t pos = 0;
    cJSON_ArrayForEach(v, added) {
        const char *content = cJSON_GetObjectItemCaseSensitive(v, "content")->valuestring;
        size_t len = strlen(content);
        if (len == 0) continue;   /* an empty token can never match */
        memcpy(t->added_text + pos, content, len + 1);
        struct tok_added a = {
            .text = t->added_text + pos, .len = (uint32_t)len,
            .id = cJSON_GetObjectItemCaseSensitive(v, "id")->valueint,
            .special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "special")),
            .lstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "lstrip")),
            .rstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "rstrip")),
            .single_word = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "single_word")),
            .normalized = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "normalized")),
        };
        pos += len + 1;
        struct tok_added_set *set = &t->added[a.normalized ? 1 : 0];
        set->tok[set->n++] = a;
    }
    for (int s = 0; s < 2; s++) {
        struct tok_added_set *set = &t->added[s];
        qsort(set->tok, (size_t)set->n, sizeof *set->tok, cmp_added);
        int k = 0;
        for (int b = 0; b <= 256; b++) {
            while (k < set->n && (unsigned char)set->tok[k].text[0] < b) k++;
            set->first[b] = k;
        }
    }
    return 0;
}

/* ------------------------------------------------------ tokenizer_config */

static char *token_text(const cJSON *j)
{
    if (cJSON_IsString(j)) return strdup(j->valuestring);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content");
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    return strdup("");
}

/* A special token's text in a config: a string, or an AddedToken object's
 * content; NULL when it is neither. */
static const char *special_text(const cJSON *v)
{
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "content") : NULL;
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int special_is_named(const char *k)
{
    static const char *const NAMED[] = { "bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                                         "cls_token", "mask_token" };
    for (size_t i = 0; i < sizeof NAMED / sizeof *NAMED; i++) if (!strcmp(k, NAMED[i])) return 1;
    return 0;
}

static int set_special(cJSON *map, const char *k, const char *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(map, k);   /* a later source wins */
    return cJSON_AddStringToObject(map, k, v) != NULL;
}

/* What transformers 5 passes a chat template besides the caller's variables
 * (its special_tokens_map): the seven named tokens, the named ones of
 * extra_special_tokens (when a mapping) and model_specific_special_tokens,
 * and any other key ending in "_token" whose value is a token. legacy is
 * special_tokens_map.json, read (over the config) only when the config has
 * no added_tokens_decoder, as transformers does. 0 on OOM. */
static int load_specials(struct tok *t, const cJSON *cfg, const cJSON *legacy)
{
    if (!(t->specials = cJSON_CreateObject())) return 0;
    const cJSON *srcs[2] = { cfg, cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder") ? NULL : legacy };
    for (int s = 0; s < 2; s++) {
        const cJSON *it;
        cJSON_ArrayForEach(it, srcs[s]) {
            const char *k = it->string;
            size_t n = strlen(k);
            int named = special_is_named(k), maps = !strcmp(k, "extra_special_tokens") ||
                                                    !strcmp(k, "model_specific_special_tokens");
            if (maps && cJSON_IsObject(it)) {
                const cJSON *e;
                cJSON_ArrayForEach(e, it) {
                    const char *v = special_text(e);
                    if (v && !set_special(t->specials, e->string, v)) return 0;
                }
                continue;
            }
            const char *v = special_text(it);
            if (!v || !(named || (n > 6 && !strcmp(k + n - 6, "_token")))) continue;
            if (!set_special(t->specials, k, v)) return 0;
        }
    }
    return 1;
}

static int load_config(struct tok *t, const char *dir, struct colibri_err *err)
{
    char path[4096];
    int rc;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    cJSON *cfg = load_json(path, 0, err, &rc);
    if (rc) return rc;
    t->bos_id = t->eos_id = -1;
    t->bos_text = token_text(cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "bos_token") : NULL);
    t->eos_text = token_text(cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "eos_token") : NULL);
    if (!t->bos_text || !t->eos_text) { cJSON_Delete(cfg); return base_err_set(err, COLIBRI_ENOMEM, "%s", path); }
    if (t->bos_text[0]) t->bos_id = tok_token_id(t, t->bos_text, strlen(t->bos_text));
    if (t->eos_text[0]) t->eos_id = tok_token_id(t, t->eos_text, strlen(t->eos_text));
    /* LlamaTokenizer(Fast) defaults add_bos_token to true; other classes to false. */
    const cJSON *cls = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class") : NULL;
    int llama = cJSON_IsString(cls) && strstr(cls->valuestring, "Llama") != NULL;
    const cJSON *ab = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token") : NULL;
    const cJSON *ae = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token") : NULL;
    t->add_bos = ab ? cJSON_IsTrue(ab) : llama;
    t->add_eos = cJSON_IsTrue(ae);
    if ((t->add_bos && t->bos_id < 0) || (t->add_eos && t->eos_id < 0)) {
        cJSON_Delete(cfg);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: add_%s_token is set but the token '%s' is not in the vocab",
                       path, t->add_bos && t->bos_id < 0 ? "bos" : "eos",
                       t->add_bos && t->bos_id < 0 ? t->bos_text : t->eos_text);
    }
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    cJSON *legacy = load_json(path, 0, err, &rc);
    if (rc) { cJSON_Delete(cfg); return rc; }
    int ok = load_specials(t, cfg, legacy);
    cJSON_Delete(legacy);
    if (!ok) { cJSON_Delete(cfg); return base_err_set(err, COLIBRI_ENOMEM, "%s", path); }
    const cJSON *tpl = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
    if (cJSON_IsString(tpl)) {
        t->chat_template = strdup(tpl->valuestring);
        t->chat_template_from = "tokenizer_config.json";
    } else if (cJSON_IsArray(tpl)) {   /* [{name, template}]: take "default" */
        const cJSON *it;
        cJSON_ArrayForEach(it, tpl) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
            const cJSON *body = cJSON_GetObjectItemCaseSensitive(it, "template");
            if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(body)) {
                t->chat_template = strdup(body->valuestring);
                t->chat_template_from = "tokenizer_config.json";
            }
        }
    }
    cJSON_Delete(cfg);
    if (!t->chat_template) {   /* transformers >= 4.43 may save it beside the config */
        size_t len;
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        t->chat_template = base_read_file_all(path, &len);
        if (t->chat_template) t->chat_template_from = "chat_template.jinja";
    }

    if (t->eos_id >= 0) t->id_flags[t->eos_id] |= TOK_ID_EOG;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    cJSON *gen = load_json(path, 0, err, &rc);
    if (rc) return rc;
    const cJSON *geos = gen ? cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id") : NULL;
    if (cJSON_IsNumber(geos) && geos->valueint >= 0 && geos->valueint < t->n_ids)
        t->id_flags[geos->valueint] |= TOK_ID_EOG;
    const cJSON *it;
    if (cJSON_IsArray(geos))
        cJSON_ArrayForEach(it, geos)
            if (cJSON_IsNumber(it) && it->valueint >= 0 && it->valueint < t->n_ids)
                t->id_flags[it->valueint] |= TOK_ID_EOG;
    cJSON_Delete(gen);
    return 0;
}

/* ------------------------------------------------------------------ load */

static int check_component(const cJSON *root, const char *field, const char *const *ok, int n_ok,
                           const char *path, struct colibri_err *err)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, field);
    if (is_null_or_missing(c)) return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
    const char *ty = cJSON_IsString(type) ? type->valuestring : "?";
    if (!strcmp(field, "normalizer") && !strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(c, "normalizers");
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) == 0) return 0;
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: normalizer Sequence with steps is not supported", path);
    }
    for (int i = 0; i < n_ok; i++)
        if (!strcmp(ty, ok[i])) return 0;
    return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s type '%s' is not supported", path, field, ty);
}

static int load_tiktoken(const char *dir, struct tok **out, struct colibri_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    struct tok *t = calloc(1, sizeof *t);
    if (!t) return base_err_set(err, COLIBRI_ENOMEM, "%s", path);
    cJSON *added = NULL;
    int rc = tok_tiktoken_load(dir, t, &added, err);
    if (!rc) rc = add_step(t, tok_tiktoken_pattern(), 0, path, err);
    if (!rc) rc = load_added(t, added, path, err);
    cJSON_Delete(added);
    if (!rc) rc = load_config(t, dir, err);
    if (rc) { tok_free(t); return rc; }
    *out = t;
    return 0;
}

int tok_load(const char *dir, struct tok **out, struct colibri_err *err)
{
    char path[4096];
    int rc;
    snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    FILE *tk = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *tj = tk ? fopen(path, "rb") : NULL;
    if (tk) fclose(tk);
    if (tj) fclose(tj);
    if (tk && !tj) return load_tiktoken(dir, out, err);   /* Kimi K2 ships a tiktoken BPE, not a tokenizer.json */
    cJSON *root = load_json(path, 1, err, &rc);
    if (!root) return rc;
    struct tok *t = calloc(1, sizeof *t);
    if (!t) { cJSON_Delete(root); return base_err_set(err, COLIBRI_ENOMEM, "%s", path); }

    static const char *const ok_bytelevel[] = { "ByteLevel" };
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    int has_bytelevel = 0;
    if (!cJSON_IsObject(model)) rc = base_err_set(err, COLIBRI_EFORMAT, "%s: no model", path);
    if (!rc && added && !cJSON_IsArray(added))
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: added_tokens is not a list", path);
    if (!rc) rc = check_component(root, "normalizer", NULL, 0, path, err);
    if (!rc) rc = check_component(root, "post_processor", ok_bytelevel, 1, path, err);
    if (!rc) rc = check_component(root, "decoder", ok_bytelevel, 1, path, err);
    if (!rc && is_null_or_missing(pre))
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: no pre_tokenizer (a byte-level BPE needs ByteLevel)", path);
    if (!rc) rc = parse_pretok(t, pre, path, &has_bytelevel, err);
    if (!rc && !has_bytelevel)
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: pre_tokenizer has no ByteLevel step (not a byte-level BPE)",
                     path);
    if (!rc) rc = load_model(t, model, added, path, err);
    if (!rc) rc = load_added(t, added, path, err);
    cJSON_Delete(root);
    if (!rc) rc = load_config(t, dir, err);
    if (rc) { tok_free(t); return rc; }
    *out = t;
    return 0;
}
