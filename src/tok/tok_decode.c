/* tok/tok_decode.c - ids back to bytes, whole or streamed one id at a time
 * without ever splitting a UTF-8 character (contract in tok.h). */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/tok_internal.h"
#include "tok/tok_utf8.h"

int tok_decode(const struct tok *t, const int32_t *ids, size_t n, int skip_special,
               char **out, size_t *out_len, struct colibri_err *err)
{
    size_t total = 0, len;
    for (size_t i = 0; i < n; i++) {
        if (!tok_piece(t, ids[i], &len))
            return base_err_set(err, COLIBRI_ERANGE, "decode: id %d at position %zu is not in the vocabulary (0..%d)",
                           ids[i], i, t->n_ids - 1);
        total += len;
    }
    char *buf = malloc(total + 1);
    if (!buf) return base_err_set(err, COLIBRI_ENOMEM, "decode: %zu bytes", total);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (skip_special && tok_is_special(t, ids[i])) continue;
        const char *p = tok_piece(t, ids[i], &len);
        memcpy(buf + o, p, len);
        o += len;
    }
    buf[o] = 0;
    *out = buf;
    *out_len = o;
    return 0;
}

void tok_stream_init(struct tok_stream *s, const struct tok *t, int skip_special)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->skip_special = skip_special;
}

void tok_stream_free(struct tok_stream *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

/* How many bytes at the end of b[0..n) form the start of a character that
 * may still complete (0..3). Everything before them can be emitted. */
static size_t incomplete_tail(const unsigned char *b, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t i = n - k;
        if ((b[i] & 0xC0) == 0x80) continue;   /* continuation byte: look further back */
        if (b[i] < 0xC2 || b[i] > 0xF4) return 0;
        size_t bad, v = tok_utf8_valid_len(b + i, k, &bad);
        /* still incomplete and nothing invalid so far: keep it back */
        if (v == 0 && bad == k) return k;
        return 0;
    }
    return 0;
}

int tok_stream_push(struct tok_stream *s, int32_t id, const char **text, size_t *len,
                    struct colibri_err *err)
{
    size_t plen;
    const char *p = tok_piece(s->t, id, &plen);
    if (!p) return base_err_set(err, COLIBRI_ERANGE, "decode: id %d is not in the vocabulary (0..%d)", id,
                           s->t->n_ids - 1);
    if (s->skip_special && tok_is_special(s->t, id)) plen = 0;
    size_t need = (size_t)s->n_pend + plen + 1;
    if (need > s->cap) {
        size_t ncap = need < 256 ? 256 : 2 * need;
        char *nb = realloc(s->buf, ncap);
        if (!nb) return base_err_set(err, COLIBRI_ENOMEM, "decode stream");
        s->buf = nb;
        s->cap = ncap;
    }
    memcpy(s->buf, s->pend, (size_t)s->n_pend);
    memcpy(s->buf + s->n_pend, p, plen);
    size_t n = (size_t)s->n_pend + plen;
    size_t keep = incomplete_tail((const unsigned char *)s->buf, n);
    memcpy(s->pend, s->buf + n - keep, keep);
    s->n_pend = (int)keep;
    *text = s->buf;
    *len = n - keep;
    return 0;
}

void tok_stream_flush(struct tok_stream *s, const char **text, size_t *len)
{
    *text = s->pend;
    *len = (size_t)s->n_pend;
    s->n_pend = 0;
}
