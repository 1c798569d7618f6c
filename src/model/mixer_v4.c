/* model/mixer_v4.c - DeepSeek-V4's token mixer as a layer part (see
 * mixer_v4.h): projections over chunks of rows, then each row in order
 * through its session's window ring and compressors, then the chunk's
 * indexer selections and attentions together. */
#include "model/mixer_v4.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "base/err.h"
#include "base/par.h"
#include "model/forward.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/model.h"
#include "model/norm.h"
#include "model/parts.h"
#include "model/v4_attn.h"
#include "model/v4_compress.h"
#include "model/v4_indexer.h"
#include "model/v4_kern.h"

/* Rows projected together: the products read each weight once per chunk. */
#define V4_CHUNK 16

/* What a chunk's row takes from its state to its attention (chunk_attend). */
struct v4_row {
    struct v4_state *s;
    int pos, n_win, n_ent, n_ikeys;     /* entries and indexer keys there were at pos */
    const uint8_t *win;                 /* its window rows, oldest first */
};

struct v4_bufs {
    int rows;
    float *qa, *q, *kv, *ckv, *cgate, *ikv, *igate, *iq, *iw, *att, *mid;
    struct v4_row rows_at[V4_CHUNK];
    struct colibri_err errs[V4_CHUNK];  /* the rows' attentions run together */
    /* model_v4_bufs_reserve: per thread, the attended rows decoded to f32
     * (quantized tiers), the kernels' work, the indexer's shared part, its
     * scores, rotated query and selection; the chunk's window copies */
    int n_threads, max_rows, tile_rows, score_cap, sel_cap;
    float *tile;                /* [n_threads][tile_rows][head_dim] */
    void *work, *ishared;       /* [n_threads][work_stride / ishared_stride] bytes, 64-byte aligned */
    size_t work_stride, ishared_stride;
    float *score, *qrot;        /* [n_threads][score_cap], [n_threads][index heads * index_head_dim] */
    int32_t *sel;               /* [n_threads][sel_cap] */
    uint8_t *cwin;              /* [cwin_bytes]: rows * window rows of the widest row */
    size_t cwin_bytes;
};

/* One layer's state in one session (mixer_v4.h). Rows are kept encoded,
 * each a fixed row_bytes under its codec (f32: the floats themselves). */
