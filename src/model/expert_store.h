/* model/expert_store.h - the routed-expert seam: where an MoE layer's routed
 * experts run and where their weights come from.
 *
 * moe_forward (model/moe.h) routes a batch, then hands the store the layer's
 * routed batch (struct expert_batch) in two calls and knows nothing else:
 *     start(batch)        as soon as routing is known, before the shared experts
 *     -- the shared experts write their output into out --
 *     finish(batch, out)  adds every routed expert's output rows into out
 * finish's sum is fixed: for each expert of batch.list in ascending order,
 * model_expert_batch_add(out, its rows (model_expert_batch_rows), their
 * weights, its SwiGLU output of those rows). So the output never depends on
 * which store ran the experts nor on its state (what is cached, what was
 * prefetched, which rank ran what). After a failed start finish is not
 * called; after a successful one it always is (even when the shared experts
 * failed), so a store may hold a lock or requests in flight between them.
 *
 * A store that holds its experts in this process runs start/finish with
 * model_expert_local_start/_finish (one loop for all of them) over its
 * per-expert calls:
 *     prefetch(layer, experts routed to, n)     as soon as routing is known
 *     for each routed expert e, ascending:
 *         acquire(layer, e) -> weights; the expert's matmuls; release(layer, e)
 * The weights returned by acquire stay valid and unchanged until the matching
 * release. prefetch is a hint: a store may ignore it, and acquire must work
 * without it. Other code (an MPI rank serving experts, tests) may call
 * acquire/release/prefetch of such a store directly.
 *
 * Implementations (a vtable, as Redis does for its variations):
 *   - resident (expert_store.c): every expert in memory (owned or borrowed
 *     from the mapped checkpoint), filled by the loader; acquire never fails.
 *   - streamed (expert_store_stream.c, model/expert_store_stream.h): a cache
 *     under a RAM budget read from disk.
 *   - mpi (mpi/rank0_mpi.c): rank 0 of an MPI job; start sends each rank
 *     the rows its share of the experts needs, finish runs rank 0's share on
 *     the store it wraps (its `local` store) and adds every expert's rows.
 *   A device store (experts in VRAM) would be one more.
 *
 * A store that runs experts elsewhere has a `local` store, the one holding
 * this process's experts: sizes, statistics, the name reported and the
 * optional calls are that store's (through expert_store_local); its own
 * acquire/release/prefetch/expert_bytes/resident_bytes are NULL.
 *
 * Sizes: the store knows each expert's bytes; model_bytes() (model.h) asks it
 * for the routed-expert total and the expected bytes one token reads
 * (num_experts_per_tok experts of average size per MoE layer).
 *
 * Threads: every call may come from several threads at once (sessions
 * forwarding concurrently); statistics are atomic. */
#ifndef COLIBRI_MODEL_EXPERT_STORE_H
#define COLIBRI_MODEL_EXPERT_STORE_H

#include <stdatomic.h>
#include <stdint.h>

#include "colibri.h"
#include "model/mlp.h"

struct fwd_exec;

struct expert_store;

/* One MoE layer's routed batch. list holds the n_used experts any row
 * routes to, in ascending order; idx/wts are [n][K]. The scratch is the
 * session's, for a store running experts here: in and res [n][hid], g and u
 * [n][moe_intermediate_size], tok and tw [n], qs the products' working
 * memory. Valid until finish returns. */
struct expert_batch {
    int layer, n, K, hid;
    const float *x;             /* [n][hid]: the MoE block's input rows */
    const int *idx;
    const float *wts;
    const int *list;
    int n_used;
    float *in, *res, *g, *u;
    int *tok;
    float *tw;
    struct quant_scratch *qs;
    /* runs the experts' products and adds (model/fwd_ops.h; NULL: the CPU):
     * x, in, res, g, u are its buffers */
    const struct fwd_exec *ex;
};

/* The rows of a batch routed to expert e, in row order: tok[i] the row,
 * tw[i] its routing weight; returns the count (tok, tw hold n entries). */
int model_expert_batch_rows(const struct expert_batch *b, int e, int *tok, float *tw);

