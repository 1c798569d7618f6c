/* api/persist_api.c - the "KV files" section of include/colibri.h: binds a
 * kv/persist file to a session, and computes what kv/ must not know about:
 * the weights label (the model fingerprint: api/fingerprint.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api/internal.h"
#include "api/snapshots.h"
#include "base/err.h"
#include "kv/persist.h"
#include "kv/persist_state.h"
#include "model/parts.h"
#include "quant/format.h"

struct colibri_kv_file {
    colibri_session *s;
    struct kv_file *f;
    /* a session whose attention state only goes forward: a version-3 file */
    struct kv_state_file *sf;
    struct kv_state_mem mem;
};


/* "experts=F dense=F embed=F": the formats the weights were loaded in. */
static void weights_label(const struct model *m, char *out, size_t n)
{
    const int f[3] = { m->fmt.experts_fmt, m->fmt.dense_fmt, m->fmt.embed_fmt };
    const char *name[3];
    for (int i = 0; i < 3; i++)
        name[i] = f[i] == MODEL_FMT_AS_STORED ? "stored" : quant_fmt_name((enum quant_fmt)f[i]);
    snprintf(out, n, "experts=%s dense=%s embed=%s", name[0], name[1], name[2]);
}

static uint64_t new_salt(void)
{
    uint64_t salt = 0;
    if (getrandom(&salt, sizeof salt, 0) != (ssize_t)sizeof salt) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        salt = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&salt;
    }
    return salt;
}

/* The layout of s's mixer states as a version-3 file sees it (*want) and
 * the memory it reads into and writes from. */
static int state_layout(colibri_session *s, struct kv_state_hdr *want, struct kv_state_mem *mem,
                        struct colibri_err *err)
{
    const struct model *m = &s->model->m;
    const struct model_config *c = &m->cfg;
    weights_label(m, want->weights, sizeof want->weights);
    snprintf(want->tier, sizeof want->tier, "%s", s->kv_tier);
    want->model = colibri_api_model_fingerprint(m);
    want->salt = new_salt();
    want->n_layers = (uint32_t)c->num_hidden_layers;
    mem->tokens = s->tokens;
    mem->max_tokens = s->st.n_ctx;
    for (int l = 0; l < c->num_hidden_layers && l < KV_FILE_LAYERS_MAX; l++) {
        const struct token_mixer *tm = m->layers[l].parts.mixer;
        void *st = s->st.mixer_state[l];
        struct kv_state_layer *y = &want->layer[l];
        if (!st || !tm->snap_bytes || !tm->state_rows)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: its attention state cannot be saved", l);
        /* GLM-5.3: 0 KDA, 1 full indexed attention, 2 shared indexed attention */
        y->kind = c->attn_kind == MODEL_ATTN_V4 ? (uint32_t)c->v4_layer_type[l]
                : c->attn_kind == MODEL_ATTN_GLM53 ? (c->kda_layer[l] ? 0u : c->indexer_full[l] ? 1u : 2u) : 0;
        if (c->attn_kind == MODEL_ATTN_V4 && c->v4_layer_type[l] == MODEL_V4_CSA)
            snprintf(want->index_tier, sizeof want->index_tier, "%s", s->kv_index);
        y->snap_bytes = (uint32_t)tm->snap_bytes(st);
        struct mixer_rows r[KV_STATE_ARRAYS];
        y->n_arrays = (uint32_t)tm->state_rows(st, r, KV_STATE_ARRAYS);
        for (uint32_t a = 0; a < y->n_arrays; a++) {
            y->row_bytes[a] = (uint32_t)r[a].row_bytes;
            y->ratio[a] = (uint32_t)r[a].every;
            mem->rows[l][a] = r[a].base;
            mem->cap[l][a] = (uint32_t)r[a].cap;
        }
    }
    return kv_state_hdr_finish(want, err);
}

/* Each restored chunk's snapshot goes to the session's ring. */
static int put_snap(void *ctx, uint64_t pos, const uint8_t *snap, struct colibri_err *err)
{
    (void)err;
    colibri_session *s = ctx;
    memcpy(colibri_api_snaps_add(s->snaps, (int)pos), snap, s->snaps->bytes);
    return 0;
}

