/* api/persist_api.c - the "KV files" section of include/colibri.h: binds a
 * kv/persist file to a session, and computes what kv/ must not know about:
 * the weights label (the model fingerprint: api/fingerprint.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api/internal.h"
#include "base/err.h"
#include "kv/persist.h"
#include "quant/format.h"

struct colibri_kv_file {
    colibri_session *s;
    struct kv_file *f;
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

int colibri_kv_file_open(colibri_session *s, const char *path, colibri_kv_file **out, struct colibri_kv_info *info,
                         struct colibri_err *err)
{
    if (!s || !path || !out) return base_err_set(err, COLIBRI_EINVAL, "colibri_kv_file_open: session, path and out are required");
    if (s->pos != 0)
        return base_err_set(err, COLIBRI_EINVAL, "kv file %s: the session already holds %d tokens; open the file first",
                       path, s->pos);
    if (s->st.mixer_state || !s->st.kv)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "kv file %s: this model's attention state (DeepSeek-V4's "
                            "window and compressors) is not persisted yet", path);
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
    return kv_file_save(kf->f, kf->s->st.kv, kf->s->tokens, kf->s->pos, err);
}

void colibri_kv_file_close(colibri_kv_file *kf)
{
    if (!kf) return;
    kv_file_close(kf->f);
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

int colibri_kv_file_stat(const char *path, struct colibri_kv_file_stat *st, struct colibri_err *err)
{
    if (!path || !st) return base_err_set(err, COLIBRI_EINVAL, "colibri_kv_file_stat: path and st are required");
    struct kv_file_verify v;
    int rc = kv_file_verify(io_fs_posix(), path, &v, err);
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
