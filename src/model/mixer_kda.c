/* model/mixer_kda.c - the KDA token mixer part (contract in mixer_kda.h). */
#include "model/mixer_kda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/forward.h"
#include "model/kda.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/model.h"
#include "model/parts.h"
#include "model/runstate.h"

struct kda_bufs {
    int rows, n_threads;
    float *raw, *conv, *tmp, *fa, *fp, *blog, *g, *beta, *core, *gate, *scratch;
};

struct kda_state {
    float *conv, *rec;
    size_t n_conv, n_rec;
};

static struct kda core_of(const struct model_config *c, const struct kda_weights *w)
{
    return (struct kda){ c->linear_num_heads, c->linear_head_dim, c->linear_conv_k, c->linear_bounded,
                         c->linear_lower_bound, c->rms_norm_eps, w ? w->conv_w : NULL,
                         w ? w->dt_bias : NULL, w ? w->a_log : NULL, w ? w->norm_w : NULL };
}

void model_kda_weights_free(struct kda_weights *w)
{
    if (!w) return;
    struct qtensor *all[] = { &w->q, &w->k, &w->v, &w->fa, &w->fb, &w->b, &w->ga, &w->gb, &w->o };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) quant_qtensor_free(all[i]);
    free(w->conv_w);
    free(w->dt_bias);
    free(w->a_log);
    free(w->norm_w);
    free(w);
}

int64_t model_kda_weights_bytes(const struct kda_weights *w)
{
    if (!w) return 0;
    const struct qtensor *all[] = { &w->q, &w->k, &w->v, &w->fa, &w->fb, &w->b, &w->ga, &w->gb, &w->o };
    int64_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) n += model_qtensor_bytes(all[i]);
    return n + (int64_t)w->conv_floats * (int64_t)sizeof(float);
}

static int kda_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model_config *c = &model_loader_model(L)->cfg;
    int hid = c->hidden_size, H = c->linear_num_heads, D = c->linear_head_dim, HD = H * D, rc;
    struct kda_weights *w = calloc(1, sizeof *w);
    if (!w) return base_err_set(err, COLIBRI_ENOMEM, "layer %d KDA weights: out of memory", li);
    lw->kda = w;
    const struct { const char *name; struct qtensor *t; int rows, cols; enum model_weight_role role; } mats[] = {
        { "q_proj.weight", &w->q, HD, hid, MODEL_ROLE_DENSE },
        { "k_proj.weight", &w->k, HD, hid, MODEL_ROLE_DENSE },
        { "v_proj.weight", &w->v, HD, hid, MODEL_ROLE_DENSE },
        { "f_a_proj.weight", &w->fa, D, hid, MODEL_ROLE_DENSE },
        { "f_b_proj.weight", &w->fb, HD, D, MODEL_ROLE_DENSE },
        { "b_proj.weight", &w->b, H, hid, MODEL_ROLE_DENSE },
        { "g_a_proj.weight", &w->ga, D, hid, MODEL_ROLE_DENSE },
        { "g_b_proj.weight", &w->gb, HD, D, MODEL_ROLE_DENSE },
        { "o_proj.weight", &w->o, hid, HD, MODEL_ROLE_DENSE },
    };
    char name[256];
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", li, mats[i].name);
        if ((rc = model_loader_mat(L, name, mats[i].rows, mats[i].cols, mats[i].role, mats[i].t, err))) return rc;
    }
    /* the three convolutions as one [3 HD][K] array (transformers
     * concatenates them into conv1d and keeps it in f32) */
    const int K = c->linear_conv_k;
    w->conv_floats = (size_t)3 * HD * K;
    if (!(w->conv_w = malloc(sizeof(float) * w->conv_floats)))
        return base_err_set(err, COLIBRI_ENOMEM, "layer %d KDA conv1d: out of memory", li);
    const char *convs[3] = { "q", "k", "v" };
    for (int j = 0; j < 3; j++) {
        struct qtensor t = { 0 };
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s_conv1d.weight", li, convs[j]);
        if ((rc = model_loader_mat(L, name, HD, K, MODEL_ROLE_F32, &t, err))) return rc;
        memcpy(w->conv_w + (size_t)j * HD * K, t.data, sizeof(float) * (size_t)HD * K);
        quant_qtensor_free(&t);
    }
    const struct { const char *name; float **dst; int n; } vecs[] = {
        { "dt_bias", &w->dt_bias, HD },
        { "A_log", &w->a_log, H },
        { "o_norm.weight", &w->norm_w, D },
    };
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", li, vecs[i].name);
        if ((rc = model_loader_vec(L, name, vecs[i].n, vecs[i].dst, err))) return rc;
    }
    struct kda k = core_of(c, w);
    return model_kda_check(&k, err);
}

static void *take(size_t n, size_t *bytes, int *ok)
{
    void *p = calloc(n ? n : 1, sizeof(float));
    if (!p) *ok = 0;
    *bytes += (n ? n : 1) * sizeof(float);
    return p;
}