static int open_state(colibri_session *s, const char *path, colibri_kv_file *kf, struct colibri_kv_info *info,
                      struct colibri_err *err)
{
    struct kv_state_hdr *want = calloc(1, sizeof *want);
    if (!want) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    struct kv_state_report rep;
    int rc = !s->snaps || !s->snaps->cap
                 ? base_err_set(err, COLIBRI_EUNSUPPORTED, "kv file %s: the session keeps no state snapshots", path)
                 : state_layout(s, want, &kf->mem, err);
    if (!rc) rc = kv_state_open(io_fs_posix(), path, want, &kf->mem, put_snap, s, &rep, &kf->sf, err);
    free(want);
    int at = rc ? -1 : colibri_api_snaps_find(s->snaps, (int)rep.positions);
    if (!rc && rep.positions && (at < 0 || s->snaps->pos[at] != (int)rep.positions))
        rc = base_err_set(err, COLIBRI_EINVAL, "kv file %s: no snapshot at position %llu", path,
                          (unsigned long long)rep.positions);
    if (!rc && rep.positions) rc = colibri_api_snap_restore(&s->st, s->snaps->slot[at], NULL, err);
    if (rc) {
        kv_state_close(kf->sf);
        kf->sf = NULL;
        model_fwd_state_reset_mixers(&s->st);
        s->snaps->n = 0;
        return rc;
    }
    s->pos = (int)rep.positions;
    if (info) {
        memset(info, 0, sizeof *info);
        info->restored = (int32_t)rep.positions;
        info->in_file = (int32_t)rep.positions;
        info->trimmed = (int32_t)(rep.published - rep.kept);
        info->created = rep.created;
        info->read_only = rep.read_only;
        if (rep.first_bad >= 0)
            snprintf(info->message, sizeof info->message, "kept %llu of %llu chunks (positions 0..%llu): %s",
                     (unsigned long long)rep.kept, (unsigned long long)rep.published,
                     (unsigned long long)rep.positions, rep.why);
    }
    return 0;
}

int colibri_kv_file_open(colibri_session *s, const char *path, colibri_kv_file **out, struct colibri_kv_info *info,
                         struct colibri_err *err)
{
    if (!s || !path || !out) return base_err_set(err, COLIBRI_EINVAL, "colibri_kv_file_open: session, path and out are required");
    if (s->pos != 0)
        return base_err_set(err, COLIBRI_EINVAL, "kv file %s: the session already holds %d tokens; open the file first",
                       path, s->pos);
    if (s->st.mixer_state) {
        colibri_kv_file *kf = calloc(1, sizeof *kf);
        if (!kf) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
        int rc = open_state(s, path, kf, info, err);
        if (rc) {
            free(kf);
            return rc;
        }
        kf->s = s;
        *out = kf;
        return 0;
    }
    if (!s->st.kv)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "kv file %s: this model keeps no cache", path);
    const struct model *m = &s->model->m;
    char weights[KV_FILE_WEIGHTS_MAX];
    weights_label(m, weights, sizeof weights);
    struct kv_file_hdr want;
    int rc = kv_file_hdr_for(s->st.kv, colibri_api_model_fingerprint(m), weights, new_salt(), &want, err);
    if (rc) return rc;
    colibri_kv_file *kf = calloc(1, sizeof *kf);
    if (!kf) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    struct kv_file_report rep;
    rc = kv_file_open(io_fs_posix(), path, &want, s->st.kv, s->tokens, s->st.n_ctx, &rep, &kf->f, err);
    if (rc) {
        free(kf);
        return rc;
    }
    kf->s = s;
    s->pos = (int)rep.restored;
    model_dev_kv_forget(s->dev_kv, 0);   /* every row may have been read from the file */
    if (info) {
        memset(info, 0, sizeof *info);
        info->restored = (int32_t)rep.restored;
        info->in_file = (int32_t)rep.published;
        info->trimmed = (int32_t)(rep.published - rep.kept);
        info->created = rep.created;
        info->upgraded = rep.upgraded;
        info->read_only = rep.read_only;
        if (rep.first_bad >= 0)
            snprintf(info->message, sizeof info->message, "kept %lld of %lld positions: %s", (long long)rep.kept,
                     (long long)rep.published, rep.why);
    }
    *out = kf;
    return 0;
}

int colibri_kv_file_save(colibri_kv_file *kf, struct colibri_err *err)
{
    if (!kf) return base_err_set(err, COLIBRI_EINVAL, "colibri_kv_file_save: no file");
    if (kf->sf) {
        /* a chunk ending at each snapshot the session holds, and at its position */
        colibri_session *s = kf->s;
        struct session_snaps *r = s->snaps;
        int n = 0, own = !(r->n && r->pos[r->n - 1] == s->pos);
        int *pos = malloc((size_t)(r->n + 1) * sizeof *pos);
        const uint8_t **snap = malloc((size_t)(r->n + 1) * sizeof *snap);
        uint8_t *now = own ? malloc(r->bytes) : NULL;
        int rc = !pos || !snap || (own && !now) ? base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory") : 0;
        for (int i = 0; !rc && i < r->n && r->pos[i] <= s->pos; i++) pos[n] = r->pos[i], snap[n++] = r->slot[i];
        if (!rc && own) {
            colibri_api_snap_save(&s->st, now);
            pos[n] = s->pos;
            snap[n++] = now;
        }
        if (!rc) rc = kv_state_save(kf->sf, &kf->mem, pos, snap, n, err);
        free(pos);
        free(snap);
        free(now);
        return rc;
    }
    return kv_file_save(kf->f, kf->s->st.kv, kf->s->tokens, kf->s->pos, err);
}

