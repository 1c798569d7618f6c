/* dev/expert_trace.h - a routing trace and the cache policies replayed on
 * it (colibri trace).
 *
 * A trace holds, for each token forwarded alone and each MoE layer, the
 * experts the layer routed the token to (K, ascending) and, when the
 * next-layer prediction ran, the experts it named. model_trace_hook is the
 * expert store's route hook (expert_store.h) that records them.
 *
 * Replays: the acquisitions in the order the forward makes them (token by
 * token, layer by layer, experts ascending) against one cache of `budget`
 * experts shared by all layers, as the streamed store keeps. Policies:
 *   LRU      evict the least recently used;
 *   LFU      evict the least often used so far (ties: least recent);
 *   Belady   evict the one used again farthest in the future (the optimum
 *            for a cache that reads only on demand);
 *   ours     the streamed store's: LRU, with a hot set of budget/2 experts
 *            pinned (the most used in the first half of the trace, pinned
 *            from the middle on, as a state file from an earlier run would);
 *   ours+pf  ours with the next-layer prediction's experts read into the
 *            cache before the layer's routing is known (wrong ones cost
 *            reads and evictions).
 * Every replay runs over the whole trace; hit rates count the acquisitions
 * of the second half only (the first half warms the cache and teaches the
 * hot set). */
#ifndef COLIBRI_MODEL_EXPERT_TRACE_H
#define COLIBRI_MODEL_EXPERT_TRACE_H

#include <stdint.h>

#include "colibri.h"

struct expert_trace {
    int n_layers;               /* MoE layers */
    int first_moe_layer;
    int n_experts, k;
    int n_tokens, cap;          /* tokens recorded, room */
    int16_t *sel;               /* [cap][n_layers][k]; -1 when not recorded */
    int16_t *pred;              /* [cap][n_layers][k]; -1 when no prediction */
    int cur;                    /* token being recorded */
    int oom;                    /* a record did not fit (the trace is cut) */
};

int model_trace_init(struct expert_trace *t, int n_layers, int first_moe_layer, int n_experts, int k, int cap,
                      struct colibri_err *err);
void model_trace_free(struct expert_trace *t);
/* Starts the record of the next token (call before its forward). */
void model_trace_next_token(struct expert_trace *t);
/* The store's route hook: user is the trace; predicted 0 for the routing of
 * a forward of one token, 1 for a prediction. */
void model_trace_hook(void *user, int layer, const int *experts, int n, int predicted);

enum expert_policy { POLICY_LRU, POLICY_LFU, POLICY_BELADY, POLICY_OURS, POLICY_OURS_PF, POLICY_COUNT };
const char *model_trace_policy_name(enum expert_policy p);

struct expert_replay {
    uint64_t accesses, hits;    /* second half */
    uint64_t reads;             /* second half, prefetches included */
};
int model_trace_replay(const struct expert_trace *t, enum expert_policy p, int budget, struct expert_replay *out,
                        struct colibri_err *err);
/* The same with the hot set of ours / ours+pf chosen by another rule
 * (model_hotset_choose's max_pins and min_ratio); model_trace_replay uses the
 * store's (HOTSET_MAX_SHARE of the budget, HOTSET_MIN_RATIO). */
int model_trace_replay_hot(const struct expert_trace *t, enum expert_policy p, int budget, int max_pins,
                           double min_ratio, struct expert_replay *out, struct colibri_err *err);

/* Per MoE layer l: the mean share of a token's experts that the previous
 * token also routed to; the reuse distances in tokens (since the same
 * layer last routed to the expert) counted into buckets 1, 2, 3-4, 5-8,
 * 9-16, 17-64, >64 and first use; the prediction's recall (routed experts it
 * named / routed experts, over tokens that had one; -1 when none did). */
#define EXPERT_REUSE_BUCKETS 8
struct expert_layer_stats {
    double overlap, recall;
    uint64_t reuse[EXPERT_REUSE_BUCKETS];
};
void model_trace_layer_stats(const struct expert_trace *t, int l, struct expert_layer_stats *out);

#endif
