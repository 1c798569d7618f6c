/* model/mixer_glm53_mla.c - GLM-5.3's indexed_attention token mixer
 * (contract in mixer_glm53_mla.h). */
#include "model/mixer_glm53_mla.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"
#include "kv/codec.h"
#include "model/forward.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/mixer_kda.h"
#include "model/model.h"
#include "model/norm.h"
#include "model/parts.h"
#include "model/pool_index.h"
#include "model/runstate.h"

#define SLICE 64

struct glm53_mla_bufs {
    int rows, cap, max_sel, max_pools, n_threads;
    float *qa, *q, *kv, *iq, *iw, *ik, *ig, *att;   /* [SLICE][...] */
    float *qlat, *olat, *score;                     /* [n_threads][...]: one head's */
    float *pscore;                                  /* one row's pool scores */
    float *dlat;                                    /* [max_sel][r]: a row's selected latents, decoded */
    int *order;
    int32_t *sel;                                   /* [cap][max_sel]: each forward row's selection */
    int *n_sel;                                     /* [cap] */
};

struct glm53_mla_state {
    int pos, cap;
    int r, di, kpool, indexer;                      /* the layout: kv_lora_rank, index_head_dim, index_kpool */
    struct kv_codec lat;                            /* the latents' KV tier (width r) */
    uint8_t *latent;                                /* [cap][lat.row_bytes] */
    float *ikey, *igate, *pkeys;                    /* [cap][dI] x 2, [cap / kpool][dI], f32 */
};

static struct pool_index pool_of(const struct model_config *c, const struct glm53_mla_weights *w)
{
    return (struct pool_index){ c->index_n_heads, c->index_head_dim, c->index_kpool, c->index_topk,
                                c->index_kpool_tail, w ? w->ape : NULL };
}

void model_glm53_mla_weights_free(struct glm53_mla_weights *w)
{
    if (!w) return;
    struct qtensor *all[] = { &w->q_a, &w->q_b, &w->kv_a, &w->kv_b, &w->o, &w->wq_b, &w->wk, &w->wproj, &w->wgate };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) quant_qtensor_free(all[i]);
    free(w->q_a_norm); free(w->kv_a_norm); free(w->k_norm_w); free(w->k_norm_b); free(w->ape);
    free(w);
}

int64_t model_glm53_mla_weights_bytes(const struct glm53_mla_weights *w)
{
    if (!w) return 0;
    const struct qtensor *all[] = { &w->q_a, &w->q_b, &w->kv_a, &w->kv_b, &w->o, &w->wq_b, &w->wk, &w->wproj,
                                    &w->wgate };
    int64_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) n += model_qtensor_bytes(all[i]);
    return n;
}