void colibri_kv_file_close(colibri_kv_file *kf)
{
    if (!kf) return;
    kv_state_close(kf->sf);
    if (kf->f) kv_file_close(kf->f);
    free(kf);
}

int colibri_session_reuse_prefix(colibri_session *s, const int32_t *prompt, int n, struct colibri_err *err)
{
    if (!s || (!prompt && n > 0) || n < 0) return base_err_set(err, COLIBRI_EINVAL, "colibri_session_reuse_prefix: bad arguments");
    int keep = colibri_session_common_prefix(s, prompt, n);
    if (keep >= n) keep = n > 0 ? n - 1 : 0;   /* the last prompt token is fed again for its logits */
    /* a state that only goes forward (DeepSeek-V4) resumes from its latest snapshot within the prefix */
    keep = colibri_session_resume_point(s, keep);
    int rc = colibri_session_truncate(s, keep, err);
    return rc ? rc : keep;
}

static void state_stat(const struct kv_state_verify *v, struct colibri_kv_file_stat *st)
{
    const struct kv_state_hdr *h = &v->hdr;
    memset(st, 0, sizeof *st);
    st->write_version = h->write_version;
    st->read_version = h->read_version;
    st->read_only = v->read_only;
    st->model_fingerprint = h->model;
    st->salt = h->salt;
    snprintf(st->weights, sizeof st->weights, "%s", h->weights);
    snprintf(st->tier, sizeof st->tier, "%s", h->tier);
    st->n_layers = (int)h->n_layers;
    st->file_bytes = (int64_t)v->file_bytes;
    st->published = st->valid = (int64_t)v->positions;
    st->first_bad = v->first_bad >= 0 ? (int64_t)v->positions : -1;
    st->tail_bytes = (int64_t)v->tail_bytes;
    snprintf(st->problem, sizeof st->problem, "%s", v->why);
    if (h->index_tier[0]) snprintf(st->layout, sizeof st->layout, "--kv %s --kv-index %s", h->tier, h->index_tier);
    else snprintf(st->layout, sizeof st->layout, "--kv %s", h->tier);
    st->chunks = (int64_t)v->published;
    st->chunks_valid = (int64_t)v->kept;
    st->snapshot_bytes = (int64_t)h->snap_bytes;
}

int colibri_kv_file_stat(const char *path, struct colibri_kv_file_stat *st, struct colibri_err *err)
{
    if (!path || !st) return base_err_set(err, COLIBRI_EINVAL, "colibri_kv_file_stat: path and st are required");
    struct kv_state_verify *sv = malloc(sizeof *sv);
    if (!sv) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    struct colibri_err serr = { 0 };
    int rc = kv_state_verify(io_fs_posix(), path, sv, &serr);
    if (rc != COLIBRI_EMISMATCH) {   /* a state file, or no readable file of either kind */
        if (rc) *err = serr;
        else state_stat(sv, st);
        free(sv);
        return rc;
    }
    free(sv);
    struct kv_file_verify v;
    rc = kv_file_verify(io_fs_posix(), path, &v, err);
    if (rc) return rc;
    const struct kv_file_hdr *h = &v.hdr;
    memset(st, 0, sizeof *st);
    st->write_version = h->write_version;
    st->read_version = h->read_version;
    st->model_fingerprint = h->model;
    st->salt = h->salt;
    st->codec_check = h->codec_check;
    st->latent_seed = h->latent_seed;
    st->rope_seed = h->rope_seed;
    snprintf(st->weights, sizeof st->weights, "%s", h->weights);
    snprintf(st->tier, sizeof st->tier, "%s", h->tier_name);
    snprintf(st->rope, sizeof st->rope, "%s", h->rope_name);
    st->n_layers = (int)h->n_layers;
    st->r = (int)h->r;
    st->dr = (int)h->dr;
    st->latent_bits = (int)h->latent_bits;
    st->rope_bits = (int)h->rope_bits;
    st->latent_bytes = (int)h->latent_bytes;
    st->rope_bytes = (int)h->rope_bytes;
    st->row_bytes = (int)h->row_bytes;
    st->record_bytes = (int)h->record_bytes;
    st->file_bytes = (int64_t)v.file_bytes;
    st->published = (int64_t)v.published;
    st->valid = (int64_t)v.valid;
    st->first_bad = v.first_bad;
    st->tail_bytes = (int64_t)v.tail_bytes;
    st->read_only = v.read_only;
    snprintf(st->problem, sizeof st->problem, "%s", v.why);
    kv_file_layout_options(h, st->layout, sizeof st->layout);
    for (uint32_t l = 0; l < h->n_layers; l++)
        for (uint32_t i = 0; i < h->layer[l].n_parts; i++) st->index_key_layers += h->layer[l].part[i].kind == KV_PART_INDEX_KEY;
    return 0;
}