struct v4_state {
    int type, window, dim, idim, cap_entries, pos, ratio;
    struct kv_codec kc, ic;     /* window and entries (head_dim); the indexer's keys (index_head_dim) */
    uint8_t *win;               /* [2 * window][kc.row_bytes]: row p at p % window and p % window + window */
    struct v4_compress_state cs, ics;
    float *cmem, *icmem;        /* the compressors' open blocks */
    size_t cmem_bytes, icmem_bytes;
    uint8_t *entries, *ikeys;   /* [cap_entries][kc.row_bytes], [cap_entries][ic.row_bytes] */
    float *row;                 /* [max(dim, idim)] an entry before encoding */
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

/* Group g of an fp8b wo_a whose group rows R are whole 128-row blocks: its
 * rows and their block scales as they are (data borrowed from t unless t
 * owns it). */
static int fp8b_group(const struct qtensor *t, int g, int R, struct qtensor *out, struct colibri_err *err)
{
    int per = t->cols, bc = (per + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK, br = R / QUANT_FP8B_BLOCK;
    size_t nd = (size_t)R * per;
    const uint8_t *src = (const uint8_t *)t->data + (size_t)g * nd;
    float *f = malloc((size_t)br * bc * sizeof *f);
    uint8_t *d = t->owned == 1 ? malloc(nd) : NULL;
    if (!f || (t->owned == 1 && !d)) {
        free(f);
        free(d);
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    memcpy(f, t->scales + (size_t)g * br * bc, (size_t)br * bc * sizeof *f);
    if (d) memcpy(d, src, nd);
    int rc = quant_qtensor_wrap(QUANT_FP8B, R, per, d ? d : src, nd, f, (size_t)br * bc, out, err);
    if (rc) {
        free(f);
        free(d);
        return rc;
    }
    out->owned = d ? 1 : QUANT_OWN_SCALES;
    return 0;
}

/* wo_a [o_groups * o_lora_rank][per] as o_groups blocks, each its own
 * product. fp8b (the release's FP8 with 128x128 block scales) is split
 * without changing a value: by its rows and scale rows when o_lora_rank is
 * a multiple of 128 (V4-Flash and V4-Pro: 1024), else into f32 (a group
 * boundary inside a scale block has no fp8b of its own). Other formats are
 * re-encoded per group from their values. */
static int load_wo_a(const struct model_loader *L, const char *name, const struct model_config *c,
                     struct v4_attn_weights *w, struct colibri_err *err)
{
    int G = c->o_groups, R = c->o_lora_rank, per = c->num_attention_heads * c->head_dim / G, rc;
    struct qtensor t = { 0 };
    if ((rc = model_loader_mat(L, name, G * R, per, MODEL_ROLE_DENSE, &t, err))) return rc;
    int sliced = t.fmt == QUANT_FP8B && R % QUANT_FP8B_BLOCK == 0;
    int fmt = t.fmt == QUANT_FP8B && !sliced ? QUANT_F32 : (int)t.fmt;
    float *f = sliced ? NULL : malloc((size_t)G * R * per * sizeof *f);
    if ((!sliced && !f) || !(w->wo_a = calloc((size_t)G, sizeof *w->wo_a))) {
        free(f);
        quant_qtensor_free(&t);
        return base_err_set(err, COLIBRI_ENOMEM, "'%s': out of memory", name);
    }
    if (f) quant_dequant_rows(&t, 0, G * R, f);
    for (int g = 0; g < G && !rc; g++)
        rc = sliced ? fp8b_group(&t, g, R, &w->wo_a[g], err)
                    : quant_qtensor_from_f32((enum quant_fmt)fmt, R, per, f + (size_t)g * R * per, &w->wo_a[g], err);
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
    void *all[] = { s->win, s->cmem, s->icmem, s->entries, s->ikeys, s->row };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    kv_codec_free(&s->kc);
    kv_codec_free(&s->ic);
    free(s);
}

static void *take(size_t n, size_t size, size_t *bytes, int *ok)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) *ok = 0;
    *bytes += (n ? n : 1) * size;
    return p;
}

/* The tier of the indexer's keys in a layer's spec (v4_cache_parts put it there). */
static enum kv_tier index_tier_of(const struct kv_layer_spec *spec)
{
    for (int i = 0; spec && i < spec->n_extra; i++)
        if (spec->extra[i].kind == KV_PART_INDEX_KEY) return spec->extra[i].tier;
    return KV_TIER_F32;
}

static int state_new(const struct model *m, int li, int n_ctx, const struct kv_layer_spec *spec, void **out,
                     size_t *bytes, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    struct v4_attn a;
    struct v4_compressor cp, icp;
    struct v4_indexer ix;
    layer_structs(c, NULL, li, &a, &cp, &icp, &ix);
    struct v4_state *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "layer %d state: out of memory", li);
    int ok = 1, rc;
    size_t b = sizeof *s;
    s->type = c->v4_layer_type[li];
    s->window = c->sliding_window;
    s->dim = c->head_dim;
    s->idim = c->index_head_dim;
    s->cap_entries = s->type == MODEL_V4_SLIDING ? 0 : n_ctx / cp.ratio + 1;
    if ((rc = kv_codec_init(&s->kc, spec ? spec->tier : KV_TIER_F32, s->dim, KV_SEED_LATENT, err)) ||
        (s->type == MODEL_V4_CSA && (rc = kv_codec_init(&s->ic, index_tier_of(spec), s->idim, KV_SEED_LATENT, err)))) {
        state_free(s);
        return base_err_prefix(err, rc, "layer %d", li);
    }
    s->ratio = cp.ratio;
    const size_t rb = s->kc.row_bytes;
    s->win = take((size_t)2 * s->window, rb, &b, &ok);
    s->row = take((size_t)(s->dim > s->idim ? s->dim : s->idim), sizeof(float), &b, &ok);
    if (s->type != MODEL_V4_SLIDING) {
        s->cmem_bytes = model_v4_compress_state_floats(&cp) * sizeof(float);
        s->cmem = take(model_v4_compress_state_floats(&cp), sizeof(float), &b, &ok);
        s->entries = take((size_t)s->cap_entries, rb, &b, &ok);
        if (ok) model_v4_compress_state_init(&cp, &s->cs, s->cmem);
    }
    if (s->type == MODEL_V4_CSA) {
        s->icmem_bytes = model_v4_compress_state_floats(&icp) * sizeof(float);
        s->icmem = take(model_v4_compress_state_floats(&icp), sizeof(float), &b, &ok);
        s->ikeys = take((size_t)s->cap_entries, s->ic.row_bytes, &b, &ok);
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

static void *take_aligned(size_t bytes, size_t *total, int *ok)
{
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) *ok = 0;
    *total += bytes;
    return p;
}

int model_v4_bufs_reserve(struct v4_bufs *b, const struct model_config *c, const struct kv_layer_spec *spec, int n_ctx,
                          int n_threads, size_t *bytes, struct colibri_err *err)
{
    if (!b) return 0;
    int rows = 0, quantized = 0, csa = 0, keys = 0;
    size_t rb = (size_t)c->head_dim * sizeof(float);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        int type = c->v4_layer_type[l], r = c->compress_ratio[l], e = 0;
        if (type == MODEL_V4_HCA) e = n_ctx / r + 1;
        if (type == MODEL_V4_CSA) {
            e = n_ctx / r + 1 < c->index_topk ? n_ctx / r + 1 : c->index_topk, csa = 1;
            if (n_ctx / r + 1 > keys) keys = n_ctx / r + 1;
        }
        if (e > rows) rows = e;
        quantized |= spec && spec[l].tier != KV_TIER_F32;
        size_t lb = spec ? kv_tier_row_bytes(spec[l].tier, c->head_dim) : 0;
        if (lb > rb) rb = lb;
    }
    rows += c->sliding_window;
    size_t stride = model_v4_attn_work_bytes(c->head_dim, rows);
    if (csa && model_v4_index_work_bytes(c->index_n_heads, c->index_head_dim) > stride)
        stride = model_v4_index_work_bytes(c->index_n_heads, c->index_head_dim);
    void *old[] = { b->tile, b->work, b->ishared, b->score, b->qrot, b->sel, b->cwin };
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) free(old[i]);
    int ok = 1;
    size_t nt = (size_t)(b->n_threads = n_threads > 0 ? n_threads : 1), qdim = (size_t)c->index_n_heads * c->index_head_dim;
    b->max_rows = rows;
    b->tile_rows = quantized ? rows : 0;
    b->tile = quantized ? take(nt * rows * c->head_dim, sizeof(float), bytes, &ok) : NULL;
    b->work_stride = stride;
    b->work = take_aligned(stride * nt, bytes, &ok);
    b->ishared_stride = csa ? model_v4_index_shared_bytes(c->index_n_heads, c->index_head_dim) : 0;
    b->ishared = csa ? take_aligned(b->ishared_stride * nt, bytes, &ok) : NULL;
    b->score_cap = csa ? keys : 0;
    b->sel_cap = csa ? c->index_topk : 0;
    b->score = csa ? take(nt * keys, sizeof(float), bytes, &ok) : NULL;
    b->qrot = csa ? take(nt * qdim, sizeof(float), bytes, &ok) : NULL;
    b->sel = csa ? take(nt * c->index_topk, sizeof(int32_t), bytes, &ok) : NULL;
    b->cwin_bytes = b->rows > 1 ? (size_t)b->rows * c->sliding_window * rb : 0;
    b->cwin = b->cwin_bytes ? take(b->cwin_bytes, 1, bytes, &ok) : NULL;
    if (!ok)
        return base_err_set(err, COLIBRI_ENOMEM, "DeepSeek-V4 attention buffers for %d rows on %d threads: out of memory",
                            rows, b->n_threads);
    return 0;
}