static int mla_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model_config *c = &model_loader_model(L)->cfg;
    int hid = c->hidden_size, H = c->num_attention_heads, Q = c->q_lora_rank, r = c->glm53_kv_lora_rank;
    int dn = c->qk_nope_head_dim, dv = c->v_head_dim, nI = c->index_n_heads, dI = c->index_head_dim, rc;
    struct glm53_mla_weights *w = calloc(1, sizeof *w);
    if (!w) return base_err_set(err, COLIBRI_ENOMEM, "layer %d attention weights: out of memory", li);
    lw->glm53_mla = w;
    w->indexer = c->indexer_full[li];
    const struct { const char *name; struct qtensor *t; int rows, cols; enum model_weight_role role; int idx; } mats[] = {
        { "q_a_proj.weight", &w->q_a, Q, hid, MODEL_ROLE_DENSE, 0 },
        { "q_b_proj.weight", &w->q_b, H * dn, Q, MODEL_ROLE_DENSE, 0 },
        { "kv_a_proj_with_mqa.weight", &w->kv_a, r, hid, MODEL_ROLE_DENSE, 0 },
        /* f32: the absorbed form reads its rows one by one */
        { "kv_b_proj.weight", &w->kv_b, H * (dn + dv), r, MODEL_ROLE_F32, 0 },
        { "o_proj.weight", &w->o, hid, H * dv, MODEL_ROLE_DENSE, 0 },
        { "indexer.wq_b.weight", &w->wq_b, nI * dI, Q, MODEL_ROLE_DENSE, 1 },
        { "indexer.wk.weight", &w->wk, dI, hid, MODEL_ROLE_DENSE, 1 },
        { "indexer.weights_proj.weight", &w->wproj, nI, hid, MODEL_ROLE_F32, 1 },
        { "indexer.index_kpool_compress_gate", &w->wgate, dI, hid, MODEL_ROLE_F32, 1 },
    };
    char name[256];
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        if (mats[i].idx && !w->indexer) continue;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", li, mats[i].name);
        if ((rc = model_loader_mat(L, name, mats[i].rows, mats[i].cols, mats[i].role, mats[i].t, err))) return rc;
    }
    const struct { const char *name; float **dst; int n; int idx; } vecs[] = {
        { "q_a_layernorm.weight", &w->q_a_norm, Q, 0 },
        { "kv_a_layernorm.weight", &w->kv_a_norm, r, 0 },
        { "indexer.k_norm.weight", &w->k_norm_w, dI, 1 },
        { "indexer.k_norm.bias", &w->k_norm_b, dI, 1 },
    };
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        if (vecs[i].idx && !w->indexer) continue;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", li, vecs[i].name);
        if ((rc = model_loader_vec(L, name, vecs[i].n, vecs[i].dst, err))) return rc;
    }
    if (w->indexer) {
        struct qtensor ape = { 0 };
        snprintf(name, sizeof name, "model.layers.%d.self_attn.indexer.index_kpool_compress_ape", li);
        if ((rc = model_loader_mat(L, name, c->index_kpool, dI, MODEL_ROLE_F32, &ape, err))) return rc;
        w->ape = malloc(sizeof(float) * (size_t)c->index_kpool * dI);
        if (w->ape) memcpy(w->ape, ape.data, sizeof(float) * (size_t)c->index_kpool * dI);
        quant_qtensor_free(&ape);
        if (!w->ape) return base_err_set(err, COLIBRI_ENOMEM, "layer %d indexer: out of memory", li);
    }
    return 0;
}

void model_glm53_layer_free(struct layer_weights *lw)
{
    model_kda_weights_free(lw->kda);
    model_glm53_mla_weights_free(lw->glm53_mla);
}

int64_t model_glm53_layer_bytes(const struct layer_weights *lw)
{
    return model_kda_weights_bytes(lw->kda) + model_glm53_mla_weights_bytes(lw->glm53_mla);
}

static void *take(size_t n, size_t size, size_t *bytes, int *ok)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) *ok = 0;
    *bytes += (n ? n : 1) * size;
    return p;
}

void model_glm53_mla_bufs_free(struct glm53_mla_bufs *b)
{
    if (!b) return;
    void *all[] = { b->qa, b->q, b->kv, b->iq, b->iw, b->ik, b->ig, b->att, b->qlat, b->olat, b->score, b->pscore,
                    b->order, b->sel, b->n_sel, b->dlat };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(b);
}

int model_glm53_mla_bufs_new(const struct model_config *c, int cap, int n_threads, struct glm53_mla_bufs **out,
                             size_t *bytes)
{
    *out = NULL;
    int any = 0;
    for (int l = 0; c->attn_kind == MODEL_ATTN_GLM53 && l < c->num_hidden_layers; l++) any |= !c->kda_layer[l];
    if (!any) return 0;
    struct glm53_mla_bufs *b = calloc(1, sizeof *b);
    if (!b) return COLIBRI_ENOMEM;
    struct pool_index pi = pool_of(c, NULL);
    size_t R = SLICE, H = (size_t)c->num_attention_heads, r = (size_t)c->glm53_kv_lora_rank, by = sizeof *b;
    size_t nI = (size_t)c->index_n_heads, dI = (size_t)c->index_head_dim, np = (size_t)c->max_position_embeddings;
    int ok = 1;
    b->rows = SLICE;
    b->cap = cap;
    b->max_sel = model_pool_index_max_sel(&pi);
    b->n_threads = n_threads > 1 ? n_threads : 1;
    const size_t T = (size_t)b->n_threads;
    b->max_pools = (int)(np / (size_t)c->index_kpool + 1);
    b->qa = take(R * (size_t)c->q_lora_rank, sizeof(float), &by, &ok);
    b->q = take(R * H * (size_t)c->qk_nope_head_dim, sizeof(float), &by, &ok);
    b->kv = take(R * r, sizeof(float), &by, &ok);
    b->iq = take(R * nI * dI, sizeof(float), &by, &ok);
    b->iw = take(R * nI, sizeof(float), &by, &ok);
    b->ik = take(R * dI, sizeof(float), &by, &ok);
    b->ig = take(R * dI, sizeof(float), &by, &ok);
    b->att = take(R * H * (size_t)c->v_head_dim, sizeof(float), &by, &ok);
    b->qlat = take(T * r, sizeof(float), &by, &ok);
    b->olat = take(T * r, sizeof(float), &by, &ok);
    b->score = take(T * (size_t)b->max_sel, sizeof(float), &by, &ok);
    /* pool scores and order: one per pool of the longest context */
    b->pscore = take(np / (size_t)c->index_kpool + 1, sizeof(float), &by, &ok);
    b->order = take(np / (size_t)c->index_kpool + 1, sizeof(int), &by, &ok);
    b->sel = take((size_t)cap * (size_t)b->max_sel, sizeof(int32_t), &by, &ok);
    b->n_sel = take((size_t)cap, sizeof(int), &by, &ok);
    b->dlat = take((size_t)b->max_sel * r, sizeof(float), &by, &ok);
    if (!ok) {
        model_glm53_mla_bufs_free(b);
        return COLIBRI_ENOMEM;
    }
    if (bytes) *bytes += by;
    *out = b;
    return 0;
}

