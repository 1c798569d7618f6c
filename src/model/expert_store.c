/* model/expert_store.c - the store-independent helpers and the resident store. */
#include "model/expert_store.h"

#include <stdlib.h>

#include "base/err.h"

void expert_store_get_stats(const struct expert_store *s, struct expert_store_stats *out)
{
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
}

void model_expert_note_prediction(struct expert_store *s, int routed, int predicted)
{
    atomic_fetch_add_explicit(&s->predicted, (uint64_t)routed, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->predicted_hits, (uint64_t)predicted, memory_order_relaxed);
}

int expert_store_check(const struct expert_store *s, int layer, int expert, struct colibri_err *err)
{
    if (layer < s->first_moe_layer || layer >= s->n_layers || expert < 0 || expert >= s->n_experts)
        return base_err_set(err, COLIBRI_EINVAL,
                            "expert store: layer %d expert %d outside layers [%d, %d) x %d experts", layer, expert,
                            s->first_moe_layer, s->n_layers, s->n_experts);
    return 0;
}

int64_t expert_store_total_bytes(const struct expert_store *s)
{
    int64_t b = 0;
    for (int l = s->first_moe_layer; l < s->n_layers; l++)
        for (int e = 0; e < s->n_experts; e++) b += s->ops->expert_bytes(s, l, e);
    return b;
}

int64_t expert_store_token_bytes(const struct expert_store *s, int k)
{
    int64_t b = 0;
    for (int l = s->first_moe_layer; l < s->n_layers && s->n_experts > 0; l++) {
        int64_t layer = 0;
        for (int e = 0; e < s->n_experts; e++) layer += s->ops->expert_bytes(s, l, e);
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
    .acquire = resident_acquire,
    .release = resident_release,
    .prefetch = resident_prefetch,
    .expert_bytes = resident_expert_bytes,
    .resident_bytes = resident_resident_bytes,
    .free = resident_free,
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

struct mlp_weights *expert_store_resident_slot(struct expert_store *s, int layer, int expert)
{
    if (s->ops != &RESIDENT_OPS || layer < s->first_moe_layer || layer >= s->n_layers || expert < 0 ||
        expert >= s->n_experts)
        return NULL;
    return resident_at(s, layer, expert);
}
