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

/* A byte trie of the pieces, read forwards or backwards: node 0 is the
 * empty string, a node's child by byte b is found in an open-addressing
 * table keyed by (node, b), and term[node] is the rank whose piece ends
 * there (-1: none). One walk along a piece finds every prefix (or suffix) of
 * it that is itself a piece, so the splits of all pieces take time linear in
 * the file; looking each split up by hash took time square in the longest
 * piece (a 1.28 MB piece: 43 s). Pieces are added only to the depth a proper
 * prefix can have (the second-longest piece's length): the one piece longer
 * than that is no other's prefix, so a single huge piece costs no nodes. */
struct trie_slot { uint64_t key; int32_t child; };   /* child 0: empty slot */
struct trie {
    struct trie_slot *slot;
    size_t cap;                 /* a power of two, at least twice the nodes */
    int32_t n_nodes;
    int32_t *term;              /* [nodes]: the rank ending at the node, or -1 */
};

static size_t trie_at(const struct trie *tr, uint64_t key)
{
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (tr->cap - 1);
    while (tr->slot[j].child && tr->slot[j].key != key) j = (j + 1) & (tr->cap - 1);
    return j;
}

/* Doubles the table (at half load: probes stay short). */
static int trie_grow(struct trie *tr)
{
    struct trie old = *tr;
    tr->cap *= 2;
    if (!(tr->slot = calloc(tr->cap, sizeof *tr->slot))) { tr->slot = old.slot; tr->cap = old.cap; return COLIBRI_ENOMEM; }
    for (size_t i = 0; i < old.cap; i++)
        if (old.slot[i].child) tr->slot[trie_at(tr, old.slot[i].key)] = old.slot[i];
    free(old.slot);
    return 0;
}

/* The pieces of ranks 0..n-1, forwards or reversed, each to at most `depth`
 * bytes (a longer piece gets no term); `bytes` is their total length, which
 * bounds the nodes. 0 or COLIBRI_ENOMEM. */
static int trie_build(struct trie *tr, const struct tok *t, int32_t n, size_t bytes, uint32_t depth, int reversed)
{
    tr->cap = 16;
    while (tr->cap < 2 * ((size_t)n + 1)) tr->cap *= 2;   /* a vocabulary's pieces share most prefixes */
    tr->slot = calloc(tr->cap, sizeof *tr->slot);
    tr->term = malloc((bytes + 1) * sizeof *tr->term);
    tr->n_nodes = 1;
    if (!tr->slot || !tr->term) return COLIBRI_ENOMEM;
    tr->term[0] = -1;
    for (int32_t id = 0; id < n; id++) {
        const unsigned char *s = (const unsigned char *)t->pieces + t->piece_off[id];
        uint32_t len = t->piece_len[id], m = len < depth ? len : depth;
        int32_t node = 0;
        for (uint32_t i = 0; i < m; i++) {
            uint64_t key = (uint64_t)node << 8 | s[reversed ? len - 1 - i : i];
            size_t j = trie_at(tr, key);
            if (!tr->slot[j].child) {
                if (2 * ((size_t)tr->n_nodes + 1) > tr->cap) {
                    if (trie_grow(tr)) return COLIBRI_ENOMEM;
                    j = trie_at(tr, key);
                }
                tr->slot[j] = (struct trie_slot){ key, tr->n_nodes };
                tr->term[tr->n_nodes++] = -1;
            }
            node = tr->slot[j].child;
        }
        if (len <= depth) tr->term[node] = id;
    }
    return 0;
}

/* The child of node by b, or 0 when no piece goes on that way. */
static int32_t trie_step(const struct trie *tr, int32_t node, unsigned char b)
{
    return tr->slot[trie_at(tr, (uint64_t)node << 8 | b)].child;
}

static void trie_free(struct trie *tr)
{
    free(tr->slot);
    free(tr->term);
    memset(tr, 0, sizeof *tr);
}

/* Walks rank c's piece backwards through the reversed trie: for each cut
 * whose prefix (prefix[off + cut]) and suffix are both pieces, counts the
 * split, or adds it to the merges as (a, b) -> c ranked c. */
static int put_splits(struct tok *t, const struct trie *rev, const int32_t *prefix, int32_t c, size_t *count)
{
    const unsigned char *s = (const unsigned char *)t->pieces + t->piece_off[c];
    const int32_t *pre = prefix + t->piece_off[c];
    int32_t node = 0;
    for (uint32_t cut = t->piece_len[c] - 1; cut >= 1; cut--) {
        if (!(node = trie_step(rev, node, s[cut]))) break;
        int32_t b = rev->term[node];
        if (pre[cut] < 0 || b < 0) continue;
        if (count) ++*count;
        else if (tok_pairmap_put(&t->merges, pre[cut], b, c, c)) return COLIBRI_ENOMEM;
    }
    return 0;
}

/* The merges: every split of rank c's piece into the pieces of ranks a and
 * b, as (a, b) -> c ranked c. prefix[off + k] holds the rank of the first k
 * bytes of the piece at off (the forward walk); the backward walk matches
 * them with the suffixes. `bytes`: the pieces' total length. */
static int add_split_merges(struct tok *t, int32_t n, size_t bytes)
{
    uint32_t max1 = 0, max2 = 0;   /* the two longest lengths (equal when shared) */
    for (int32_t id = 0; id < n; id++) {
        uint32_t len = t->piece_len[id];
        if (len > max1) { max2 = max1; max1 = len; }
        else if (len > max2) max2 = len;
    }
    struct trie tr = { 0 };
    int32_t *prefix = malloc((bytes + 1) * sizeof *prefix);
    int rc = prefix ? trie_build(&tr, t, n, bytes, max2, 0) : COLIBRI_ENOMEM;
    for (int32_t id = 0; !rc && id < n; id++) {
        const unsigned char *s = (const unsigned char *)t->pieces + t->piece_off[id];
        int32_t node = 0, *pre = prefix + t->piece_off[id];
        for (uint32_t k = 1; k < t->piece_len[id]; k++)
            pre[k] = node >= 0 && (node = trie_step(&tr, node, s[k - 1])) ? tr.term[node] : (node = -1);
    }
    trie_free(&tr);
    if (!rc) rc = trie_build(&tr, t, n, bytes, max2, 1);
    size_t n_merges = 0;
    for (int32_t id = 0; !rc && id < n; id++) rc = put_splits(t, &tr, prefix, id, &n_merges);
    if (!rc) rc = tok_pairmap_init(&t->merges, n_merges);
    for (int32_t id = 0; !rc && id < n; id++) rc = put_splits(t, &tr, prefix, id, NULL);
    trie_free(&tr);
    free(prefix);
    return rc;
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
    if (add_split_merges(t, n_base, pos))
        return base_err_set(err, COLIBRI_ENOMEM, "%s: merges", path);
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