size_t model_glm53_mla_bytes_per_pos(const struct model_config *c)
{
    return sizeof(float) * ((size_t)c->glm53_kv_lora_rank + 2 * (size_t)c->index_head_dim);
}

/* LayerNorm with weight and bias (eps 1e-6), in place over n values. */
static void layernorm(float *x, int n, const float *w, const float *b)
{
    float mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= (float)n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)n;
    const float inv = 1.0f / sqrtf(var + 1e-6f);
    for (int i = 0; i < n; i++) x[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* Head h of row r over its n selected positions' latents (lat[sel[i]], or
 * lat[i] without sel: rows of the kv_lora_rank floats), with thread tid's
 * scratch. */
static void mla_head(const struct model_config *c, const struct glm53_mla_weights *w, struct glm53_mla_bufs *b, int r,
                     const int32_t *sel, int n, const float *lat_rows, int h, int tid)
{
    const int H = c->num_attention_heads, R = c->glm53_kv_lora_rank, dn = c->qk_nope_head_dim, dv = c->v_head_dim;
    const float *kvb = (const float *)w->kv_b.data;
    const float scale = 1.0f / sqrtf((float)dn);
    float *qlat = b->qlat + (size_t)tid * R, *olat = b->olat + (size_t)tid * R;
    float *score = b->score + (size_t)tid * b->max_sel;
    const float *qh = b->q + ((size_t)r * H + h) * dn;
    const float *wk = kvb + (size_t)h * (dn + dv) * R, *wv = wk + (size_t)dn * R;
    for (int e = 0; e < R; e++) qlat[e] = 0;
    for (int d = 0; d < dn; d++)
        for (int e = 0; e < R; e++) qlat[e] += qh[d] * wk[(size_t)d * R + e];
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        const float *lat = lat_rows + (size_t)(sel ? sel[i] : i) * R;
        float sc = 0;
        for (int e = 0; e < R; e++) sc += qlat[e] * lat[e];
        score[i] = sc * scale;
        if (score[i] > mx) mx = score[i];
    }
    float sum = 0;
    for (int i = 0; i < n; i++) sum += score[i] = expf(score[i] - mx);
    for (int e = 0; e < R; e++) olat[e] = 0;
    for (int i = 0; i < n; i++) {
        const float *lat = lat_rows + (size_t)(sel ? sel[i] : i) * R, p = score[i] / sum;
        for (int e = 0; e < R; e++) olat[e] += p * lat[e];
    }
    float *o = b->att + ((size_t)r * H + h) * dv;
    for (int d = 0; d < dv; d++) {
        float acc = 0;
        for (int e = 0; e < R; e++) acc += wv[(size_t)d * R + e] * olat[e];
        o[d] = acc;
    }
}

