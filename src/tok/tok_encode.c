/* tok/tok_encode.c - text to ids: added tokens split out first, then the
 * pre-tokenizer Splits, then byte-level BPE per piece with a per-call word
 * cache. Mirrors Hugging Face tokenizers' AddedVocabulary, Split(Isolated)
 * and BPE::merge_word (contract in tok.h). */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/tok_internal.h"
#include "tok/tok_utf8.h"

int tok_ids_push(struct tok_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t ncap = v->cap ? 2 * v->cap : 256;
        int32_t *p = realloc(v->ids, ncap * sizeof *p);
        if (!p) return COLIBRI_ENOMEM;
        v->ids = p;
        v->cap = ncap;
    }
    v->ids[v->n++] = id;
    return 0;
}

int32_t tok_n_vocab(const struct tok *t) { return t->n_ids; }
int32_t tok_bos(const struct tok *t) { return t->bos_id; }
int32_t tok_eos(const struct tok *t) { return t->eos_id; }
const char *tok_bos_text(const struct tok *t) { return t->bos_text; }
const char *tok_eos_text(const struct tok *t) { return t->eos_text; }
const char *tok_chat_template(const struct tok *t) { return t->chat_template; }
const struct cJSON *tok_special_tokens(const struct tok *t) { return t->specials; }
const char *tok_chat_template_from(const struct tok *t) { return t->chat_template_from; }

int tok_is_eog(const struct tok *t, int32_t id)
{
    return id >= 0 && id < t->n_ids && (t->id_flags[id] & TOK_ID_EOG);
}

int tok_is_special(const struct tok *t, int32_t id)
{
    return id >= 0 && id < t->n_ids && (t->id_flags[id] & TOK_ID_SPECIAL);
}

const char *tok_piece(const struct tok *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_ids || !(t->id_flags[id] & TOK_ID_VALID)) return NULL;
    *len = t->piece_len[id];
    return t->pieces + t->piece_off[id];
}

/* ------------------------------------------------------------------ BPE */

struct bpe_sym { int32_t id; int32_t prev, next; uint32_t len; };
struct bpe_merge { int32_t rank, pos, merged; };

/* Scratch for one encode call. */
struct enc {
    const struct tok *t;
    struct tok_ids *out;
    struct tok_wordcache cache;
    pcre2_match_data *md;
    struct bpe_sym *sym; size_t sym_cap;
    struct bpe_merge *heap; size_t heap_cap, heap_n;
    struct tok_ids word;        /* ids of the current word */
};

static int heap_less(const struct bpe_merge *a, const struct bpe_merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(struct enc *e, struct bpe_merge m)
{
    if (e->heap_n == e->heap_cap) {
        size_t ncap = e->heap_cap ? 2 * e->heap_cap : 64;
        struct bpe_merge *p = realloc(e->heap, ncap * sizeof *p);
        if (!p) return COLIBRI_ENOMEM;
        e->heap = p;
        e->heap_cap = ncap;
    }
    size_t i = e->heap_n++;
    e->heap[i] = m;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(&e->heap[i], &e->heap[parent])) break;
        struct bpe_merge tmp = e->heap[i]; e->heap[i] = e->heap[parent]; e->heap[parent] = tmp;
        i = parent;
    }
    return 0;
}

static struct bpe_merge heap_pop(struct enc *e)
{
    struct bpe_merge top = e->heap[0];
    e->heap[0] = e->heap[--e->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->heap_n && heap_less(&e->heap[l], &e->heap[m])) m = l;
        if (r < e->heap_n && heap_less(&e->heap[r], &e->heap[m])) m = r;
        if (m == i) break;
        struct bpe_merge tmp = e->heap[i]; e->heap[i] = e->heap[m]; e->heap[m] = tmp;
        i = m;
    }
    return top;
}

static int push_pair(struct enc *e, int32_t pos)
{
    int32_t next = e->sym[pos].next, merged;
    if (next < 0) return 0;
    int32_t rank = tok_pairmap_get(&e->t->merges, e->sym[pos].id, e->sym[next].id, &merged);
    if (rank < 0) return 0;
    return heap_push(e, (struct bpe_merge){ .rank = rank, .pos = pos, .merged = merged });
}