void model_v4_bufs_free(struct v4_bufs *b)
{
    if (!b) return;
    void *all[] = { b->qa, b->q, b->kv, b->ckv, b->cgate, b->ikv, b->igate, b->iq, b->iw, b->att, b->mid,
                    b->tile, b->work, b->ishared, b->score, b->qrot, b->sel, b->cwin };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(b);
}

/* Rows first .. first + n of enc (row_bytes each) decoded into out [n][dim]. */
static void decode_rows(const struct kv_codec *kc, const uint8_t *enc, const int32_t *sel, int first, int n,
                        float *out, int n_threads)
{
    int nt = (int64_t)n * kc->dim >= MODEL_PAR_MIN_ELEMS && !omp_in_parallel() ? n_threads : 1;
    BASE_PAR_FOR_N(nt, for (int t = 0; t < n; t++) kv_codec_decode(kc, enc + (size_t)(sel ? sel[t] : first + t) *
                                                                            kc->row_bytes, out + (size_t)t * kc->dim););
}

/* Row r of the chunk (at position pos of state s) through the state, in
 * order: its window row, the compressors and their new entries; ri keeps
 * what its attention (row_attend) needs. cw: the segment's own copy of its
 * window (rows of positions cw_first ..), or NULL to read the ring. */
static int row_state(const struct v4_attn *a, const struct v4_compressor *cp, const struct v4_compressor *icp,
                     struct v4_bufs *vb, int r, int pos, struct v4_state *s, uint8_t *cw, int cw_first,
                     struct v4_row *ri, struct colibri_err *err)
{
    int H = a->n_heads, D = a->head_dim, Di = icp->head_dim, W = s->window;
    if (pos != s->pos)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "DeepSeek-V4 attention state is at position %d; position %d "
                            "cannot be computed (its window and compressors do not rewind)", s->pos, pos);
    if (!vb->work) return base_err_set(err, COLIBRI_EINVAL, "DeepSeek-V4 attention: buffers not reserved");
    float *q = vb->q + (size_t)r * H * D, *kv = vb->kv + (size_t)r * D;
    const size_t rb = s->kc.row_bytes;
    int rc, emitted;
    if ((rc = model_v4_attn_prep_q(a, pos, q, err)) || (rc = model_v4_attn_prep_kv(a, pos, kv, err))) return rc;
    uint8_t *slot = s->win + (size_t)(pos % W) * rb;
    kv_codec_encode(&s->kc, kv, slot);
    memcpy(slot + (size_t)W * rb, slot, rb);
    int n_win = pos + 1 < W ? pos + 1 : W;
    const uint8_t *win = s->win + (size_t)(pos + 1 <= W ? 0 : (pos + 1) % W) * rb;
    if (cw) {
        memcpy(cw + (size_t)(pos - cw_first) * rb, slot, rb);
        win = cw + (size_t)(pos + 1 - n_win - cw_first) * rb;
    }
    *ri = (struct v4_row){ s, pos, n_win, 0, 0, win };
    if (s->type != MODEL_V4_SLIDING) {
        int w2 = s->type == MODEL_V4_CSA ? 2 * D : D, n0 = s->cs.n_entries;
        if ((rc = model_v4_compress_push(cp, &s->cs, vb->ckv + (size_t)r * w2, vb->cgate + (size_t)r * w2, s->row,
                                         &emitted, err)))
            return rc;
        if (emitted) kv_codec_encode(&s->kc, s->row, s->entries + (size_t)n0 * rb);
        ri->n_ent = s->cs.n_entries;
    }
    if (s->type == MODEL_V4_CSA) {
        int n0 = s->ics.n_entries;
        if ((rc = model_v4_compress_push(icp, &s->ics, vb->ikv + (size_t)r * 2 * Di, vb->igate + (size_t)r * 2 * Di,
                                         s->row, &emitted, err)))
            return rc;
        if (emitted) kv_codec_encode(&s->ic, s->row, s->ikeys + (size_t)n0 * s->ic.row_bytes);
        ri->n_ikeys = s->ics.n_entries;
    }
    s->pos++;
    return 0;
}

