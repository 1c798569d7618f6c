/* model/expert_store.h - where the MoE layer gets a routed expert's weights.
 *
 * The MoE layer never indexes an expert array: it asks the store. The call
 * pattern per layer and forward is
 *     prefetch(layer, experts routed to, n)     as soon as routing is known
 *     for each routed expert e:
 *         acquire(layer, e) -> weights; the expert's matmuls; release(layer, e)
 * The weights returned by acquire stay valid and unchanged until the matching
 * release. prefetch is a hint: a store may ignore it, and acquire must work
 * without it.
 *
 * Implementations (a vtable, as Redis does for its variations):
 *   - resident: every expert in memory (owned or borrowed from the mapped
 *     checkpoint), filled by the loader; acquire never fails.
 *   - streamed (later): a cache under a RAM budget read from disk.
 *   - remote (later): experts owned by other ranks.
 * Invariant: the model's output never depends on which store is used or on
 * its state (what is cached, what was prefetched).
 *
 * Sizes: the store knows each expert's bytes; model_bytes() (model.h) asks it
 * for the routed-expert total and the expected bytes one token reads
 * (num_experts_per_tok experts of average size per MoE layer).
 *
 * Threads: acquire/release/prefetch may be called from several threads at
 * once (sessions forwarding concurrently); statistics are atomic. */
#ifndef COLIBRI_MODEL_EXPERT_STORE_H
#define COLIBRI_MODEL_EXPERT_STORE_H

#include <stdatomic.h>
#include <stdint.h>

#include "colibri.h"
#include "model/mlp.h"

struct expert_store;

struct expert_store_stats {
    uint64_t acquires;          /* acquire calls */
    uint64_t prefetch_hints;    /* experts named in prefetch calls */
    uint64_t misses;            /* acquires that had to read the expert (0 when resident) */
    uint64_t bytes_read;        /* bytes read from storage by the store (alignment and gaps included) */
    uint64_t reads;             /* experts read: misses plus prefetch_reads */
    uint64_t prefetch_reads;    /* experts read because a prefetch or predict named them */
    uint64_t prefetch_used;     /* of those, acquired before being evicted */
    uint64_t waits;             /* acquires that waited for a read already in flight */
    uint64_t io_wait_ns;        /* time acquires spent waiting for reads */
    uint64_t predicted;         /* routed experts of layers that had a prediction */
    uint64_t predicted_hits;    /* of those, named by the prediction */
};

struct expert_store_ops {
    const char *name;
    int (*acquire)(struct expert_store *s, int layer, int expert, const struct mlp_weights **out,
                   struct colibri_err *err);
    void (*release)(struct expert_store *s, int layer, int expert);
    void (*prefetch)(struct expert_store *s, int layer, const int *experts, int n);
    /* Experts a forward may acquire soon (a prediction): a store that reads
     * may start reading them, after anything prefetch named. NULL when the
     * store gains nothing from it (the caller then skips the prediction). */
    void (*predict)(struct expert_store *s, int layer, const int *experts, int n);
    /* Bytes of one expert (data + scales). */
    int64_t (*expert_bytes)(const struct expert_store *s, int layer, int expert);
    /* Bytes the store keeps in memory at most: every expert when resident,
     * the cache when streamed. */
    int64_t (*resident_bytes)(const struct expert_store *s);
    void (*free)(struct expert_store *s);
};

struct expert_store {
    const struct expert_store_ops *ops;
    int n_layers;               /* model layers (dense ones hold no experts) */
    int first_moe_layer;
    int n_experts;
    _Atomic uint64_t acquires, prefetch_hints, misses, bytes_read;
    _Atomic uint64_t reads, prefetch_reads, prefetch_used, waits, io_wait_ns, predicted, predicted_hits;
    /* When set, told every prefetch (predicted 0) and predict (1) call before
     * the store acts on it: a recorder of routing (colibri trace). Set and
     * cleared only while no forward runs. */
    void (*route_hook)(void *user, int layer, const int *experts, int n, int predicted);
    void *route_user;
};