/* BPE of one pre-tokenized piece into e->word, following merge_word(): start
 * from single bytes, repeatedly apply the lowest-rank merge (leftmost on
 * ties), skipping stale queue entries. */
static int bpe_word(struct enc *e, const char *w, size_t n)
{
    const struct tok *t = e->t;
    e->word.n = 0;
    if (t->ignore_merges) {
        int32_t id = tok_strmap_get(&t->vocab, w, n, tok_key_of, t);
        if (id >= 0) return tok_ids_push(&e->word, id);
    }
    if (n > e->sym_cap) {
        size_t ncap = n < 64 ? 64 : 2 * n;
        struct bpe_sym *p = realloc(e->sym, ncap * sizeof *p);
        if (!p) return COLIBRI_ENOMEM;
        e->sym = p;
        e->sym_cap = ncap;
    }
    /* Initial symbols: one per byte (each byte-level character); a byte with
     * no token becomes unk, or is dropped when there is no unk, as in HF. */
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)w[i]];
        if (id < 0) id = t->unk_id;
        if (id < 0) continue;
        e->sym[ns] = (struct bpe_sym){ .id = id, .prev = ns - 1, .next = -1, .len = 1 };
        if (ns > 0) e->sym[ns - 1].next = ns;
        ns++;
    }
    e->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (push_pair(e, i)) return COLIBRI_ENOMEM;
    while (e->heap_n) {
        struct bpe_merge m = heap_pop(e);
        struct bpe_sym *s = &e->sym[m.pos];
        if (s->len == 0 || s->next < 0) continue;
        struct bpe_sym *r = &e->sym[s->next];
        int32_t merged;
        if (tok_pairmap_get(&t->merges, s->id, r->id, &merged) < 0 || merged != m.merged) continue;
        s->id = merged;
        s->len += r->len;
        r->len = 0;
        s->next = r->next;
        if (s->next >= 0) e->sym[s->next].prev = m.pos;
        if (s->prev >= 0 && push_pair(e, s->prev)) return COLIBRI_ENOMEM;
        if (push_pair(e, m.pos)) return COLIBRI_ENOMEM;
    }
    for (int32_t i = 0; i >= 0 && i < ns; i = e->sym[i].next)
        if (tok_ids_push(&e->word, e->sym[i].id)) return COLIBRI_ENOMEM;
    return 0;
}

static int emit_word(struct enc *e, const char *w, size_t n)
{
    const int32_t *ids;
    int k = tok_wordcache_get(&e->cache, w, n, &ids);
    if (k < 0) {
        int rc = bpe_word(e, w, n);
        if (rc) return rc;
        if (tok_wordcache_put(&e->cache, w, n, e->word.ids, e->word.n)) return COLIBRI_ENOMEM;
        ids = e->word.ids;
        k = (int)e->word.n;
    }
    for (int i = 0; i < k; i++)
        if (tok_ids_push(e->out, ids[i])) return COLIBRI_ENOMEM;
    return 0;
}

/* Split(Isolated) step `step` on s[0..n): every match and every gap becomes a
 * piece for the next step; the regex sees the piece alone, as in HF. */
static int pretok(struct enc *e, int step, const char *s, size_t n)
{
    if (n == 0) return 0;
    if (step == e->t->n_steps) return emit_word(e, s, n);
    pcre2_code *re = e->t->steps[step];
    size_t pos = 0, gap = 0;
    while (pos <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return COLIBRI_EINVAL;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {   /* empty match: no piece; step over one character */
            if (ms >= n) break;
            size_t bad, v = tok_utf8_valid_len((const unsigned char *)s + ms, n - ms, &bad);
            pos = ms + (v ? v : 1);
            continue;
        }
        if (ms > gap && (rc = pretok(e, step + 1, s + gap, ms - gap))) return rc;
        if ((rc = pretok(e, step + 1, s + ms, me - ms))) return rc;
        gap = pos = me;
    }
    return pretok(e, step + 1, s + gap, n - gap);
}

/* ---------------------------------------------------------- added tokens */