void model_kda_bufs_free(struct kda_bufs *b)
{
    if (!b) return;
    void *all[] = { b->raw, b->conv, b->tmp, b->fa, b->fp, b->blog, b->g, b->beta, b->core, b->gate, b->scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(b);
}

int model_kda_bufs_new(const struct model_config *c, int cap, int n_threads, struct kda_bufs **out, size_t *bytes)
{
    *out = NULL;
    if (c->attn_kind != MODEL_ATTN_GLM53) return 0;
    struct kda_bufs *b = calloc(1, sizeof *b);
    if (!b) return COLIBRI_ENOMEM;
    int ok = 1;
    size_t by = sizeof *b, R = (size_t)(cap < KDA_CHUNK ? cap : KDA_CHUNK);
    size_t H = (size_t)c->linear_num_heads, D = (size_t)c->linear_head_dim, HD = H * D;
    struct kda k = core_of(c, NULL);
    b->rows = (int)R;
    b->n_threads = n_threads > 1 ? n_threads : 1;
    b->raw = take(R * 3 * HD, &by, &ok);
    b->conv = take(R * 3 * HD, &by, &ok);
    b->tmp = take(R * HD, &by, &ok);
    b->fa = take(R * D, &by, &ok);
    b->fp = take(R * HD, &by, &ok);
    b->blog = take(R * H, &by, &ok);
    b->g = take(R * HD, &by, &ok);
    b->beta = take(R * H, &by, &ok);
    b->core = take(R * HD, &by, &ok);
    b->gate = take(R * HD, &by, &ok);
    b->scratch = take((size_t)b->n_threads * model_kda_scratch_floats(&k), &by, &ok);
    if (!ok) {
        model_kda_bufs_free(b);
        return COLIBRI_ENOMEM;
    }
    if (bytes) *bytes += by;
    *out = b;
    return 0;
}

/* k rows x through the layer, advancing s; out [k][hidden]. */
static int kda_slice(const struct model_config *c, const struct kda_weights *w, struct kda_bufs *kb,
                     struct quant_scratch *qs, const float *x, int k, struct kda_state *s, float *out,
                     struct colibri_err *err)
{
    const int HD = c->linear_num_heads * c->linear_head_dim;
    struct kda core = core_of(c, w);
    const struct qtensor *qkv[3] = { &w->q, &w->k, &w->v };
    int rc;
    for (int j = 0; j < 3; j++) {
        if ((rc = model_linear(qkv[j], x, k, kb->tmp, qs, err))) return rc;
        for (int r = 0; r < k; r++)
            memcpy(kb->raw + ((size_t)r * 3 + j) * HD, kb->tmp + (size_t)r * HD, sizeof(float) * (size_t)HD);
    }
    model_kda_conv(&core, k, kb->raw, s->conv, kb->conv);
    if ((rc = model_linear(&w->fa, x, k, kb->fa, qs, err)) || (rc = model_linear(&w->fb, kb->fa, k, kb->fp, qs, err)) ||
        (rc = model_linear(&w->b, x, k, kb->blog, qs, err)))
        return rc;
    model_kda_gates(&core, k, kb->fp, kb->blog, kb->g, kb->beta);
    if (k == 1)
        model_kda_recurrent(&core, k, kb->conv, kb->g, kb->beta, s->rec, kb->core, kb->n_threads);
    else
        model_kda_chunked(&core, k, kb->conv, kb->g, kb->beta, s->rec, kb->core, kb->scratch, kb->n_threads);
    if ((rc = model_linear(&w->ga, x, k, kb->fa, qs, err)) || (rc = model_linear(&w->gb, kb->fa, k, kb->gate, qs, err)))
        return rc;
    model_kda_out_norm(&core, k, kb->core, kb->gate, kb->core);
    return model_linear(&w->o, kb->core, k, out, qs, err);
}

static int kda_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    const struct model_config *c = &pr->m->cfg;
    const struct kda_weights *w = pr->m->layers[pr->li].kda;
    struct kda_bufs *kb = pr->b->kda;
    int hid = c->hidden_size, rc = 0;
    (void)n;
    for (int gi = 0; gi < pr->n_grp && !rc; gi++) {
        const struct fwd_group *gr = &pr->grp[gi];
        struct kda_state *s = gr->st->mixer_state[pr->li - gr->st->kv_layer0];
        for (int r0 = 0; r0 < gr->n && !rc; r0 += kb->rows) {
            int k = gr->n - r0 < kb->rows ? gr->n - r0 : kb->rows;
            size_t row = (size_t)(gr->row0 + r0) * hid;
            rc = kda_slice(c, w, kb, &pr->b->qs, in + row, k, s, out + row, err);
        }
    }
    return rc;
}

/* The KDA state is f32 whatever the KV tier (which the indexed layers'
 * latents take): it does not grow with the context, and the recurrence
 * would carry a quantized state's error to every later position. Per-part
 * tiers name parts it does not have. */