static inline int expert_store_acquire(struct expert_store *s, int layer, int expert,
                                       const struct mlp_weights **out, struct colibri_err *err)
{
    return s->ops->acquire(s, layer, expert, out, err);
}
static inline void expert_store_release(struct expert_store *s, int layer, int expert)
{
    s->ops->release(s, layer, expert);
}
static inline void expert_store_prefetch(struct expert_store *s, int layer, const int *experts, int n)
{
    if (s->route_hook) s->route_hook(s->route_user, layer, experts, n, 0);
    s->ops->prefetch(s, layer, experts, n);
}

static inline int expert_store_predicts(const struct expert_store *s)
{
    return s->ops->predict != NULL || s->route_hook != NULL;
}
static inline void expert_store_predict(struct expert_store *s, int layer, const int *experts, int n)
{
    if (s->route_hook) s->route_hook(s->route_user, layer, experts, n, 1);
    if (s->ops->predict) s->ops->predict(s, layer, experts, n);
}
/* Counts a layer's routed experts and how many of them its prediction named. */
void model_expert_note_prediction(struct expert_store *s, int routed, int predicted);

void expert_store_get_stats(const struct expert_store *s, struct expert_store_stats *out);
/* 0 when (layer, expert) names an expert of the store, else COLIBRI_EINVAL
 * naming both and the store's ranges (for implementations' acquire). */
int expert_store_check(const struct expert_store *s, int layer, int expert, struct colibri_err *err);
/* Sum over every MoE layer and expert of expert_bytes. */
int64_t expert_store_total_bytes(const struct expert_store *s);
/* Expected routed-expert bytes one token reads: per MoE layer, k times the
 * layer's average expert size. */
int64_t expert_store_token_bytes(const struct expert_store *s, int k);
void expert_store_free(struct expert_store *s);

/* ---- streamed store (expert_store_stream.c) ---- */

/* A store that reads each expert from the checkpoint's files on demand, into
 * a cache of at most `budget` bytes (slots of the largest expert's size,
 * alignment included), least recently used slot evicted first. Built from a resident store whose
 * experts are borrowed from the mapping of st (kept as stored): their
 * formats, shapes and file extents; the resident store can be freed after.
 * EINVAL when fewer than min_slots experts fit, naming the minimum;
 * EUNSUPPORTED for experts converted at load. Reads run on reader threads
 * (model/expert_io.h), many in flight, O_DIRECT where the file system allows;
 * an acquire waits only for its own expert. */
struct st_set;
int expert_store_stream_new(const struct st_set *st, const struct expert_store *resident, int64_t budget,
                            int min_slots, struct expert_store **out, struct colibri_err *err);
/* Cache slots of a streamed store (0 for other stores). */
int expert_store_stream_slots(const struct expert_store *s);
/* Copies each expert's acquisition count (layer-major, [(n_layers -
 * first_moe_layer) * n_experts]) to out; returns that count, 0 for other
 * stores. */
int model_expert_stream_uses(struct expert_store *s, uint32_t *out);
/* The hot set: pins the most used experts by counts (same indexing; at most
 * half the slots, only counts > 0); a pinned slot is evicted only when no
 * other is evictable. Returns how many are pinned (0 for other stores). */
int model_expert_stream_pin(struct expert_store *s, const uint32_t *counts);
/* The reads (ranges) one expert of a streamed store takes: 1 when its
 * tensors are one extent of one file (colibri's containers); 0 for other
 * stores or an expert outside the store. */
int model_expert_stream_ranges(const struct expert_store *s, int layer, int expert);
/* 1 when a streamed store reads with O_DIRECT (its first file), else 0. */
int model_expert_stream_direct(const struct expert_store *s);

/* ---- resident store ---- */

/* An empty resident store for layers [first_moe_layer, n_layers) with
 * n_experts each; the loader fills expert_store_resident_slot(). */
int expert_store_resident_new(int n_layers, int first_moe_layer, int n_experts, struct expert_store **out,
                              struct colibri_err *err);
/* The slot of (layer, expert) to load weights into (resident store only);
 * the store owns what is loaded there and frees it with the store. */
struct mlp_weights *expert_store_resident_slot(struct expert_store *s, int layer, int expert);

#endif
