/* sample/sample_stop.c - stop strings over streamed text (contract in
 * sample.h): show what can no longer begin a stop string, hold the rest. */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sample/sample.h"

int sample_stop_init(struct sample_stop *st, const char *const *stops, size_t n, struct colibri_err *err)
{
    memset(st, 0, sizeof *st);
    st->stops = calloc(n + 1, sizeof *st->stops);
    if (!st->stops) return base_err_set(err, COLIBRI_ENOMEM, "stop strings");
    for (size_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        if (!(st->stops[st->n_stops] = strdup(stops[i]))) {
            sample_stop_free(st);
            return base_err_set(err, COLIBRI_ENOMEM, "stop strings");
        }
        size_t len = strlen(stops[i]);
        if (len > st->max_len) st->max_len = len;
        st->n_stops++;
    }
    return 0;
}

void sample_stop_free(struct sample_stop *st)
{
    for (size_t i = 0; i < st->n_stops; i++) free(st->stops[i]);
    free(st->stops);
    base_sb_free(&st->held);
    base_sb_free(&st->out);
    memset(st, 0, sizeof *st);
}

/* Length of the longest suffix of h[0..n) that is a proper prefix of a stop string. */
static size_t partial_suffix(const struct sample_stop *st, const char *h, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < st->n_stops; i++) {
        size_t sl = strlen(st->stops[i]);
        for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (!memcmp(h + n - k, st->stops[i], k)) { best = k; break; }
    }
    return best;
}

int sample_stop_feed(struct sample_stop *st, const char *text, size_t len, const char **out,
                     size_t *out_len, struct colibri_err *err)
{
    *out = "";
    *out_len = 0;
    if (st->stopped) return 1;
    /* out gets room for all that is held now, so neither it nor flush allocates again */
    size_t want = st->held.n + len;
    base_sb_clear(&st->out);
    if (base_sb_append(&st->held, text, len) || base_sb_reserve(&st->out, st->held.n))
        return base_err_set(err, COLIBRI_ENOMEM, "stop strings: %zu bytes held", want);

    /* The earliest complete stop string wins. Only text new since the held
     * part could not contain one, so a full scan of `held` stays short. */
    const char *h = st->held.s;
    size_t cut = st->held.n;
    for (size_t i = 0; i < st->n_stops; i++) {
        size_t sl = strlen(st->stops[i]);
        for (size_t p = 0; p + sl <= st->held.n && p < cut; p++)
            if (!memcmp(h + p, st->stops[i], sl)) { cut = p; break; }
    }
    if (cut < st->held.n) {
        base_sb_append(&st->out, h, cut);
        *out = st->out.s;
        *out_len = cut;
        base_sb_clear(&st->held);
        st->stopped = 1;
        return 1;
    }
    size_t emit = st->held.n - partial_suffix(st, h, st->held.n);
    base_sb_append(&st->out, h, emit);
    base_sb_consume(&st->held, emit);
    *out = st->out.s;
    *out_len = emit;
    return 0;
}

void sample_stop_flush(struct sample_stop *st, const char **out, size_t *out_len)
{
    base_sb_clear(&st->out);
    if (!st->stopped && st->held.n) base_sb_append(&st->out, st->held.s, st->held.n);
    base_sb_clear(&st->held);
    *out = st->out.s ? st->out.s : "";
    *out_len = st->out.n;
}
