/* tok/tok_tiktoken.c - a tiktoken BPE (tiktoken.model, as Kimi K2 ships it)
 * read into a struct tok, so encoding and decoding run the same code as a
 * tokenizer.json BPE (contract in tok.h).
 *
 * tiktoken.model: one line per token, "<base64 of its bytes> <rank>", ranks
 * 0..n-1 each once; the id of a token is its rank. tiktoken encodes a piece
 * by merging, again and again, the adjacent pair whose concatenation has the
 * lowest rank (the leftmost on ties), after checking whether the whole piece
 * is a token. That is a byte-level BPE whose merges are every split (a, b) of
 * every token c into two tokens, each ranked rank(c), with ignore_merges set:
 * the encoder's lowest-rank-leftmost queue then makes the same choices.
 *
 * The rest follows Kimi K2's tokenization_kimi.py: its pre-tokenizer pattern
 * (written for PCRE2: `[X&&[^\p{Han}]]` as `(?:(?!\p{Han})[X])`), and 256 + 2
 * special ids after the ranks, named by tokenizer_config.json's
 * added_tokens_decoder or "<|reserved_token_ID|>". Not followed: its split of
 * runs longer than 25,000 whitespace or non-whitespace characters. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tok/tok_internal.h"

#define N_SPECIAL (256 + 2)

/* Kimi K2's pat_str, one alternative per line there. */
static const char KIMI_PATTERN[] =
    "[\\p{Han}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*"
    "(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+"
    "(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

const char *tok_tiktoken_pattern(void) { return KIMI_PATTERN; }

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes s[0..n) into out (room for 3n/4 bytes); its length, or -1. */
static long b64_decode(const char *s, size_t n, char *out)
{
    if (n == 0 || n % 4) return -1;
    long k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            if (c == '=' && i + 4 == n && j >= 2) { v[j] = 0; pad++; continue; }
            if (pad || (v[j] = b64_value(c)) < 0) return -1;
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[k++] = (char)(x >> 16);
        if (pad < 2) out[k++] = (char)(x >> 8);
        if (pad < 1) out[k++] = (char)x;
    }
    return k;
}

/* The ranks file into t's ids, pieces, vocabulary and merges. */
static int load_ranks(struct tok *t, const char *path, char *data, size_t len, struct colibri_err *err)
{
    size_t n_lines = 0;
    for (size_t i = 0; i < len; i++) n_lines += data[i] == '\n';
    if (len && data[len - 1] != '\n') n_lines++;
    if (n_lines == 0) return base_err_set(err, COLIBRI_EFORMAT, "%s: no tokens", path);
    if (n_lines > 10000000) return base_err_set(err, COLIBRI_EFORMAT, "%s: %zu lines, too many tokens", path, n_lines);
    int32_t n_base = (int32_t)n_lines;
    t->n_ids = n_base + N_SPECIAL;
    t->id_flags = calloc((size_t)t->n_ids + 1, 1);
    t->piece_off = calloc((size_t)t->n_ids + 1, sizeof *t->piece_off);
    t->piece_len = calloc((size_t)t->n_ids + 1, sizeof *t->piece_len);
    t->pieces = malloc(len + 1);
    if (!t->id_flags || !t->piece_off || !t->piece_len || !t->pieces || tok_strmap_init(&t->vocab, (size_t)n_base))
        return base_err_set(err, COLIBRI_ENOMEM, "%s: vocabulary tables", path);
    size_t pos = 0, line = 0;
    for (char *p = data, *end = data + len; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        char *sp = memchr(p, ' ', (size_t)(eol - p));
        char *rank_end = NULL;
        long rank = sp ? strtol(sp + 1, &rank_end, 10) : -1;
        long b = sp ? b64_decode(p, (size_t)(sp - p), t->pieces + pos) : -1;
        if (b <= 0 || rank_end != eol || rank < 0 || rank >= n_base)
            return base_err_set(err, COLIBRI_EFORMAT, "%s:%zu: expected '<base64 bytes> <rank below %d>'", path,
                                line + 1, n_base);
        if (t->id_flags[rank] & TOK_ID_VALID)
            return base_err_set(err, COLIBRI_EFORMAT, "%s:%zu: rank %ld appears twice", path, line + 1, rank);
        t->piece_off[rank] = (uint32_t)pos;
        t->piece_len[rank] = (uint32_t)b;
        t->id_flags[rank] |= TOK_ID_VALID;
        int32_t old = -1;
        if (tok_strmap_put(&t->vocab, t->pieces + pos, (size_t)b, (int32_t)rank, tok_key_of, t, &old))
            return base_err_set(err, COLIBRI_ENOMEM, "%s: vocabulary map", path);
        if (old >= 0)
            return base_err_set(err, COLIBRI_EFORMAT, "%s:%zu: the bytes of rank %ld are also rank %d", path, line + 1,
                                rank, old);
        pos += (size_t)b;
        p = nl ? nl + 1 : end;
    }
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        t->byte_id[c] = tok_strmap_get(&t->vocab, &ch, 1, tok_key_of, t);
        /* Every text must encode: a byte without a rank would be dropped from it. */
        if (t->byte_id[c] < 0)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: no rank for the single byte 0x%02x; a byte-level vocabulary "
                                "needs all 256", path, c);
    }
    t->unk_id = -1;
    t->ignore_merges = 1;
    size_t n_merges = 0;
    for (int32_t id = 0; id < n_base; id++) n_merges += t->piece_len[id] - 1;
    if (tok_pairmap_init(&t->merges, n_merges)) return base_err_set(err, COLIBRI_ENOMEM, "%s: merges", path);
    for (int32_t id = 0; id < n_base; id++) {
        const char *s = t->pieces + t->piece_off[id];
        for (uint32_t cut = 1; cut < t->piece_len[id]; cut++) {
            int32_t a = tok_strmap_get(&t->vocab, s, cut, tok_key_of, t);
            int32_t b = a < 0 ? -1 : tok_strmap_get(&t->vocab, s + cut, t->piece_len[id] - cut, tok_key_of, t);
            if (b >= 0 && tok_pairmap_put(&t->merges, a, b, id, id))
                return base_err_set(err, COLIBRI_ENOMEM, "%s: merges", path);
        }
    }
    return 0;
}