/* Row r of the slice (forward row `row`, position pos) of state s. */
static int mla_row(const struct model_config *c, const struct glm53_mla_weights *w, struct glm53_mla_bufs *b, int r,
                   int row, int pos, struct glm53_mla_state *s, struct colibri_err *err)
{
    const int H = c->num_attention_heads, R = c->glm53_kv_lora_rank, dI = c->index_head_dim, P = c->index_kpool;
    if (pos != s->pos || pos >= s->cap || (pos + 1) / P > b->max_pools)
        return base_err_set(err, COLIBRI_EINVAL, "GLM-5.3 attention state: position %d, state at %d of %d "
                            "(max_position_embeddings %d)", pos, s->pos, s->cap, c->max_position_embeddings);
    const size_t lb = s->lat.row_bytes;
    kv_codec_encode(&s->lat, b->kv + (size_t)r * R, s->latent + (size_t)pos * lb);
    int32_t *sel = b->sel + (size_t)row * b->max_sel;
    if (w->indexer) {
        struct pool_index pi = pool_of(c, w);
        memcpy(s->ikey + (size_t)pos * dI, b->ik + (size_t)r * dI, sizeof(float) * (size_t)dI);
        memcpy(s->igate + (size_t)pos * dI, b->ig + (size_t)r * dI, sizeof(float) * (size_t)dI);
        if ((pos + 1) % P == 0) {
            int p = (pos + 1) / P - 1;
            model_pool_index_key(&pi, s->ikey + (size_t)p * P * dI, s->igate + (size_t)p * P * dI,
                                 s->pkeys + (size_t)p * dI);
        }
        b->n_sel[row] = model_pool_index_select(&pi, pos, b->iq + (size_t)r * c->index_n_heads * dI,
                                                b->iw + (size_t)r * c->index_n_heads, s->pkeys, (pos + 1) / P,
                                                b->pscore, b->order, sel);
    }
    s->pos = pos + 1;
    const int n = b->n_sel[row];
    /* the heads are independent: their bits do not depend on the threads */
    int nt = omp_in_parallel() ? 1 : b->n_threads;
    /* f32 latents are read in place; a quantized tier's selected rows are decoded once for every head */
    const float *lat_rows = (const float *)s->latent;
    const int32_t *rows_sel = sel;
    if (s->lat.tier != KV_TIER_F32) {
        BASE_PAR_FOR_N(nt, for (int i = 0; i < n; i++)
                               kv_codec_decode(&s->lat, s->latent + (size_t)sel[i] * lb, b->dlat + (size_t)i * R););
        lat_rows = b->dlat;
        rows_sel = NULL;
    }
    BASE_PAR_FOR_N(nt, for (int h = 0; h < H; h++)
                           mla_head(c, w, b, r, rows_sel, n, lat_rows, h, nt > 1 ? omp_get_thread_num() : 0););
    return 0;
}

static int mla_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    const struct model_config *c = &pr->m->cfg;
    const struct glm53_mla_weights *w = pr->m->layers[pr->li].glm53_mla;
    struct glm53_mla_bufs *b = pr->b->glm53_mla;
    struct quant_scratch *qs = &pr->b->qs;
    const int hid = c->hidden_size, Q = c->q_lora_rank, R = c->glm53_kv_lora_rank, H = c->num_attention_heads;
    const int nI = c->index_n_heads, dI = c->index_head_dim;
    int rc = 0;
    (void)n;
    for (int gi = 0; gi < pr->n_grp && !rc; gi++) {
        const struct fwd_group *gr = &pr->grp[gi];
        struct glm53_mla_state *s = gr->st->mixer_state[pr->li - gr->st->kv_layer0];
        for (int r0 = 0; r0 < gr->n && !rc; r0 += b->rows) {
            int k = gr->n - r0 < b->rows ? gr->n - r0 : b->rows, row0 = gr->row0 + r0;
            const float *x = in + (size_t)row0 * hid;
            if ((rc = model_linear(&w->q_a, x, k, b->qa, qs, err))) break;
            model_rmsnorm(b->qa, b->qa, w->q_a_norm, k, Q, c->rms_norm_eps);
            if ((rc = model_linear(&w->q_b, b->qa, k, b->q, qs, err)) ||
                (rc = model_linear(&w->kv_a, x, k, b->kv, qs, err)))
                break;
            model_rmsnorm(b->kv, b->kv, w->kv_a_norm, k, R, c->rms_norm_eps);
            if (w->indexer) {
                if ((rc = model_linear(&w->wq_b, b->qa, k, b->iq, qs, err)) ||
                    (rc = model_linear(&w->wk, x, k, b->ik, qs, err)) ||
                    (rc = model_linear(&w->wgate, x, k, b->ig, qs, err)) ||
                    (rc = model_linear(&w->wproj, x, k, b->iw, qs, err)))
                    break;
                for (int r = 0; r < k; r++) layernorm(b->ik + (size_t)r * dI, dI, w->k_norm_w, w->k_norm_b);
                for (size_t i = 0; i < (size_t)k * nI; i++) b->iw[i] /= sqrtf((float)nI);
            }
            for (int r = 0; r < k && !rc; r++) rc = mla_row(c, w, b, r, row0 + r, gr->pos0 + r0 + r, s, err);
            if (!rc) rc = model_linear(&w->o, b->att, k, out + (size_t)row0 * hid, qs, err);
            (void)H;
        }
    }
    return rc;
}