static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_word_byte(unsigned char c)
{
    return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* Finds the leftmost-longest added token of `set` in s[from..n), widened by
 * lstrip/rstrip; returns its index or -1. *ms and *me get the span. */
static int find_added(const struct tok_added_set *set, const char *s, size_t from, size_t n,
                      size_t *ms, size_t *me)
{
    for (size_t i = from; i < n; i++) {
        unsigned b = (unsigned char)s[i];
        for (int k = set->first[b]; k < set->first[b + 1]; k++) {
            const struct tok_added *a = &set->tok[k];
            if (a->len > n - i || memcmp(s + i, a->text, a->len)) continue;
            size_t st = i, en = i + a->len;
            if (a->single_word && ((st > 0 && is_word_byte((unsigned char)s[st - 1])) ||
                                   (en < n && is_word_byte((unsigned char)s[en])))) {
                /* HF skips this match and resumes after it */
                i = en - 1;
                break;
            }
            if (a->lstrip) while (st > from && is_ws((unsigned char)s[st - 1])) st--;
            if (a->rstrip) while (en < n && is_ws((unsigned char)s[en])) en++;
            *ms = st;
            *me = en;
            return k;
        }
    }
    return -1;
}

/* Pass 2: tokens with normalized=true inside the gaps left by pass 1. */
static int split_normalized(struct enc *e, const char *s, size_t n, int parse)
{
    const struct tok_added_set *set = &e->t->added[1];
    size_t pos = 0, ms, me;
    int k, rc;
    while (parse && pos < n && (k = find_added(set, s, pos, n, &ms, &me)) >= 0) {
        if ((rc = pretok(e, 0, s + pos, ms - pos))) return rc;
        if (tok_ids_push(e->out, set->tok[k].id)) return COLIBRI_ENOMEM;
        pos = me;
    }
    return pretok(e, 0, s + pos, n - pos);
}

static int encode_text(struct enc *e, const char *s, size_t n, int parse)
{
    const struct tok_added_set *set = &e->t->added[0];
    size_t pos = 0, ms, me;
    int k, rc;
    while (parse && pos < n && (k = find_added(set, s, pos, n, &ms, &me)) >= 0) {
        if ((rc = split_normalized(e, s + pos, ms - pos, parse))) return rc;
        if (tok_ids_push(e->out, set->tok[k].id)) return COLIBRI_ENOMEM;
        pos = me;
    }
    return split_normalized(e, s + pos, n - pos, parse);
}

int tok_encode(const struct tok *t, const char *text, size_t len, unsigned flags,
               struct tok_ids *out, size_t *n_replaced, struct colibri_err *err)
{
    size_t bad = tok_utf8_count_invalid(text, len);
    if (n_replaced) *n_replaced = bad;
    char *clean = NULL;
    if (bad) {
        clean = tok_utf8_sanitize(text, len, &len);
        if (!clean) return base_err_set(err, COLIBRI_ENOMEM, "tokenizer: %zu bytes of text", len);
        text = clean;
    }
    struct enc e = { .t = t, .out = out };
    int rc = 0;
    if (tok_wordcache_init(&e.cache, 1 << 15)) rc = COLIBRI_ENOMEM;
    if (!rc && t->n_steps && !(e.md = pcre2_match_data_create(16, NULL))) rc = COLIBRI_ENOMEM;
    if (!rc && (flags & TOK_ADD_SPECIAL) && t->add_bos) rc = tok_ids_push(out, t->bos_id);
    if (!rc) rc = encode_text(&e, text, len, !(flags & TOK_NO_PARSE_SPECIAL));
    if (!rc && (flags & TOK_ADD_SPECIAL) && t->add_eos) rc = tok_ids_push(out, t->eos_id);
    tok_wordcache_free(&e.cache);
    pcre2_match_data_free(e.md);
    free(e.sym);
    free(e.heap);
    free(e.word.ids);
    free(clean);
    if (rc == COLIBRI_ENOMEM) return base_err_set(err, rc, "tokenizer: out of memory encoding %zu bytes", len);
    if (rc) return base_err_set(err, rc, "tokenizer: pre-tokenizer regex failed (PCRE2 error)");
    return 0;
}
