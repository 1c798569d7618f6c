/* model/expert_store.c - the store-independent helpers, the routed-expert
 * loop of every store holding its experts here, and the resident store. */
#include "model/expert_store.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"
#include "model/fwd_ops.h"
#include "model/linear.h"

int model_expert_batch_rows(const struct expert_batch *b, int e, int *tok, float *tw)
{
    int cnt = 0, K = b->K;
    for (int t = 0; t < b->n; t++)
        for (int k = 0; k < K; k++)
            if (b->idx[t * K + k] == e) {
                tok[cnt] = t;
                tw[cnt] = b->wts[t * K + k];
                cnt++;
            }
    return cnt;
}

void model_expert_batch_add(float *out, const int *tok, const float *tw, const float *res, int cnt, int hid)
{
    /* an expert's rows are distinct tokens, so the threads touch distinct
     * outputs, each still added to in expert order */
    BASE_PAR_FOR(!omp_in_parallel() && (int64_t)cnt * hid >= MODEL_PAR_MIN_ELEMS, for (int i = 0; i < cnt; i++) {
        float *o = out + (int64_t)tok[i] * hid;
        const float *r = res + (int64_t)i * hid;
        for (int d = 0; d < hid; d++) o[d] += tw[i] * r[d];
    });
}

int model_expert_local_start(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err)
{
    (void)err;
    expert_store_prefetch(s, b->layer, b->list, b->n_used);
    return 0;
}

int model_expert_local_finish(struct expert_store *s, const struct expert_batch *b, float *out,
                              struct colibri_err *err)
{
    const struct fwd_exec *ex = b->ex ? b->ex : &model_fwd_cpu;
    int hid = b->hid, rc = 0;
    int ahead = s->ops->prefetch && s->ops->cache_slots && b->n_used > s->ops->cache_slots(s);
    for (int j = 0; j < b->n_used && !rc; j++) {
        int e = b->list[j], cnt = model_expert_batch_rows(b, e, b->tok, b->tw);
        /* an expert every row routes to reads the rows where they are
         * (rows ascend, so they are tok[i] = i); others get theirs gathered */
        const float *in = b->x;
        if (cnt < b->n) {
            for (int i = 0; i < cnt; i++)
                memcpy(b->in + (int64_t)i * hid, b->x + (int64_t)b->tok[i] * hid, (size_t)hid * sizeof *b->x);
            in = b->in;
        }
        const struct mlp_weights *ew;
        if ((rc = expert_store_acquire(s, b->layer, e, &ew, err))) break;
        /* read-ahead: more experts than the cache holds, so the start's
         * prefetch left some unread; name the rest again while this one
         * computes, and the slots released since take them (the hook is not
         * told: it records routing, and this adds none) */
        if (ahead && j + 1 < b->n_used) s->ops->prefetch(s, b->layer, b->list + j + 1, b->n_used - j - 1);
        rc = model_mlp_run(ex, ew, in, cnt, b->res, b->g, b->u, b->qs, err);
        expert_store_release(s, b->layer, e);
        if (!rc) rc = ex->ops->expert_add(ex, out, b->tok, b->tw, b->res, cnt, hid, err);
    }
    return rc;
}

void expert_store_get_stats(const struct expert_store *store, struct expert_store_stats *out)
{
    const struct expert_store *s = expert_store_local(store);
    out->acquires = atomic_load(&s->acquires);
    out->prefetch_hints = atomic_load(&s->prefetch_hints);
    out->misses = atomic_load(&s->misses);
    out->bytes_read = atomic_load(&s->bytes_read);
    out->reads = atomic_load(&s->reads);
    out->prefetch_reads = atomic_load(&s->prefetch_reads);
    out->prefetch_used = atomic_load(&s->prefetch_used);
    out->waits = atomic_load(&s->waits);
    out->io_wait_ns = atomic_load(&s->io_wait_ns);
    out->predicted = atomic_load(&s->predicted);
    out->predicted_hits = atomic_load(&s->predicted_hits);
    out->predict_steps = atomic_load(&s->predict_steps);
    out->predict_withheld = atomic_load(&s->predict_withheld);
}

