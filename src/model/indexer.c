/* model/indexer.c - the DSA lightning indexer (DeepseekV32Indexer.forward in
 * transformers models/deepseek_v32/modeling_deepseek_v32.py). */
#include "model/indexer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/linear.h"
#include "model/mlp.h"
#include "model/rope.h"

int model_indexer_load(struct indexer_weights *w, const struct model_config *c, int li,
                       const struct indexer_tensor_io *io, struct colibri_err *err)
{
    memset(w, 0, sizeof *w);
    if (c->dsa_kind == MODEL_DSA_NONE || !c->indexer_full[li]) return 0;
    const struct model_tensor_names *nm = &c->family->names;
    int nI = c->index_n_heads, dI = c->index_head_dim, hid = c->hidden_size, rc;
    char name[512];
#define NAME(rel) (snprintf(name, sizeof name, "model.layers.%d.%s", li, rel), name)
    if ((rc = io->mat(io->ctx, NAME(nm->indexer_wq_b), nI * dI, c->q_lora_rank, 0, &w->wq_b, err)) ||
        (rc = io->mat(io->ctx, NAME(nm->indexer_wk), dI, hid, 0, &w->wk, err)) ||
        (rc = io->mat(io->ctx, NAME(nm->indexer_weights_proj), nI, hid, 1, &w->weights_proj, err)) ||
        (rc = io->vec(io->ctx, NAME(nm->indexer_k_norm_weight), dI, &w->k_norm_w, err)) ||
        (rc = io->vec(io->ctx, NAME(nm->indexer_k_norm_bias), dI, &w->k_norm_b, err))) {
        model_indexer_free(w);
        return rc;
    }
#undef NAME
    w->present = 1;
    return 0;
}

void model_indexer_free(struct indexer_weights *w)
{
    quant_qtensor_free(&w->wq_b);
    quant_qtensor_free(&w->wk);
    quant_qtensor_free(&w->weights_proj);
    free(w->k_norm_w);
    free(w->k_norm_b);
    memset(w, 0, sizeof *w);
}

int64_t model_indexer_bytes(const struct indexer_weights *w, int64_t *small)
{
    if (!w->present) return 0;
    if (small) *small += 2 * 4 * (int64_t)w->wk.rows;
    return model_qtensor_bytes(&w->wq_b) + model_qtensor_bytes(&w->wk) + model_qtensor_bytes(&w->weights_proj);
}

int model_indexer_bufs_new(const struct model_config *c, int cap, struct indexer_bufs **out, struct colibri_err *err)
{
    *out = NULL;
    if (c->dsa_kind == MODEL_DSA_NONE) return 0;
    struct indexer_bufs *b = calloc(1, sizeof *b);
    if (!b) return base_err_set(err, COLIBRI_ENOMEM, "dsa indexer buffers");
    int nI = c->index_n_heads, dI = c->index_head_dim;
    b->cap = cap;
    b->k_max = c->index_topk;
    b->q = malloc((size_t)cap * nI * dI * sizeof *b->q);
    b->w = malloc((size_t)cap * nI * sizeof *b->w);
    b->k = malloc((size_t)cap * dI * sizeof *b->k);
    b->sel = malloc((size_t)cap * b->k_max * sizeof *b->sel);
    b->n_sel = calloc((size_t)cap, sizeof *b->n_sel);
    b->work = malloc(kv_index_scores_work(nI, dI) * sizeof *b->work);
    if (!b->q || !b->w || !b->k || !b->sel || !b->n_sel || !b->work) {
        model_indexer_bufs_free(b);
        return base_err_set(err, COLIBRI_ENOMEM, "dsa indexer buffers for %d rows (top %d)", cap, c->index_topk);
    }
    *out = b;
    return 0;
}

void model_indexer_bufs_free(struct indexer_bufs *b)
{
    if (!b) return;
    free(b->q);
    free(b->w);
    free(b->k);
    free(b->sel);
    free(b->n_sel);
    free(b->score);
    free(b->work);
    kv_index_sel_free(&b->topk);
    free(b);
}

int model_indexer_kv_layer(const struct model_config *c, int l, enum kv_tier tier, struct kv_layer_spec *s,
                           struct colibri_err *err)
{
    if (c->dsa_kind == MODEL_DSA_NONE || l >= c->num_hidden_layers) return 0;
    if (tier != KV_TIER_F32 && tier != KV_TIER_FP8)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "DSA index keys in the %s tier (f32 or fp8)", kv_tier_name(tier));
    int have = -1;
    for (int i = 0; i < s->n_extra; i++)
        if (s->extra[i].kind == KV_PART_INDEX_KEY) have = i;
    if (have >= 0 && !c->indexer_full[l])
        return base_err_set(err, COLIBRI_EINVAL, "kv layer %d: an index-key part on a layer without an indexer", l);
    if (have >= 0) {
        if (s->extra[have].dim != c->index_head_dim ||
            (s->extra[have].tier != KV_TIER_F32 && s->extra[have].tier != KV_TIER_FP8))
            return base_err_set(err, COLIBRI_EINVAL, "kv layer %d: index-key part of %d values in %s (want %d, "
                           "f32 or fp8)", l, s->extra[have].dim, kv_tier_name(s->extra[have].tier),
                           c->index_head_dim);
        return 0;
    }
    if (!c->indexer_full[l]) return 0;   /* a shared layer reads the last full layer's selection */
    if (s->n_extra >= KV_PARTS_MAX - 2)
        return base_err_set(err, COLIBRI_EINVAL, "kv layer %d: no room for the index-key part", l);
    s->extra[s->n_extra++] = (struct kv_part_spec){ KV_PART_INDEX_KEY, c->index_head_dim, tier };
    return 0;
}

