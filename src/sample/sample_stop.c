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
    free(st->held);
    free(st->out);
    memset(st, 0, sizeof *st);
}

static int reserve(char **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 256;
    while (ncap < need) ncap *= 2;
    char *np = realloc(*p, ncap);
    if (!np) return COLIBRI_ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
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
    if (reserve(&st->held, &st->held_cap, st->held_len + len + 1) ||
        reserve(&st->out, &st->out_cap, st->held_len + len + 1))
        return base_err_set(err, COLIBRI_ENOMEM, "stop strings: %zu bytes held", st->held_len + len);
    memcpy(st->held + st->held_len, text, len);
    st->held_len += len;
    st->held[st->held_len] = 0;

    /* The earliest complete stop string wins. Only text new since the held
     * part could not contain one, so a full scan of `held` stays short. */
    size_t cut = st->held_len;
    for (size_t i = 0; i < st->n_stops; i++) {
        size_t sl = strlen(st->stops[i]);
        for (size_t p = 0; p + sl <= st->held_len && p < cut; p++)
            if (!memcmp(st->held + p, st->stops[i], sl)) { cut = p; break; }
    }
    if (cut < st->held_len) {
        memcpy(st->out, st->held, cut);
        *out = st->out;
        *out_len = cut;
        st->held_len = 0;
        st->stopped = 1;
        return 1;
    }
    size_t keep = partial_suffix(st, st->held, st->held_len);
    size_t emit = st->held_len - keep;
    memcpy(st->out, st->held, emit);
    memmove(st->held, st->held + emit, keep);
    st->held_len = keep;
    *out = st->out;
    *out_len = emit;
    return 0;
}

void sample_stop_flush(struct sample_stop *st, const char **out, size_t *out_len)
{
    *out = st->held ? st->held : "";
    *out_len = st->stopped ? 0 : st->held_len;
    st->held_len = 0;
}