/* Row r's attention into vb->att from what row_state left in ri: the
 * indexer's selection among the keys the row saw (CSA), then window +
 * entries. The entries and keys only grow, so the rows a later row of the
 * chunk added are past the counts this row reads. t: the calling thread's
 * buffers; n_threads: the threads this row may use itself. */
static int row_attend(const struct v4_attn *a, const struct v4_indexer *ix, struct v4_bufs *vb, int r,
                      const struct v4_row *ri, int t, int n_threads, struct colibri_err *err)
{
    const struct v4_state *s = ri->s;
    int H = a->n_heads, D = a->head_dim, Di = ix->head_dim, Hi = ix->n_heads, pos = ri->pos, n_win = ri->n_win;
    int rc, n_sel = s->type == MODEL_V4_HCA ? ri->n_ent : 0;
    const int32_t *sel = NULL;
    if (s->type == MODEL_V4_CSA) {
        if (ri->n_ikeys > vb->score_cap)
            return base_err_set(err, COLIBRI_ERANGE, "DeepSeek-V4 indexer at position %d: %d keys over the %d its "
                                "buffers were reserved for", pos, ri->n_ikeys, vb->score_cap);
        int32_t *tsel = vb->sel + (size_t)t * vb->sel_cap;
        if (ri->n_ikeys > 0 &&
            ((rc = model_v4_index_scores_mt(ix, pos, vb->iq + (size_t)r * Hi * Di, vb->iw + (size_t)r * Hi, &s->ic,
                                            s->ikeys, ri->n_ikeys, vb->qrot + (size_t)t * Hi * Di,
                                            vb->score + (size_t)t * vb->score_cap,
                                            (char *)vb->ishared + (size_t)t * vb->ishared_stride, vb->work,
                                            vb->work_stride, n_threads, err)) ||
             (rc = model_v4_indexer_select(ix, pos, vb->score + (size_t)t * vb->score_cap, ri->n_ikeys, tsel, &n_sel,
                                           err))))
            return rc;
        sel = tsel;
    }
    if (n_win + n_sel > vb->max_rows)
        return base_err_set(err, COLIBRI_ERANGE, "DeepSeek-V4 attention at position %d: %d rows over the %d its "
                            "buffers were reserved for", pos, n_win + n_sel, vb->max_rows);
    const float *win = (const float *)ri->win, *comp = (const float *)s->entries;
    if (s->kc.tier != KV_TIER_F32) {
        if (n_win + n_sel > vb->tile_rows)
            return base_err_set(err, COLIBRI_ERANGE, "DeepSeek-V4 attention: %d %s rows to decode, room for %d",
                                n_win + n_sel, kv_tier_name(s->kc.tier), vb->tile_rows);
        float *tile = vb->tile + (size_t)t * vb->tile_rows * D;
        decode_rows(&s->kc, ri->win, NULL, 0, n_win, tile, n_threads);
        decode_rows(&s->kc, s->entries, sel, 0, n_sel, tile + (size_t)n_win * D, n_threads);
        win = tile;
        comp = tile + (size_t)n_win * D;
        sel = NULL;
    }
    return model_v4_attn_query_mt(a, pos, vb->q + (size_t)r * H * D, win, n_win, comp, sel, n_sel,
                                  vb->att + (size_t)r * H * D, vb->work, vb->work_stride, n_threads, err);
}