static struct expert_layer_counts *layer_counts(const struct expert_store *s, int layer)
{
    return s->layer_counts && layer >= 0 && layer < s->n_layers ? &s->layer_counts[layer] : NULL;
}

void model_expert_note_predict_step(struct expert_store *store, int layer, int withheld)
{
    struct expert_store *s = expert_store_local(store);
    struct expert_layer_counts *lc = layer_counts(s, layer);
    atomic_fetch_add_explicit(&s->predict_steps, 1, memory_order_relaxed);
    if (withheld) atomic_fetch_add_explicit(&s->predict_withheld, 1, memory_order_relaxed);
    if (lc) {
        atomic_fetch_add_explicit(&lc->predict_steps, 1, memory_order_relaxed);
        if (withheld) atomic_fetch_add_explicit(&lc->predict_withheld, 1, memory_order_relaxed);
    }
}

void model_expert_note_prediction(struct expert_store *store, int layer, int routed, int predicted)
{
    struct expert_store *s = expert_store_local(store);
    struct expert_layer_counts *lc = layer_counts(s, layer);
    atomic_fetch_add_explicit(&s->predicted, (uint64_t)routed, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->predicted_hits, (uint64_t)predicted, memory_order_relaxed);
    if (lc) {
        atomic_fetch_add_explicit(&lc->predicted, (uint64_t)routed, memory_order_relaxed);
        atomic_fetch_add_explicit(&lc->predicted_hits, (uint64_t)predicted, memory_order_relaxed);
    }
}

void model_expert_layer_stats(const struct expert_store *store, int layer, struct expert_layer_reads *out)
{
    const struct expert_layer_counts *lc = layer_counts(expert_store_local(store), layer);
    *out = (struct expert_layer_reads){ 0 };
    if (!lc) return;
    for (int w = 0; w < EXPERT_READ_WHYS; w++) {
        out->reads[w] = atomic_load(&lc->reads[w]);
        out->bytes[w] = atomic_load(&lc->bytes[w]);
        out->used[w] = atomic_load(&lc->used[w]);
    }
    out->predicted = atomic_load(&lc->predicted);
    out->predicted_hits = atomic_load(&lc->predicted_hits);
    out->predict_steps = atomic_load(&lc->predict_steps);
    out->predict_withheld = atomic_load(&lc->predict_withheld);
}

int expert_store_check(const struct expert_store *s, int layer, int expert, struct colibri_err *err)
{
    if (layer < s->first_moe_layer || layer >= s->n_layers || expert < 0 || expert >= s->n_experts)
        return base_err_set(err, COLIBRI_EINVAL,
                            "expert store: layer %d expert %d outside layers [%d, %d) x %d experts", layer, expert,
                            s->first_moe_layer, s->n_layers, s->n_experts);
    return 0;
}

int64_t model_expert_bytes(const struct expert_store *store, int layer, int expert)
{
    const struct expert_store *s = expert_store_local(store);
    return s->ops->expert_bytes(s, layer, expert);
}

int64_t model_expert_resident_bytes(const struct expert_store *store)
{
    const struct expert_store *s = expert_store_local(store);
    return s->ops->resident_bytes(s);
}

int64_t expert_store_total_bytes(const struct expert_store *s)
{
    int64_t b = 0;
    for (int l = s->first_moe_layer; l < s->n_layers; l++)
        for (int e = 0; e < s->n_experts; e++) b += model_expert_bytes(s, l, e);
    return b;
}

int64_t expert_store_token_bytes(const struct expert_store *s, int k)
{
    int64_t b = 0;
    for (int l = s->first_moe_layer; l < s->n_layers && s->n_experts > 0; l++) {
        int64_t layer = 0;
        for (int e = 0; e < s->n_experts; e++) layer += model_expert_bytes(s, l, e);
        b += layer / s->n_experts * k;
    }
    return b;
}