/* out[tok[i]] += tw[i] * res[i] for i < cnt, element by element (res is
 * [cnt][hid]): the one place a routed expert's output is summed in. */
void model_expert_batch_add(float *out, const int *tok, const float *tw, const float *res, int cnt, int hid);

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
    uint64_t predict_steps;     /* layer steps that computed a next-layer prediction */
    uint64_t predict_withheld;  /* of those, whose reads were withheld (model/moe.h: the precision gate) */
};

/* Why a streamed expert was read: an acquire found it missing, the layer's
 * routing named it (prefetch), or the previous layer's prediction did. */
enum expert_read_why { EXPERT_READ_MISS, EXPERT_READ_ROUTED, EXPERT_READ_PREDICTED, EXPERT_READ_WHYS };

/* One MoE layer's reads by why: experts read, bytes read (aligned ranges, as
 * bytes_read counts them), and how many of those reads were acquired before
 * their slot was reused (a read never acquired is a wasted read); and the
 * layer's next-layer predictions (model/moe.h): routed experts and how many
 * were predicted, steps that predicted and how many withheld their reads. */
struct expert_layer_reads {
    uint64_t reads[EXPERT_READ_WHYS], bytes[EXPERT_READ_WHYS], used[EXPERT_READ_WHYS];
    uint64_t predicted, predicted_hits, predict_steps, predict_withheld;
};
struct expert_layer_counts {
    _Atomic uint64_t reads[EXPERT_READ_WHYS], bytes[EXPERT_READ_WHYS], used[EXPERT_READ_WHYS];
    _Atomic uint64_t predicted, predicted_hits, predict_steps, predict_withheld;
};

struct expert_store_ops {
    const char *name;
    /* ---- the seam (every store) ---- */
    int (*start)(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err);
    int (*finish)(struct expert_store *s, const struct expert_batch *b, float *out, struct colibri_err *err);
    /* Experts a forward may acquire soon (a prediction): a store that reads
     * may start reading them, after anything prefetch named. NULL when the
     * store gains nothing from it (the caller then skips the prediction). */
    void (*predict)(struct expert_store *s, int layer, const int *experts, int n);
    void (*free)(struct expert_store *s);
    /* ---- a store holding its experts here (NULL in one with `local`) ---- */
    int (*acquire)(struct expert_store *s, int layer, int expert, const struct mlp_weights **out,
                   struct colibri_err *err);
    void (*release)(struct expert_store *s, int layer, int expert);
    void (*prefetch)(struct expert_store *s, int layer, const int *experts, int n);
    /* Bytes of one expert (data + scales). */
    int64_t (*expert_bytes)(const struct expert_store *s, int layer, int expert);
    /* Bytes the store keeps in memory at most: every expert when resident,
     * the cache when streamed. */
    int64_t (*resident_bytes)(const struct expert_store *s);
    /* ---- optional (NULL: not supported) ---- */
    /* The store holding this process's experts, for a store that runs some elsewhere. */
    struct expert_store *(*local)(const struct expert_store *s);
    /* The in-memory weights of (layer, expert) for the loader to fill
     * (expert_store_resident_slot); NULL outside the store. */
    struct mlp_weights *(*slot)(struct expert_store *s, int layer, int expert);
    /* A cache of experts (model/expert_store_stream.h says what each does). */
    int (*cache_slots)(const struct expert_store *s);
    int (*uses)(struct expert_store *s, uint32_t *out);
    int (*pin)(struct expert_store *s, const uint32_t *counts);
    int (*ranges)(const struct expert_store *s, int layer, int expert);
    int (*direct)(const struct expert_store *s);
};