/* The chunk's rows [0, k): each through its state in order (row_state),
 * then their attentions together, a row per thread (row_attend; a row's
 * bits do not depend on the threads). Rows of one state at consecutive
 * positions (a prefill's segment) read their windows from a copy of the
 * segment's window rows, as the ring keeps only the last window. */
static int chunk_attend(const struct part_run *pr, const struct v4_attn *a, const struct v4_compressor *cp,
                        const struct v4_compressor *icp, const struct v4_indexer *ix, struct v4_bufs *vb, int r0,
                        int k, int *g, struct colibri_err *err)
{
    int li = pr->li, rc = 0, W = a->window;
    size_t used = 0;
    for (int r = 0; r < k && !rc;) {
        int i = r0 + r;
        while (i >= pr->grp[*g].row0 + pr->grp[*g].n) (*g)++;
        const struct fwd_group *gr = &pr->grp[*g];
        struct v4_state *s = gr->st->mixer_state[li - gr->st->kv_layer0];
        int pos = gr->pos0 + (i - gr->row0), len = gr->row0 + gr->n - i < k - r ? gr->row0 + gr->n - i : k - r;
        uint8_t *cw = NULL;
        int first = pos + 1 < W ? 0 : pos + 1 - W;
        if (len > 1) {
            size_t rb = s->kc.row_bytes, need = (size_t)(pos - first + len) * rb;
            if (used + need > vb->cwin_bytes)
                return base_err_set(err, COLIBRI_ERANGE, "DeepSeek-V4 attention: %zu window bytes for a chunk, room "
                                    "for %zu", used + need, vb->cwin_bytes);
            cw = vb->cwin + used;
            used += need;
            if (pos > first) memcpy(cw, s->win + (size_t)(first % W) * rb, (size_t)(pos - first) * rb);
        }
        for (int j = 0; j < len && !rc; j++)
            rc = row_state(a, cp, icp, vb, r + j, pos + j, s, cw, first, &vb->rows_at[r + j], err);
        r += len;
    }
    if (rc) return rc;
    if (k == 1) return row_attend(a, ix, vb, 0, &vb->rows_at[0], 0, vb->n_threads, err);
    int rcs[V4_CHUNK];
    BASE_PAR_FOR_N(vb->n_threads, for (int r = 0; r < k; r++) rcs[r] =
                   row_attend(a, ix, vb, r, &vb->rows_at[r], omp_get_thread_num(), 1, &vb->errs[r]););
    for (int r = 0; r < k; r++)
        if (rcs[r]) {
            if (err) *err = vb->errs[r];
            return rcs[r];
        }
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
        if ((rc = chunk_attend(pr, &a, &cp, &icp, &ix, vb, r0, k, &g, err))) break;
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

/* A V4 layer's row is encoded whole by the layer's tier, its RoPE values
 * included (the RoPE precision the tier implies is accepted, another is
 * refused by name); a CSA layer's indexer keys take index_tier (f32 or fp8,
 * as DSA's), recorded as the spec's index-key part for state_new. */
static int v4_cache_parts(const struct model_config *c, int li, enum kv_tier index_tier, struct kv_layer_spec *spec,
                          struct colibri_err *err)
{
    if (!kv_tier_row_bytes(spec->tier, c->head_dim))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: DeepSeek-V4's rows of %d values cannot be kept in "
                            "the %s tier (its width rule)", li, c->head_dim, kv_tier_name(spec->tier));
    if (spec->rope != KV_ROPE_DEFAULT && spec->rope != kv_rope_default(spec->tier))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: DeepSeek-V4 keeps a row's RoPE values in the row's "
                            "tier (%s): RoPE precision %s is not implemented for it", li, kv_tier_name(spec->tier),
                            kv_rope_name(spec->rope));
    int have = -1;
    for (int i = 0; i < spec->n_extra; i++)
        if (spec->extra[i].kind == KV_PART_INDEX_KEY) have = i;
        else return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: DeepSeek-V4 rows take no extra part of kind %d",
                                 li, (int)spec->extra[i].kind);
    if (c->v4_layer_type[li] != MODEL_V4_CSA) {
        if (have >= 0)
            return base_err_set(err, COLIBRI_EINVAL, "kv layer %d: an index-key part on a layer without an indexer", li);
        return 0;
    }
    enum kv_tier t = have >= 0 ? spec->extra[have].tier : index_tier;
    if (t != KV_TIER_F32 && t != KV_TIER_FP8)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "layer %d: DeepSeek-V4 index keys in the %s tier (f32 or fp8)",
                            li, kv_tier_name(t));
    if (have < 0) spec->extra[spec->n_extra++] = (struct kv_part_spec){ KV_PART_INDEX_KEY, c->index_head_dim, t };
    return 0;
}

