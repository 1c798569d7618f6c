/* model/mixer_v4.c - DeepSeek-V4's token mixer as a layer part (see
 * mixer_v4.h): projections over chunks of rows, then each row in order
 * through its session's window ring, compressors and indexer. */
#include "model/mixer_v4.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/forward.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/model.h"
#include "model/norm.h"
#include "model/parts.h"
#include "model/v4_attn.h"
#include "model/v4_compress.h"
#include "model/v4_indexer.h"

/* Rows projected together: the products read each weight once per chunk. */
#define V4_CHUNK 16

struct v4_bufs {
    int rows;
    float *qa, *q, *kv, *ckv, *cgate, *ikv, *igate, *iq, *iw, *att, *mid;
};

/* One layer's state in one session (mixer_v4.h). */
struct v4_state {
    int type, window, dim, idim, cap_entries, pos;
    float *win;                 /* [2 * window][dim]: row p at p % window and p % window + window */
    struct v4_compress_state cs, ics;
    float *cmem, *icmem;        /* the compressors' open blocks */
    float *entries, *ikeys;     /* [cap_entries][dim], [cap_entries][idim] */
    float *scratch, *score, *qrot;
    int32_t *sel;
};

void model_v4_name(const struct model_loader *L, char *out, size_t n, const char *fmt, ...)
{
    char base[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(base, sizeof base, fmt, ap);
    va_end(ap);
    snprintf(out, n, "model.%s", base);
    if (!model_loader_has(L, base) && model_loader_has(L, out)) return;
    snprintf(out, n, "%s", base);
}

static void free_comp(struct v4_compressor_weights *c)
{
    quant_qtensor_free(&c->wkv);
    quant_qtensor_free(&c->wgate);
    free(c->ape);
    free(c->norm);
}

int64_t model_v4_attn_bytes(const struct v4_attn_weights *w, const struct model_config *c, int li, int64_t *small)
{
    if (!w) return 0;
    int64_t b = model_qtensor_bytes(&w->wq_a) + model_qtensor_bytes(&w->wq_b) + model_qtensor_bytes(&w->wkv) +
                model_qtensor_bytes(&w->wo_b);
    for (int g = 0; w->wo_a && g < c->o_groups; g++) b += model_qtensor_bytes(&w->wo_a[g]);
    int type = c->v4_layer_type[li], r = c->compress_ratio[li], D = c->head_dim, Di = c->index_head_dim;
    *small += 4 * ((int64_t)D + c->num_attention_heads);   /* q_norm is counted with the layer norms */
    if (type == MODEL_V4_SLIDING) return b;
    int w1 = type == MODEL_V4_CSA ? 2 * D : D;
    b += model_qtensor_bytes(&w->comp.wkv) + model_qtensor_bytes(&w->comp.wgate);
    *small += 4 * ((int64_t)r * w1 + D);
    if (type != MODEL_V4_CSA) return b;
    b += model_qtensor_bytes(&w->icomp.wkv) + model_qtensor_bytes(&w->icomp.wgate) + model_qtensor_bytes(&w->idx_wq_b) +
         model_qtensor_bytes(&w->idx_wproj);
    *small += 4 * ((int64_t)r * 2 * Di + Di);
    return b;
}

void model_v4_attn_weights_free(struct v4_attn_weights *w, int o_groups)
{
    if (!w) return;
    quant_qtensor_free(&w->wq_a);
    quant_qtensor_free(&w->wq_b);
    quant_qtensor_free(&w->wkv);
    quant_qtensor_free(&w->wo_b);
    for (int g = 0; w->wo_a && g < o_groups; g++) quant_qtensor_free(&w->wo_a[g]);
    free(w->wo_a);
    free(w->q_norm);
    free(w->kv_norm);
    free(w->sinks);
    free_comp(&w->comp);
    free_comp(&w->icomp);
    quant_qtensor_free(&w->idx_wq_b);
    quant_qtensor_free(&w->idx_wproj);
    free(w);
}

/* A 2-D f32 parameter (position bias) as a new array. */
static int load_f32_2d(const struct model_loader *L, const char *name, int rows, int cols, float **out,
                       struct colibri_err *err)
{
    struct qtensor t = { 0 };
    int rc = model_loader_mat(L, name, rows, cols, MODEL_ROLE_F32, &t, err);
    if (rc) return rc;
    if (!(*out = malloc((size_t)rows * cols * sizeof **out))) rc = base_err_set(err, COLIBRI_ENOMEM, "'%s'", name);
    else quant_dequant_rows(&t, 0, rows, *out);
    quant_qtensor_free(&t);
    return rc;
}

static int load_comp(const struct model_loader *L, int li, const char *pre, int dim, int width, int ratio,
                     struct v4_compressor_weights *cw, struct colibri_err *err)
{
    int hid = model_loader_model(L)->cfg.hidden_size, rc;
    char name[256];
    model_v4_name(L, name, sizeof name, "layers.%d.attn.%s.wkv.weight", li, pre);
    if ((rc = model_loader_mat(L, name, width, hid, MODEL_ROLE_DENSE, &cw->wkv, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.%s.wgate.weight", li, pre);
    if ((rc = model_loader_mat(L, name, width, hid, MODEL_ROLE_DENSE, &cw->wgate, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.%s.ape", li, pre);
    if ((rc = load_f32_2d(L, name, ratio, width, &cw->ape, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.%s.norm.weight", li, pre);
    return model_loader_vec(L, name, dim, &cw->norm, err);
}

/* wo_a [o_groups * o_lora_rank][per] as o_groups blocks, each its own product. */
static int load_wo_a(const struct model_loader *L, const char *name, const struct model_config *c,
                     struct v4_attn_weights *w, struct colibri_err *err)
{
    int G = c->o_groups, R = c->o_lora_rank, per = c->num_attention_heads * c->head_dim / G, rc;
    struct qtensor t = { 0 };
    if ((rc = model_loader_mat(L, name, G * R, per, MODEL_ROLE_DENSE, &t, err))) return rc;
    float *f = malloc((size_t)G * R * per * sizeof *f);
    if (!f || !(w->wo_a = calloc((size_t)G, sizeof *w->wo_a))) {
        free(f);
        quant_qtensor_free(&t);
        return base_err_set(err, COLIBRI_ENOMEM, "'%s': out of memory", name);
    }
    quant_dequant_rows(&t, 0, G * R, f);
    for (int g = 0; g < G && !rc; g++)
        rc = quant_qtensor_from_f32(t.fmt, R, per, f + (size_t)g * R * per, &w->wo_a[g], err);
    free(f);
    quant_qtensor_free(&t);
    return rc ? base_err_prefix(err, rc, "tensor '%s'", name) : 0;
}

static int v4_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model *m = model_loader_model(L);
    const struct model_config *c = &m->cfg;
    int H = c->num_attention_heads, D = c->head_dim, hid = c->hidden_size, Q = c->q_lora_rank, rc;
    int type = c->v4_layer_type[li], ratio = c->compress_ratio[li];
    struct v4_attn_weights *w = lw->v4 = calloc(1, sizeof *w);
    if (!w) return base_err_set(err, COLIBRI_ENOMEM, "layer %d: out of memory", li);
    char name[256];
    const struct { const char *n; int rows, cols; struct qtensor *t; } mats[] = {
        { "wq_a.weight", Q, hid, &w->wq_a }, { "wq_b.weight", H * D, Q, &w->wq_b },
        { "wkv.weight", D, hid, &w->wkv }, { "wo_b.weight", hid, c->o_groups * c->o_lora_rank, &w->wo_b },
    };
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        model_v4_name(L, name, sizeof name, "layers.%d.attn.%s", li, mats[i].n);
        if ((rc = model_loader_mat(L, name, mats[i].rows, mats[i].cols, MODEL_ROLE_DENSE, mats[i].t, err))) return rc;
    }
    model_v4_name(L, name, sizeof name, "layers.%d.attn.wo_a.weight", li);
    if ((rc = load_wo_a(L, name, c, w, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.q_norm.weight", li);
    if ((rc = model_loader_vec(L, name, Q, &w->q_norm, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.attn_sink", li);
    if ((rc = model_loader_vec(L, name, H, &w->sinks, err))) return rc;
    /* official attn.kv_norm; transformers saves it as attn.norm */
    model_v4_name(L, name, sizeof name, "layers.%d.attn.kv_norm.weight", li);
    if (!model_loader_has(L, name)) model_v4_name(L, name, sizeof name, "layers.%d.attn.norm.weight", li);
    if ((rc = model_loader_vec(L, name, D, &w->kv_norm, err))) return rc;
    if (type == MODEL_V4_SLIDING) return 0;
    if ((rc = load_comp(L, li, "compressor", D, type == MODEL_V4_CSA ? 2 * D : D, ratio, &w->comp, err))) return rc;
    if (type != MODEL_V4_CSA) return 0;
    int Hi = c->index_n_heads, Di = c->index_head_dim;
    if ((rc = load_comp(L, li, "indexer.compressor", Di, 2 * Di, ratio, &w->icomp, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.indexer.wq_b.weight", li);
    if ((rc = model_loader_mat(L, name, Hi * Di, Q, MODEL_ROLE_DENSE, &w->idx_wq_b, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.attn.indexer.weights_proj.weight", li);
    return model_loader_mat(L, name, Hi, hid, MODEL_ROLE_DENSE, &w->idx_wproj, err);
}

/* The part structs of layer li (v4_attn.h, v4_compress.h, v4_indexer.h). */
static void layer_structs(const struct model_config *c, const struct v4_attn_weights *w, int li, struct v4_attn *a,
                          struct v4_compressor *cp, struct v4_compressor *icp, struct v4_indexer *ix)
{
    int type = c->v4_layer_type[li], k = type == MODEL_V4_SLIDING ? 0 : 1, ratio = c->compress_ratio[li];
    struct v4_rope rope = { c->qk_rope_head_dim, c->v4_inv_freq[k], c->v4_rope_scale[k] };
    struct v4_rope crope = { c->qk_rope_head_dim, c->v4_inv_freq[1], c->v4_rope_scale[1] };
    *a = (struct v4_attn){ c->num_attention_heads, c->head_dim, c->sliding_window, c->rms_norm_eps, w ? w->sinks : NULL,
                           w ? w->kv_norm : NULL, rope };
    *cp = (struct v4_compressor){ ratio, c->head_dim, type == MODEL_V4_CSA, c->rms_norm_eps, w ? w->comp.ape : NULL,
                                  w ? w->comp.norm : NULL, crope };
    *icp = (struct v4_compressor){ ratio, c->index_head_dim, 1, c->rms_norm_eps, w ? w->icomp.ape : NULL,
                                   w ? w->icomp.norm : NULL, crope };
    *ix = (struct v4_indexer){ c->index_n_heads, c->index_head_dim, c->index_topk, ratio, crope };
}

static void state_free(void *p)
{
    struct v4_state *s = p;
    if (!s) return;
    void *all[] = { s->win, s->cmem, s->icmem, s->entries, s->ikeys, s->scratch, s->score, s->qrot, s->sel };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(s);
}

static void *take(size_t n, size_t size, size_t *bytes, int *ok)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) *ok = 0;
    *bytes += (n ? n : 1) * size;
    return p;
}

static int state_new(const struct model *m, int li, int n_ctx, void **out, size_t *bytes, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    struct v4_attn a;
    struct v4_compressor cp, icp;
    struct v4_indexer ix;
    layer_structs(c, NULL, li, &a, &cp, &icp, &ix);
    struct v4_state *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "layer %d state: out of memory", li);
    int ok = 1;
    size_t b = sizeof *s;
    s->type = c->v4_layer_type[li];
    s->window = c->sliding_window;
    s->dim = c->head_dim;
    s->idim = c->index_head_dim;
    s->cap_entries = s->type == MODEL_V4_SLIDING ? 0 : n_ctx / cp.ratio + 1;
    s->win = take((size_t)2 * s->window * s->dim, sizeof(float), &b, &ok);
    s->scratch = take((size_t)s->window + s->cap_entries, sizeof(float), &b, &ok);
    if (s->type != MODEL_V4_SLIDING) {
        s->cmem = take(model_v4_compress_state_floats(&cp), sizeof(float), &b, &ok);
        s->entries = take((size_t)s->cap_entries * s->dim, sizeof(float), &b, &ok);
        if (ok) model_v4_compress_state_init(&cp, &s->cs, s->cmem);
    }
    if (s->type == MODEL_V4_CSA) {
        s->icmem = take(model_v4_compress_state_floats(&icp), sizeof(float), &b, &ok);
        s->ikeys = take((size_t)s->cap_entries * s->idim, sizeof(float), &b, &ok);
        s->score = take((size_t)s->cap_entries, sizeof(float), &b, &ok);
        s->qrot = take((size_t)c->index_n_heads * s->idim, sizeof(float), &b, &ok);
        s->sel = take((size_t)c->index_topk, sizeof(int32_t), &b, &ok);
        if (ok) model_v4_compress_state_init(&icp, &s->ics, s->icmem);
    }
    if (!ok) {
        state_free(s);
        return base_err_set(err, COLIBRI_ENOMEM, "layer %d state: out of memory for %zu bytes (%d positions)", li, b,
                            n_ctx);
    }
    *out = s;
    *bytes = b;
    return 0;
}

int model_v4_bufs_new(const struct model_config *c, int cap, struct v4_bufs **out, size_t *bytes)
{
    *out = NULL;
    if (c->attn_kind != MODEL_ATTN_V4) return 0;
    struct v4_bufs *b = calloc(1, sizeof *b);
    if (!b) return COLIBRI_ENOMEM;
    size_t R = (size_t)(cap < V4_CHUNK ? cap : V4_CHUNK), HD = (size_t)c->num_attention_heads * c->head_dim;
    size_t D = (size_t)c->head_dim, Di = (size_t)c->index_head_dim, Hi = (size_t)c->index_n_heads;
    int ok = 1;
    b->rows = (int)R;
    b->qa = take(R * c->q_lora_rank, sizeof(float), bytes, &ok);
    b->q = take(R * HD, sizeof(float), bytes, &ok);
    b->kv = take(R * D, sizeof(float), bytes, &ok);
    b->ckv = take(R * 2 * D, sizeof(float), bytes, &ok);
    b->cgate = take(R * 2 * D, sizeof(float), bytes, &ok);
    b->ikv = take(R * 2 * Di, sizeof(float), bytes, &ok);
    b->igate = take(R * 2 * Di, sizeof(float), bytes, &ok);
    b->iq = take(R * Hi * Di, sizeof(float), bytes, &ok);
    b->iw = take(R * Hi, sizeof(float), bytes, &ok);
    b->att = take(R * HD, sizeof(float), bytes, &ok);
    b->mid = take(R * c->o_groups * c->o_lora_rank, sizeof(float), bytes, &ok);
    *out = b;
    if (!ok) {
        model_v4_bufs_free(b);
        *out = NULL;
        return COLIBRI_ENOMEM;
    }
    return 0;
}

void model_v4_bufs_free(struct v4_bufs *b)
{
    if (!b) return;
    void *all[] = { b->qa, b->q, b->kv, b->ckv, b->cgate, b->ikv, b->igate, b->iq, b->iw, b->att, b->mid };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(b);
}

/* Row r of the chunk at position pos through the state s: window, the
 * compressors, the indexer's selection, the attention into vb->att. */
static int v4_row(const struct model_config *c, const struct v4_attn *a, const struct v4_compressor *cp,
                  const struct v4_compressor *icp, const struct v4_indexer *ix, struct v4_bufs *vb, int r, int pos,
                  struct v4_state *s, struct colibri_err *err)
{
    int H = c->num_attention_heads, D = c->head_dim, Di = c->index_head_dim, Hi = c->index_n_heads, W = s->window;
    if (pos != s->pos)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "DeepSeek-V4 attention state is at position %d; position %d "
                            "cannot be computed (its window and compressors do not rewind)", s->pos, pos);
    float *q = vb->q + (size_t)r * H * D, *kv = vb->kv + (size_t)r * D;
    int rc, emitted, n_sel = 0;
    if ((rc = model_v4_attn_prep_q(a, pos, q, err)) || (rc = model_v4_attn_prep_kv(a, pos, kv, err))) return rc;
    memcpy(s->win + (size_t)(pos % W) * D, kv, (size_t)D * sizeof *kv);
    memcpy(s->win + (size_t)(pos % W + W) * D, kv, (size_t)D * sizeof *kv);
    int n_win = pos + 1 < W ? pos + 1 : W, start = pos + 1 <= W ? 0 : (pos + 1) % W;
    const int32_t *sel = NULL;
    if (s->type != MODEL_V4_SLIDING) {
        int w2 = s->type == MODEL_V4_CSA ? 2 * D : D;
        if ((rc = model_v4_compress_push(cp, &s->cs, vb->ckv + (size_t)r * w2, vb->cgate + (size_t)r * w2,
                                         s->entries + (size_t)s->cs.n_entries * D, &emitted, err)))
            return rc;
        n_sel = s->cs.n_entries;
    }
    if (s->type == MODEL_V4_CSA) {
        if ((rc = model_v4_compress_push(icp, &s->ics, vb->ikv + (size_t)r * 2 * Di, vb->igate + (size_t)r * 2 * Di,
                                         s->ikeys + (size_t)s->ics.n_entries * Di, &emitted, err)))
            return rc;
        n_sel = 0;
        if (s->ics.n_entries > 0 &&
            ((rc = model_v4_indexer_scores(ix, pos, vb->iq + (size_t)r * Hi * Di, vb->iw + (size_t)r * Hi, s->ikeys,
                                           s->ics.n_entries, s->qrot, s->score, err)) ||
             (rc = model_v4_indexer_select(ix, pos, s->score, s->ics.n_entries, s->sel, &n_sel, err))))
            return rc;
        sel = s->sel;
    }
    if ((rc = model_v4_attn_query(a, pos, q, s->win + (size_t)start * D, n_win, s->entries, sel, n_sel,
                                  vb->att + (size_t)r * H * D, s->scratch, err)))
        return rc;
    s->pos++;
    return 0;
}

static int v4_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    const struct model_config *c = &pr->m->cfg;
    const struct v4_attn_weights *w = pr->m->layers[pr->li].v4;
    struct run_bufs *b = pr->b;
    struct v4_bufs *vb = b->v4;
    int li = pr->li, type = c->v4_layer_type[li], hid = c->hidden_size, Q = c->q_lora_rank;
    int H = c->num_attention_heads, D = c->head_dim, G = c->o_groups, R = c->o_lora_rank, per = H * D / G, rc = 0;
    struct v4_attn a;
    struct v4_compressor cp, icp;
    struct v4_indexer ix;
    layer_structs(c, w, li, &a, &cp, &icp, &ix);
    int g = 0;
    for (int r0 = 0; r0 < n && !rc; r0 += vb->rows) {
        int k = n - r0 < vb->rows ? n - r0 : vb->rows;
        const float *x = in + (size_t)r0 * hid;
        struct quant_scratch *qs = &b->qs;
        if ((rc = model_linear(&w->wq_a, x, k, vb->qa, qs, err))) break;
        model_rmsnorm(vb->qa, vb->qa, w->q_norm, k, Q, c->rms_norm_eps);
        if ((rc = model_linear(&w->wq_b, vb->qa, k, vb->q, qs, err)) ||
            (rc = model_linear(&w->wkv, x, k, vb->kv, qs, err)))
            break;
        if (type != MODEL_V4_SLIDING && ((rc = model_linear(&w->comp.wkv, x, k, vb->ckv, qs, err)) ||
                                         (rc = model_linear(&w->comp.wgate, x, k, vb->cgate, qs, err))))
            break;
        if (type == MODEL_V4_CSA && ((rc = model_linear(&w->icomp.wkv, x, k, vb->ikv, qs, err)) ||
                                     (rc = model_linear(&w->icomp.wgate, x, k, vb->igate, qs, err)) ||
                                     (rc = model_linear(&w->idx_wq_b, vb->qa, k, vb->iq, qs, err)) ||
                                     (rc = model_linear(&w->idx_wproj, x, k, vb->iw, qs, err))))
            break;
        for (int r = 0; r < k && !rc; r++) {
            int i = r0 + r;
            while (i >= pr->grp[g].row0 + pr->grp[g].n) g++;
            const struct fwd_group *gr = &pr->grp[g];
            struct v4_state *s = gr->st->mixer_state[li - gr->st->kv_layer0];
            rc = v4_row(c, &a, &cp, &icp, &ix, vb, r, gr->pos0 + (i - gr->row0), s, err);
        }
        /* the grouped output projection, one row at a time per group block
         * (a row's product has the same bits alone or in a batch) */
        for (int r = 0; r < k && !rc; r++)
            for (int gi = 0; gi < G && !rc; gi++)
                rc = model_linear(&w->wo_a[gi], vb->att + (size_t)r * H * D + (size_t)gi * per, 1,
                                  vb->mid + ((size_t)r * G + gi) * R, qs, err);
        if (!rc) rc = model_linear(&w->wo_b, vb->mid, k, out + (size_t)r0 * hid, qs, err);
    }
    return rc;
}

/* Every V4 cache part is f32 for now: a quantized tier is refused by name. */
static int v4_cache_parts(const struct model_config *c, int li, enum kv_tier index_tier, struct kv_layer_spec *spec,
                          struct colibri_err *err)
{
    (void)c;
    (void)index_tier;
    if (spec->tier != KV_TIER_F32 || (spec->rope != KV_ROPE_DEFAULT && spec->rope != KV_ROPE_F32) || spec->n_extra)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: DeepSeek-V4's caches (window, compressed entries) "
                            "are kept in f32 only: KV tiers other than f32 are not implemented for them", li);
    return 0;
}

static void state_reset(void *p)
{
    struct v4_state *s = p;
    s->pos = 0;
    s->cs.n_buf = s->cs.n_entries = 0;
    s->ics.n_buf = s->ics.n_entries = 0;
}

const struct token_mixer model_mixer_v4 = { "v4", v4_load, v4_forward, v4_cache_parts, state_new, state_free,
                                            state_reset };
