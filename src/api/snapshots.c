/* api/snapshots.c - a session's ring of mixer-state snapshots (see
 * snapshots.h). */
#include "api/snapshots.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model.h"
#include "model/parts.h"

static const struct token_mixer *snap_mixer(const struct fwd_state *st, int l)
{
    const struct token_mixer *tm = st->model->layers[l].parts.mixer;
    return st->mixer_state && st->mixer_state[l] && tm->snap_bytes ? tm : NULL;
}

size_t colibri_api_snap_bytes(const struct fwd_state *st)
{
    size_t b = 0;
    for (int l = 0; st->mixer_state && l < st->model->cfg.num_hidden_layers; l++) {
        const struct token_mixer *tm = snap_mixer(st, l);
        /* a state without snapshot hooks (GLM-5.3's) would be left out of them: then none is taken */
        if (!tm && st->mixer_state[l]) return 0;
        if (tm) b += tm->snap_bytes(st->mixer_state[l]);
    }
    return b;
}

int colibri_api_snaps_new(const struct fwd_state *st, int every, int cap, struct session_snaps **out, size_t *bytes,
                      struct colibri_err *err)
{
    *out = NULL;
    size_t one = colibri_api_snap_bytes(st);
    if (!one) return 0;
    struct session_snaps *r = calloc(1, sizeof *r);
    if (r) {
        r->pos = calloc((size_t)cap, sizeof *r->pos);
        r->slot = calloc((size_t)cap, sizeof *r->slot);
        r->mem = malloc((size_t)cap * one);
    }
    if (!r || !r->pos || !r->slot || !r->mem) {
        colibri_api_snaps_free(r);
        return base_err_set(err, COLIBRI_ENOMEM, "state snapshots: out of memory for %d of %zu bytes", cap, one);
    }
    r->every = every;
    r->cap = cap;
    r->bytes = one;
    for (int i = 0; i < cap; i++) r->slot[i] = r->mem + (size_t)i * one;
    *bytes += sizeof *r + (size_t)cap * (sizeof *r->pos + sizeof *r->slot + one);
    *out = r;
    return 0;
}

void colibri_api_snaps_free(struct session_snaps *r)
{
    if (!r) return;
    free(r->pos);
    free(r->slot);
    free(r->mem);
    free(r);
}

void colibri_api_snap_save(const struct fwd_state *st, unsigned char *buf)
{
    for (int l = 0; l < st->model->cfg.num_hidden_layers; l++) {
        const struct token_mixer *tm = snap_mixer(st, l);
        if (!tm) continue;
        tm->snap_save(st->mixer_state[l], buf);
        buf += tm->snap_bytes(st->mixer_state[l]);
    }
}

int colibri_api_snap_restore(struct fwd_state *st, const unsigned char *buf, const struct fwd_state *rows_from,
                         struct colibri_err *err)
{
    for (int l = 0; l < st->model->cfg.num_hidden_layers; l++) {
        const struct token_mixer *tm = snap_mixer(st, l);
        if (!tm) continue;
        int rc = tm->snap_restore(st->mixer_state[l], buf, rows_from ? rows_from->mixer_state[l] : NULL, err);
        if (rc) return base_err_prefix(err, rc, "layer %d", l);
        buf += tm->snap_bytes(st->mixer_state[l]);
    }
    return 0;
}

/* Removes snapshot i, its buffer going to the end of the free slots. */
static void drop(struct session_snaps *r, int i)
{
    unsigned char *b = r->slot[i];
    for (int k = i; k + 1 < r->n; k++) r->pos[k] = r->pos[k + 1], r->slot[k] = r->slot[k + 1];
    r->n--;
    r->slot[r->n] = b;
}

unsigned char *colibri_api_snaps_add(struct session_snaps *r, int pos)
{
    colibri_api_snaps_drop_after(r, pos);
    if (r->n && r->pos[r->n - 1] == pos) return r->slot[r->n - 1];
    if (r->n == r->cap) {
        /* the one whose neighbours (position 0 before the first, the new
         * one after the last) are closest together */
        int best = 0, gap = -1;
        for (int i = 0; i < r->n; i++) {
            int lo = i ? r->pos[i - 1] : 0, hi = i + 1 < r->n ? r->pos[i + 1] : pos;
            if (gap < 0 || hi - lo < gap) best = i, gap = hi - lo;
        }
        drop(r, best);
    }
    r->pos[r->n] = pos;
    return r->slot[r->n++];
}

void colibri_api_snaps_take(struct session_snaps *r, const struct fwd_state *st, int pos)
{
    if (!r || !r->cap) return;
    if (r->n && r->pos[r->n - 1] == pos) return;   /* the same tokens give the same state */
    colibri_api_snap_save(st, colibri_api_snaps_add(r, pos));
}

int colibri_api_snaps_find(const struct session_snaps *r, int n)
{
    int i = r ? r->n - 1 : -1;
    while (i >= 0 && r->pos[i] > n) i--;
    return i;
}

void colibri_api_snaps_drop_after(struct session_snaps *r, int n)
{
    while (r && r->n && r->pos[r->n - 1] > n) r->n--;
}

void colibri_api_snaps_copy(struct session_snaps *dst, const struct session_snaps *src, int n)
{
    if (!dst) return;
    dst->n = 0;
    int hi = colibri_api_snaps_find(src, n), lo = hi + 1 - dst->cap;
    if (hi < 0 || src->bytes != dst->bytes) return;
    for (int i = lo < 0 ? 0 : lo; i <= hi; i++) {
        memcpy(dst->slot[dst->n], src->slot[i], src->bytes);
        dst->pos[dst->n++] = src->pos[i];
    }
}