/* The latents take the layer's KV tier; the index keys, gates and pool keys
 * stay f32, and there is no RoPE part (qk_rope_head_dim 0). */
static int mla_cache_parts(const struct model_config *c, int li, enum kv_tier index_tier, struct kv_layer_spec *spec,
                           struct colibri_err *err)
{
    (void)index_tier;
    if (!kv_tier_row_bytes(spec->tier, c->glm53_kv_lora_rank))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: GLM-5.3's latents (kv_lora_rank %d) cannot take "
                            "the %s tier (its width rule)", li, c->glm53_kv_lora_rank, kv_tier_name(spec->tier));
    if ((spec->rope != KV_ROPE_DEFAULT && spec->rope != KV_ROPE_F32 && spec->rope != kv_rope_default(spec->tier)) ||
        spec->n_extra)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: GLM-5.3's attention has no RoPE part and keeps its "
                            "index keys in f32: --kv-rope and per-part tiers are not implemented for it", li);
    return 0;
}

static void state_free(void *p)
{
    struct glm53_mla_state *s = p;
    if (!s) return;
    kv_codec_free(&s->lat);
    free(s->latent); free(s->ikey); free(s->igate); free(s->pkeys);
    free(s);
}

static int state_new(const struct model *m, int li, int n_ctx, const struct kv_layer_spec *spec, void **out,
                     size_t *bytes, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    struct glm53_mla_state *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "layer %d attention state: out of memory", li);
    int rc = kv_codec_init(&s->lat, spec ? spec->tier : KV_TIER_F32, c->glm53_kv_lora_rank, KV_SEED_LATENT, err);
    if (rc) {
        free(s);
        return base_err_prefix(err, rc, "layer %d latents", li);
    }
    int ok = 1, idx = c->indexer_full[li];
    size_t b = sizeof *s, dI = (size_t)c->index_head_dim;
    s->cap = n_ctx;
    s->r = c->glm53_kv_lora_rank;
    s->di = c->index_head_dim;
    s->kpool = c->index_kpool;
    s->indexer = idx;
    s->latent = take((size_t)n_ctx, s->lat.row_bytes, &b, &ok);
    if (idx) {
        s->ikey = take((size_t)n_ctx * dI, sizeof(float), &b, &ok);
        s->igate = take((size_t)n_ctx * dI, sizeof(float), &b, &ok);
        s->pkeys = take(((size_t)n_ctx / (size_t)c->index_kpool + 1) * dI, sizeof(float), &b, &ok);
    }
    if (!ok) {
        state_free(s);
        return base_err_set(err, COLIBRI_ENOMEM, "layer %d attention state: out of memory for %zu bytes (%d "
                            "positions)", li, b, n_ctx);
    }
    *out = s;
    *bytes = b;
    return 0;
}

static void state_reset(void *p)
{
    ((struct glm53_mla_state *)p)->pos = 0;
}

/* ---- snapshots (parts.h snap_*): the latents and the complete pools' keys
 * are append-only rows, kept in place; what goes forward is the position
 * and the open pool's index keys and gates (fewer than index_kpool rows,
 * needed for its key once it completes), which the snapshot holds, padded
 * to index_kpool - 1 rows. */

struct glm53_snap_hdr {
    int64_t indexer, r, lat_bytes, di, kpool, pos;
};