int tok_tiktoken_load(const char *dir, struct tok *t, cJSON **added, struct colibri_err *err)
{
    char path[4096];
    *added = NULL;
    snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    size_t len = 0;
    char *data = base_read_file_all(path, &len);
    if (!data) return base_err_set(err, COLIBRI_EIO, "%s: cannot read", path);
    int rc = load_ranks(t, path, data, len, err);
    free(data);
    if (rc) return rc;
    int32_t n_base = t->n_ids - N_SPECIAL;

    /* the special ids: named by the config, or reserved */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *cfg_text = base_read_file_all(path, &len);
    cJSON *cfg = cfg_text ? cJSON_ParseWithLength(cfg_text, len) : NULL;
    free(cfg_text);
    const cJSON *dec = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder") : NULL;
    if (dec && !cJSON_IsObject(dec)) {
        cJSON_Delete(cfg);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: added_tokens_decoder is not an object", path);
    }
    cJSON *arr = cJSON_CreateArray();
    size_t names = 0;
    for (int32_t id = n_base; arr && id < t->n_ids; id++) {
        char key[16], dflt[48];
        snprintf(key, sizeof key, "%d", id);
        snprintf(dflt, sizeof dflt, "<|reserved_token_%d|>", id);
        const cJSON *d = dec ? cJSON_GetObjectItemCaseSensitive(dec, key) : NULL;
        const cJSON *content = d ? cJSON_GetObjectItemCaseSensitive(d, "content") : NULL;
        if (d && !cJSON_IsString(content)) {
            cJSON_Delete(arr);
            cJSON_Delete(cfg);
            return base_err_set(err, COLIBRI_EFORMAT, "%s: added_tokens_decoder[\"%s\"] has no content", path, key);
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "id", id);
        cJSON_AddStringToObject(o, "content", content ? content->valuestring : dflt);
        static const char *const FLAGS[] = { "lstrip", "rstrip", "single_word", "normalized" };
        for (int f = 0; f < 4; f++) {
            const cJSON *v = d ? cJSON_GetObjectItemCaseSensitive(d, FLAGS[f]) : NULL;
            cJSON_AddBoolToObject(o, FLAGS[f], cJSON_IsTrue(v));
        }
        cJSON_AddBoolToObject(o, "special", 1);
        names += strlen(content ? content->valuestring : dflt);
    }
    if (dec) {   /* ids outside the special range would be silently dropped: refuse them */
        const cJSON *d;
        cJSON_ArrayForEach(d, dec) {
            long id = strtol(d->string, NULL, 10);
            if (id < n_base || id >= t->n_ids) {
                rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: added token id %s is outside the special ids "
                                  "[%d, %d) of tiktoken.model", path, d->string, n_base, t->n_ids);
                break;
            }
        }
    }
    cJSON_Delete(cfg);
    if (rc) { cJSON_Delete(arr); return rc; }
    size_t pos = 0;
    for (int32_t id = 0; id < n_base; id++)
        if (t->piece_off[id] + t->piece_len[id] > pos) pos = t->piece_off[id] + t->piece_len[id];
    /* the vocabulary map finds its keys through t->pieces, so it may move */
    char *np = arr ? realloc(t->pieces, pos + names + 1) : NULL;
    if (!np) { cJSON_Delete(arr); return base_err_set(err, COLIBRI_ENOMEM, "%s: special tokens", path); }
    t->pieces = np;
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        int32_t id = cJSON_GetObjectItemCaseSensitive(o, "id")->valueint;
        const char *s = cJSON_GetObjectItemCaseSensitive(o, "content")->valuestring;
        size_t n = strlen(s);
        memcpy(t->pieces + pos, s, n);
        t->piece_off[id] = (uint32_t)pos;
        t->piece_len[id] = (uint32_t)n;
        t->id_flags[id] |= TOK_ID_VALID | TOK_ID_ADDED | TOK_ID_SPECIAL;
        pos += n;
    }
    *added = arr;
    return 0;
}