static int kda_cache_parts(const struct model_config *c, int li, enum kv_tier index_tier, struct kv_layer_spec *spec,
                           struct colibri_err *err)
{
    (void)c;
    (void)index_tier;
    if ((spec->rope != KV_ROPE_DEFAULT && spec->rope != KV_ROPE_F32 && spec->rope != kv_rope_default(spec->tier)) ||
        spec->n_extra)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: GLM-5.3's KDA state (convolution and recurrent "
                            "state, f32 at every KV tier) has no RoPE or index parts: --kv-rope and per-part tiers "
                            "are not implemented for it", li);
    return 0;
}

size_t model_kda_state_bytes(const struct model_config *c)
{
    struct kda k = core_of(c, NULL);
    return (model_kda_conv_state_floats(&k) + model_kda_rec_state_floats(&k)) * sizeof(float);
}

static void state_free(void *p)
{
    struct kda_state *s = p;
    if (!s) return;
    free(s->conv);
    free(s->rec);
    free(s);
}

static int state_new(const struct model *m, int li, int n_ctx, const struct kv_layer_spec *spec, void **out,
                     size_t *bytes, struct colibri_err *err)
{
    (void)n_ctx;
    (void)spec; /* f32 only (kda_cache_parts) */
    struct kda k = core_of(&m->cfg, NULL);
    struct kda_state *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "layer %d KDA state: out of memory", li);
    s->n_conv = model_kda_conv_state_floats(&k);
    s->n_rec = model_kda_rec_state_floats(&k);
    s->conv = calloc(s->n_conv ? s->n_conv : 1, sizeof(float));
    s->rec = calloc(s->n_rec, sizeof(float));
    if (!s->conv || !s->rec) {
        state_free(s);
        return base_err_set(err, COLIBRI_ENOMEM, "layer %d KDA state: out of memory", li);
    }
    *out = s;
    *bytes = sizeof *s + (s->n_conv + s->n_rec) * sizeof(float);
    return 0;
}

static void state_reset(void *p)
{
    struct kda_state *s = p;
    memset(s->conv, 0, sizeof(float) * s->n_conv);
    memset(s->rec, 0, sizeof(float) * s->n_rec);
}

/* ---- snapshots (parts.h snap_*): the whole state (its size is fixed), after
 * a header of its two sizes; no row arrays. */

struct kda_snap_hdr {
    int64_t n_conv, n_rec;
};

static size_t snap_bytes(const void *p)
{
    const struct kda_state *s = p;
    return sizeof(struct kda_snap_hdr) + (s->n_conv + s->n_rec) * sizeof(float);
}

static void snap_save(const void *p, void *buf)
{
    const struct kda_state *s = p;
    struct kda_snap_hdr h = { (int64_t)s->n_conv, (int64_t)s->n_rec };
    unsigned char *o = buf;
    memcpy(o, &h, sizeof h);
    o += sizeof h;
    if (s->n_conv) memcpy(o, s->conv, s->n_conv * sizeof(float));
    memcpy(o + s->n_conv * sizeof(float), s->rec, s->n_rec * sizeof(float));
}

static int snap_restore(void *p, const void *buf, const void *rows_from, struct colibri_err *err)
{
    struct kda_state *s = p;
    (void)rows_from;
    struct kda_snap_hdr h;
    memcpy(&h, buf, sizeof h);
    if (h.n_conv != (int64_t)s->n_conv || h.n_rec != (int64_t)s->n_rec)
        return base_err_set(err, COLIBRI_EMISMATCH, "GLM-5.3 KDA state snapshot: its %s (%lld floats) differs from "
                            "this layer's (%zu)", h.n_conv != (int64_t)s->n_conv ? "convolution state" : "recurrent state",
                            (long long)(h.n_conv != (int64_t)s->n_conv ? h.n_conv : h.n_rec),
                            h.n_conv != (int64_t)s->n_conv ? s->n_conv : s->n_rec);
    const unsigned char *i = (const unsigned char *)buf + sizeof h;
    if (s->n_conv) memcpy(s->conv, i, s->n_conv * sizeof(float));
    memcpy(s->rec, i + s->n_conv * sizeof(float), s->n_rec * sizeof(float));
    return 0;
}

static int state_rows(void *p, struct mixer_rows *rows, int max)
{
    (void)p;
    (void)rows;
    (void)max;
    return 0;
}

size_t model_kda_snap_bytes(const struct model_config *c)
{
    struct kda k = core_of(c, NULL);
    return sizeof(struct kda_snap_hdr) + (model_kda_conv_state_floats(&k) + model_kda_rec_state_floats(&k)) * sizeof(float);
}

const struct token_mixer model_mixer_kda = { "kda", kda_load, kda_forward, kda_cache_parts, state_new, state_free,
                                             state_reset, snap_bytes, snap_save, snap_restore, state_rows };