static size_t open_pool_bytes(const struct glm53_mla_state *s)
{
    return s->indexer ? 2 * (size_t)(s->kpool - 1) * (size_t)s->di * sizeof(float) : 0;
}

static size_t snap_bytes(const void *p)
{
    return sizeof(struct glm53_snap_hdr) + open_pool_bytes(p);
}

static void snap_save(const void *p, void *buf)
{
    const struct glm53_mla_state *s = p;
    struct glm53_snap_hdr h = { s->indexer, s->r, (int64_t)s->lat.row_bytes, s->di, s->kpool, s->pos };
    unsigned char *o = buf;
    memcpy(o, &h, sizeof h);
    o += sizeof h;
    if (!s->indexer) return;
    size_t p0 = (size_t)(s->pos / s->kpool * s->kpool), row = (size_t)s->di * sizeof(float);
    size_t open = (size_t)s->pos - p0, half = open_pool_bytes(s) / 2;
    memset(o, 0, 2 * half);
    if (open) {
        memcpy(o, s->ikey + p0 * s->di, open * row);
        memcpy(o + half, s->igate + p0 * s->di, open * row);
    }
}

static int snap_restore(void *p, const void *buf, const void *rows_from, struct colibri_err *err)
{
    struct glm53_mla_state *s = p;
    const struct glm53_mla_state *from = rows_from;
    struct glm53_snap_hdr h;
    memcpy(&h, buf, sizeof h);
    const char *bad = h.indexer != s->indexer ? "indexer (full or shared)" : h.r != s->r ? "kv_lora_rank"
                    : h.lat_bytes != (int64_t)s->lat.row_bytes ? "latent row bytes (KV tier)"
                    : h.di != s->di ? "index_head_dim" : h.kpool != s->kpool ? "index_kpool" : NULL;
    if (bad)
        return base_err_set(err, COLIBRI_EMISMATCH, "GLM-5.3 attention state snapshot: its %s differs from this "
                            "layer's", bad);
    if (h.pos < 0 || h.pos > s->cap || (from && (from->lat.row_bytes != s->lat.row_bytes || from->indexer != s->indexer || h.pos > from->cap)))
        return base_err_set(err, COLIBRI_EINVAL, "GLM-5.3 attention state snapshot at position %lld: it does not "
                            "fit this session's %d positions", (long long)h.pos, s->cap);
    const int pos = (int)h.pos;
    if (from && from != s) {
        memcpy(s->latent, from->latent, (size_t)pos * s->lat.row_bytes);
        if (s->indexer) memcpy(s->pkeys, from->pkeys, (size_t)(pos / s->kpool) * s->di * sizeof(float));
    }
    if (s->indexer) {
        const unsigned char *i = (const unsigned char *)buf + sizeof h;
        size_t p0 = (size_t)(pos / s->kpool * s->kpool), open = (size_t)pos - p0, half = open_pool_bytes(s) / 2;
        size_t row = (size_t)s->di * sizeof(float);
        if (open) {
            memcpy(s->ikey + p0 * s->di, i, open * row);
            memcpy(s->igate + p0 * s->di, i + half, open * row);
        }
    }
    s->pos = pos;
    return 0;
}

static int state_rows(void *p, struct mixer_rows *rows, int max)
{
    struct glm53_mla_state *s = p;
    int n = 0;
    if (n < max) rows[n++] = (struct mixer_rows){ s->latent, s->lat.row_bytes, s->pos, s->cap, 1 };
    if (s->indexer && n < max)
        rows[n++] = (struct mixer_rows){ s->pkeys, (size_t)s->di * sizeof(float), s->pos / s->kpool,
                                         s->cap / s->kpool + 1, s->kpool };
    return n;
}

size_t model_glm53_mla_snap_bytes(const struct model_config *c, int li)
{
    return sizeof(struct glm53_snap_hdr) +
           (c->indexer_full[li] ? 2 * (size_t)(c->index_kpool - 1) * (size_t)c->index_head_dim * sizeof(float) : 0);
}

const struct token_mixer model_mixer_glm53_mla = { "glm53-mla", mla_load, mla_forward, mla_cache_parts, state_new,
                                                   state_free, state_reset, snap_bytes, snap_save, snap_restore,
                                                   state_rows };