struct expert_store {
    const struct expert_store_ops *ops;
    int n_layers;               /* model layers (dense ones hold no experts) */
    int first_moe_layer;
    int n_experts;
    _Atomic uint64_t acquires, prefetch_hints, misses, bytes_read;
    _Atomic uint64_t reads, prefetch_reads, prefetch_used, waits, io_wait_ns, predicted, predicted_hits;
    _Atomic uint64_t predict_steps, predict_withheld;
    /* When set, told every prefetch (predicted 0) and predict (1) call before
     * the store acts on it: a recorder of routing (colibri trace). Set and
     * cleared only while no forward runs. */
    void (*route_hook)(void *user, int layer, const int *experts, int n, int predicted);
    void *route_user;
    /* [n_layers]: per-layer counts, kept by a store that reads (NULL: none) */
    struct expert_layer_counts *layer_counts;
};

static inline int expert_store_start(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err)
{
    return s->ops->start(s, b, err);
}
static inline int expert_store_finish(struct expert_store *s, const struct expert_batch *b, float *out,
                                      struct colibri_err *err)
{
    return s->ops->finish(s, b, out, err);
}

/* start and finish of a store holding its experts here: the prefetch hint
 * for b's experts; then per expert of b.list ascending, its rows gathered,
 * acquire, SwiGLU, release, model_expert_batch_add. When b names more
 * experts than the store's cache has slots, each acquire is followed by a
 * prefetch of the experts after it (read-ahead into the slots released so
 * far; the route hook is not told). finish fails with the
 * first acquire's or product's error (the experts before it are added). */
int model_expert_local_start(struct expert_store *s, const struct expert_batch *b, struct colibri_err *err);
int model_expert_local_finish(struct expert_store *s, const struct expert_batch *b, float *out,
                              struct colibri_err *err);

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
/* A prediction: all of it (experts[n]) goes to the route hook, the part
 * model/moe.h's precision gate lets read (read[n_read]) to the store. */
static inline void expert_store_predict(struct expert_store *s, int layer, const int *experts, int n,
                                        const int *read, int n_read)
{
    if (s->route_hook) s->route_hook(s->route_user, layer, experts, n, 1);
    if (n_read && s->ops->predict) s->ops->predict(s, layer, read, n_read);
}

/* The store holding this process's experts: s, or its `local` store. */
static inline struct expert_store *expert_store_local(const struct expert_store *s)
{
    return s->ops->local ? s->ops->local(s) : (struct expert_store *)s;
}

/* Counts a step of layer `layer` that computed its prediction, and whether
 * its reads were withheld. */
void model_expert_note_predict_step(struct expert_store *s, int layer, int withheld);
/* Counts a layer's routed experts and how many of them its prediction named. */
void model_expert_note_prediction(struct expert_store *s, int layer, int routed, int predicted);

void expert_store_get_stats(const struct expert_store *s, struct expert_store_stats *out);
/* Layer `layer`'s counts (zeros for a store that keeps none or a layer
 * outside [0, n_layers)). */
void model_expert_layer_stats(const struct expert_store *s, int layer, struct expert_layer_reads *out);
/* 0 when (layer, expert) names an expert of the store, else COLIBRI_EINVAL
 * naming both and the store's ranges (for implementations' acquire). */
int expert_store_check(const struct expert_store *s, int layer, int expert, struct colibri_err *err);
int64_t model_expert_bytes(const struct expert_store *s, int layer, int expert);
int64_t model_expert_resident_bytes(const struct expert_store *s);
/* Sum over every MoE layer and expert of expert_bytes. */
int64_t expert_store_total_bytes(const struct expert_store *s);
/* Expected routed-expert bytes one token reads: per MoE layer, k times the
 * layer's average expert size. */
int64_t expert_store_token_bytes(const struct expert_store *s, int k);
void expert_store_free(struct expert_store *s);

/* ---- resident store ---- */

/* An empty resident store for layers [first_moe_layer, n_layers) with
 * n_experts each; the loader fills expert_store_resident_slot(). */
int expert_store_resident_new(int n_layers, int first_moe_layer, int n_experts, struct expert_store **out,
                              struct colibri_err *err);
/* The slot of (layer, expert) to load weights into (a store with the `slot`
 * call: resident; NULL for others); the store owns what is loaded there and
 * frees it with the store. */
struct mlp_weights *expert_store_resident_slot(struct expert_store *s, int layer, int expert);

#endif