void model_indexer_rope(float *x, int dr, int pos, const struct model_config *c)
{
    if (c->indexer_rope_interleaved) {
        model_rope_apply(x, dr, pos, c);
        return;
    }
    /* rotate_half: pair (i, i + dr/2) turns by frequency i */
    int half = dr / 2;
    for (int i = 0; i < half; i++) {
        float angle = (float)pos * c->inv_freq[i];
        float cs = (float)cos((double)angle) * c->rope_attention_factor;
        float sn = (float)sin((double)angle) * c->rope_attention_factor;
        float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * cs - x1 * sn;
        x[i + half] = x1 * cs + x0 * sn;
    }
}

/* nn.LayerNorm over d values: (x - mean) / sqrt(var + eps) * w + b, biased var. */
static void layer_norm(float *x, int d, const float *w, const float *b)
{
    float mean = 0.0f, var = 0.0f;
    for (int i = 0; i < d; i++) mean += x[i];
    mean /= (float)d;
    for (int i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)d;
    float inv = 1.0f / sqrtf(var + INDEXER_K_NORM_EPS);
    for (int i = 0; i < d; i++) x[i] = (x[i] - mean) * inv * w[i] + b[i];
}

static int grow_scores(struct indexer_bufs *b, int T, struct colibri_err *err)
{
    if ((size_t)T > b->score_cap) {
        size_t want = b->score_cap + b->score_cap / 2 > (size_t)T ? b->score_cap + b->score_cap / 2 : (size_t)T;
        float *p = malloc(want * sizeof *p);
        if (!p) return base_err_set(err, COLIBRI_ENOMEM, "dsa index scores for %zu positions", want);
        free(b->score);
        b->score = p;
        b->score_cap = want;
    }
    if (T > b->topk.max_rows) {
        int want = (int)b->score_cap;
        kv_index_sel_free(&b->topk);
        return kv_index_sel_init(&b->topk, want, err);
    }
    return 0;
}

int model_indexer_bufs_reserve(struct indexer_bufs *b, int n_ctx, struct colibri_err *err)
{
    return b ? grow_scores(b, n_ctx, err) : 0;
}

int model_indexer_project(const struct indexer_weights *w, const float *x, const float *q_resid, int n,
                          struct indexer_bufs *b, struct quant_scratch *s, struct colibri_err *err)
{
    if (!w->present) return 0;
    int rc = model_linear(&w->wq_b, q_resid, n, b->q, s, err);
    if (!rc) rc = model_linear(&w->wk, x, n, b->k, s, err);
    if (!rc) rc = model_linear(&w->weights_proj, x, n, b->w, s, err);
    return rc;
}

int model_indexer_select(const struct model_config *c, const struct indexer_weights *w, int li,
                         struct kv_cache *kv, int row0, int S, int pos0, struct indexer_bufs *b, int n_threads,
                         struct colibri_err *err)
{
    if (!w->present) return 0;   /* a shared layer keeps the last full layer's selection */
    if (row0 < 0 || S < 1 || row0 + S > b->cap)
        return base_err_set(err, COLIBRI_EINVAL, "dsa indexer: rows %d..%d outside its buffers (%d)", row0, row0 + S - 1,
                       b->cap);
    int nI = c->index_n_heads, dI = c->index_head_dim, dr = c->qk_rope_head_dim, rc = 0;
    const float wscale = 1.0f / sqrtf((float)nI), scale = 1.0f / sqrtf((float)dI);
    for (int s = 0; s < S && !rc; s++) {
        int row = row0 + s, pos = pos0 + s;
        float *k = b->k + (int64_t)row * dI;
        layer_norm(k, dI, w->k_norm_w, w->k_norm_b);
        model_indexer_rope(k, dr, pos, c);
        rc = kv_cache_write_part(kv, li, pos, KV_PART_INDEX_KEY, k, err);
        float *q = b->q + (int64_t)row * nI * dI, *wh = b->w + (int64_t)row * nI;
        for (int h = 0; h < nI; h++) {
            model_indexer_rope(q + (int64_t)h * dI, dr, pos, c);
            wh[h] *= wscale;
        }
    }
    /* every key of the rows is cached before a row scores the ones before it */
    for (int s = 0; s < S && !rc; s++) {
        int row = row0 + s, T = pos0 + s + 1;
        if ((rc = grow_scores(b, T, err))) break;
        rc = kv_index_scores(kv, li, T, nI, b->q + (int64_t)row * nI * dI, b->w + (int64_t)row * nI, scale, b->score,
                             n_threads, b->work, err);
        if (rc) break;
        rc = kv_index_topk(&b->topk, b->score, T, b->k_max, b->sel + (int64_t)row * b->k_max, err);
        if (rc >= 0) {
            b->n_sel[row] = rc;
            rc = 0;
        }
    }
    return rc;
}