void expert_store_free(struct expert_store *s)
{
    if (s) s->ops->free(s);
}

struct resident_store {
    struct expert_store base;   /* first: the store is cast to it */
    struct mlp_weights *w;      /* [(n_layers - first_moe_layer) * n_experts] */
};

static struct mlp_weights *resident_at(const struct expert_store *s, int layer, int expert)
{
    const struct resident_store *r = (const struct resident_store *)s;
    return &r->w[(int64_t)(layer - s->first_moe_layer) * s->n_experts + expert];
}

static int resident_acquire(struct expert_store *s, int layer, int expert, const struct mlp_weights **out,
                            struct colibri_err *err)
{
    int rc = expert_store_check(s, layer, expert, err);
    if (rc) return rc;
    atomic_fetch_add_explicit(&s->acquires, 1, memory_order_relaxed);
    *out = resident_at(s, layer, expert);
    return 0;
}

static void resident_release(struct expert_store *s, int layer, int expert) { (void)s; (void)layer; (void)expert; }

static void resident_prefetch(struct expert_store *s, int layer, const int *experts, int n)
{
    (void)layer; (void)experts;
    atomic_fetch_add_explicit(&s->prefetch_hints, (uint64_t)n, memory_order_relaxed);
}

static int64_t resident_expert_bytes(const struct expert_store *s, int layer, int expert)
{
    return model_mlp_bytes(resident_at(s, layer, expert));
}

static int64_t resident_resident_bytes(const struct expert_store *s) { return expert_store_total_bytes(s); }

static struct mlp_weights *resident_slot(struct expert_store *s, int layer, int expert)
{
    if (layer < s->first_moe_layer || layer >= s->n_layers || expert < 0 || expert >= s->n_experts) return NULL;
    return resident_at(s, layer, expert);
}

static void resident_free(struct expert_store *s)
{
    struct resident_store *r = (struct resident_store *)s;
    int64_t n = (int64_t)(s->n_layers - s->first_moe_layer) * s->n_experts;
    for (int64_t i = 0; i < n; i++) {
        quant_qtensor_free(&r->w[i].gate);
        quant_qtensor_free(&r->w[i].up);
        quant_qtensor_free(&r->w[i].down);
    }
    free(r->w);
    free(r);
}

static const struct expert_store_ops RESIDENT_OPS = {
    .name = "resident",
    .start = model_expert_local_start,
    .finish = model_expert_local_finish,
    .free = resident_free,
    .acquire = resident_acquire,
    .release = resident_release,
    .prefetch = resident_prefetch,
    .expert_bytes = resident_expert_bytes,
    .resident_bytes = resident_resident_bytes,
    .slot = resident_slot,
};

int expert_store_resident_new(int n_layers, int first_moe_layer, int n_experts, struct expert_store **out,
                              struct colibri_err *err)
{
    if (first_moe_layer < 0 || first_moe_layer > n_layers || n_experts < 0)
        return base_err_set(err, COLIBRI_EINVAL, "expert store: bad shape (%d layers from %d, %d experts)", n_layers,
                       first_moe_layer, n_experts);
    struct resident_store *r = calloc(1, sizeof *r);
    int64_t n = (int64_t)(n_layers - first_moe_layer) * n_experts;
    if (r && n > 0) r->w = calloc((size_t)n, sizeof *r->w);
    if (!r || (n > 0 && !r->w)) {
        free(r);
        return base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory for %lld experts", (long long)n);
    }
    r->base.ops = &RESIDENT_OPS;
    r->base.n_layers = n_layers;
    r->base.first_moe_layer = first_moe_layer;
    r->base.n_experts = n_experts;
    *out = &r->base;
    return 0;
}

struct mlp_weights *expert_store_resident_slot(struct expert_store *store, int layer, int expert)
{
    struct expert_store *s = expert_store_local(store);
    return s->ops->slot ? s->ops->slot(s, layer, expert) : NULL;
}