static void state_reset(void *p)
{
    struct v4_state *s = p;
    s->pos = 0;
    s->cs.n_buf = s->cs.n_entries = 0;
    s->ics.n_buf = s->ics.n_entries = 0;
}

/* ---- snapshots (parts.h snap_*): the window ring's rows, the open blocks
 * and the counts; the entries and indexer keys are append-only rows, kept in
 * place. Only the bytes per row of each array matter here. */

static size_t win_row_bytes(const struct v4_state *s) { return s->kc.row_bytes; }
static size_t entry_row_bytes(const struct v4_state *s) { return s->kc.row_bytes; }
static size_t ikey_row_bytes(const struct v4_state *s) { return s->ic.row_bytes; }

/* A snapshot's fixed part: the layout it was taken in, then the counts. */
struct v4_snap_hdr {
    int64_t type, window, dim, idim, win_row, cmem_bytes, icmem_bytes;
    int64_t pos, n_buf, n_entries, in_buf, in_entries;
};

static size_t snap_bytes(const void *p)
{
    const struct v4_state *s = p;
    return sizeof(struct v4_snap_hdr) + (size_t)s->window * win_row_bytes(s) + s->cmem_bytes + s->icmem_bytes;
}

static void snap_hdr(const struct v4_state *s, struct v4_snap_hdr *h)
{
    *h = (struct v4_snap_hdr){ s->type, s->window, s->dim, s->idim, (int64_t)win_row_bytes(s), (int64_t)s->cmem_bytes,
                               (int64_t)s->icmem_bytes, s->pos, s->cs.n_buf, s->cs.n_entries, s->ics.n_buf,
                               s->ics.n_entries };
}

/* The ring keeps each row twice (at p % window and p % window + window):
 * the snapshot holds the first copy. */
static void snap_save(const void *p, void *buf)
{
    const struct v4_state *s = p;
    struct v4_snap_hdr h;
    snap_hdr(s, &h);
    unsigned char *o = buf;
    memcpy(o, &h, sizeof h);
    o += sizeof h;
    size_t wb = (size_t)s->window * win_row_bytes(s);
    memcpy(o, s->win, wb);
    o += wb;
    if (s->cmem_bytes) memcpy(o, s->cmem, s->cmem_bytes);
    if (s->icmem_bytes) memcpy(o + s->cmem_bytes, s->icmem, s->icmem_bytes);
}

static int snap_restore(void *p, const void *buf, const void *rows_from, struct colibri_err *err)
{
    struct v4_state *s = p;
    const struct v4_state *from = rows_from;
    struct v4_snap_hdr h, want;
    memcpy(&h, buf, sizeof h);
    snap_hdr(s, &want);
    const char *bad = h.type != want.type ? "layer type" : h.window != want.window ? "sliding_window"
                    : h.dim != want.dim || h.win_row != want.win_row ? "head_dim"
                    : h.idim != want.idim ? "index_head_dim"
                    : h.cmem_bytes != want.cmem_bytes || h.icmem_bytes != want.icmem_bytes ? "compressor blocks"
                    : NULL;
    if (bad)
        return base_err_set(err, COLIBRI_EMISMATCH, "DeepSeek-V4 state snapshot: its %s differs from this layer's", bad);
    if (h.pos < 0 || h.n_entries < 0 || h.in_entries < 0 || h.n_entries > s->cap_entries ||
        h.in_entries > s->cap_entries || h.n_buf < 0 || h.in_buf < 0 ||
        (from && (from->dim != s->dim || from->idim != s->idim || from->kc.row_bytes != s->kc.row_bytes ||
                  from->ic.row_bytes != s->ic.row_bytes || h.n_entries > from->cap_entries ||
                  h.in_entries > from->cap_entries)))
        return base_err_set(err, COLIBRI_EINVAL, "DeepSeek-V4 state snapshot at position %lld: its %lld entries do "
                            "not fit this session's %d", (long long)h.pos, (long long)h.n_entries, s->cap_entries);
    const unsigned char *i = (const unsigned char *)buf + sizeof h;
    size_t wr = win_row_bytes(s), wb = (size_t)s->window * wr;
    memcpy(s->win, i, wb);
    memcpy((unsigned char *)s->win + wb, i, wb);
    i += wb;
    if (s->cmem_bytes) memcpy(s->cmem, i, s->cmem_bytes);
    if (s->icmem_bytes) memcpy(s->icmem, i + s->cmem_bytes, s->icmem_bytes);
    if (from && from != s) {
        if (h.n_entries) memcpy(s->entries, from->entries, (size_t)h.n_entries * entry_row_bytes(s));
        if (h.in_entries) memcpy(s->ikeys, from->ikeys, (size_t)h.in_entries * ikey_row_bytes(s));
    }
    s->pos = (int)h.pos;
    s->cs.n_buf = (int)h.n_buf;
    s->cs.n_entries = (int)h.n_entries;
    s->ics.n_buf = (int)h.in_buf;
    s->ics.n_entries = (int)h.in_entries;
    return 0;
}

static int state_rows(void *p, struct mixer_rows *rows, int max)
{
    struct v4_state *s = p;
    int n = 0;
    if (s->type != MODEL_V4_SLIDING && n < max)
        rows[n++] = (struct mixer_rows){ s->entries, entry_row_bytes(s), s->cs.n_entries, s->cap_entries, s->ratio };
    if (s->type == MODEL_V4_CSA && n < max)
        rows[n++] = (struct mixer_rows){ s->ikeys, ikey_row_bytes(s), s->ics.n_entries, s->cap_entries, s->ratio };
    return n;
}

const struct token_mixer model_mixer_v4 = { "v4", v4_load, v4_forward, v4_cache_parts, state_new, state_free,
                                            state_reset, snap_bytes, snap_save, snap_restore, state_rows };
