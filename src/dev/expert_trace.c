/* dev/expert_trace.c - routing traces and policy replays (contract in
 * expert_trace.h). */
#include "dev/expert_trace.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/expert_hotset.h"

int model_trace_init(struct expert_trace *t, int n_layers, int first_moe_layer, int n_experts, int k, int cap,
                      struct colibri_err *err)
{
    memset(t, 0, sizeof *t);
    if (n_layers < 1 || n_experts < 1 || n_experts > 32767 || k < 1 || k > n_experts || cap < 1)
        return base_err_set(err, COLIBRI_EINVAL, "trace: %d MoE layers x %d experts (top-%d), %d tokens: nothing to "
                            "trace", n_layers, n_experts, k, cap);
    size_t n = (size_t)cap * n_layers * k;
    t->sel = malloc(n * sizeof *t->sel);
    t->pred = malloc(n * sizeof *t->pred);
    if (!t->sel || !t->pred) {
        model_trace_free(t);
        return base_err_set(err, COLIBRI_ENOMEM, "trace: out of memory for %d tokens", cap);
    }
    memset(t->sel, 0xff, n * sizeof *t->sel);
    memset(t->pred, 0xff, n * sizeof *t->pred);
    t->n_layers = n_layers;
    t->first_moe_layer = first_moe_layer;
    t->n_experts = n_experts;
    t->k = k;
    t->cap = cap;
    t->cur = -1;
    return 0;
}

void model_trace_free(struct expert_trace *t)
{
    free(t->sel);
    free(t->pred);
    memset(t, 0, sizeof *t);
}

void model_trace_next_token(struct expert_trace *t)
{
    if (t->cur + 1 >= t->cap) {
        t->oom = 1;
        return;
    }
    t->cur++;
    t->n_tokens = t->cur + 1;
}

void model_trace_hook(void *user, int layer, const int *experts, int n, int predicted)
{
    struct expert_trace *t = user;
    int l = layer - t->first_moe_layer;
    if (t->cur < 0 || l < 0 || l >= t->n_layers) return;
    int16_t *row = (predicted ? t->pred : t->sel) + ((size_t)t->cur * t->n_layers + l) * t->k;
    if (n > t->k) {   /* more than one token in the forward: not a one-token record */
        t->oom = 1;
        n = t->k;
    }
    for (int i = 0; i < t->k; i++) row[i] = (int16_t)(i < n ? experts[i] : -1);
}

static const char *const POLICY_NAME[POLICY_COUNT] = {
    [POLICY_LRU] = "LRU", [POLICY_LFU] = "LFU", [POLICY_BELADY] = "Belady",
    [POLICY_OURS] = "ours", [POLICY_OURS_PF] = "ours+pf",
};

const char *model_trace_policy_name(enum expert_policy p) { return p >= 0 && p < POLICY_COUNT ? POLICY_NAME[p] : "?"; }

/* The cache of a replay: which experts are in, and per expert its last use,
 * use count, next use (Belady) and pin. */
struct sim {
    int cap, n;                 /* capacity, experts in */
    int *in;                    /* [cap] expert ids */
    int *at;                    /* [L*E] index in `in`, or -1 */
    uint64_t *last, *count, *next;
    unsigned char *pin, *fresh;
};

static int sim_victim(const struct sim *s, enum expert_policy p)
{
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)   /* pinned ones only when nothing else */
        for (int i = 0; i < s->n; i++) {
            int x = s->in[i];
            if (s->fresh[x] || (!pass && s->pin[x])) continue;
            if (best < 0) { best = i; continue; }
            int y = s->in[best];
            int better;
            if (p == POLICY_LFU) better = s->count[x] < s->count[y] || (s->count[x] == s->count[y] && s->last[x] < s->last[y]);
            else if (p == POLICY_BELADY) better = s->next[x] > s->next[y];
            else better = s->last[x] < s->last[y];
            if (better) best = i;
        }
    return best;
}

/* Puts x in the cache (evicting by p); 0 when no slot can be freed. */
static int sim_insert(struct sim *s, int x, enum expert_policy p)
{
    if (s->n == s->cap) {
        int v = sim_victim(s, p);
        if (v < 0) return 0;
        s->at[s->in[v]] = -1;
        if (v != --s->n) {
            s->in[v] = s->in[s->n];
            s->at[s->in[v]] = v;
        }
    }
    s->in[s->n] = x;
    s->at[x] = s->n++;
    return 1;
}

int model_trace_replay(const struct expert_trace *t, enum expert_policy p, int budget, struct expert_replay *out,
                        struct colibri_err *err)
{
    return model_trace_replay_hot(t, p, budget, (int)(budget * HOTSET_MAX_SHARE), HOTSET_MIN_RATIO, out, err);
}

int model_trace_replay_hot(const struct expert_trace *t, enum expert_policy p, int budget, int max_pins,
                           double min_ratio, struct expert_replay *out, struct colibri_err *err)
{
    int L = t->n_layers, E = t->n_experts, K = t->k, T = t->n_tokens, X = L * E;
    *out = (struct expert_replay){ 0 };
    if (budget < K) return base_err_set(err, COLIBRI_EINVAL, "trace: a budget of %d experts is below top-%d", budget, K);
    struct sim s = { .cap = budget };
    size_t N = (size_t)T * L * K;
    s.in = malloc((size_t)budget * sizeof *s.in);
    s.at = malloc((size_t)X * sizeof *s.at);
    s.last = calloc((size_t)X, sizeof *s.last);
    s.count = calloc((size_t)X, sizeof *s.count);
    s.next = malloc((size_t)X * sizeof *s.next);
    s.pin = calloc((size_t)X, 1);
    s.fresh = calloc((size_t)X, 1);
    uint64_t *nextpos = malloc((N ? N : 1) * sizeof *nextpos), *seen = malloc((size_t)X * sizeof *seen);
    uint32_t *counts = malloc((size_t)X * sizeof *counts);
    int rc = 0;
    if (!s.in || !s.at || !s.last || !s.count || !s.next || !s.pin || !s.fresh || !nextpos || !seen || !counts) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "trace: out of memory replaying %zu acquisitions", N);
        goto done;
    }
    for (int x = 0; x < X; x++) s.at[x] = -1;
    /* next use of each acquisition's expert (Belady), from the end */
    for (int x = 0; x < X; x++) seen[x] = UINT64_MAX;
    for (size_t i = N; i-- > 0;) {
        int e = t->sel[i];
        int x = (int)((i / K) % L) * E + e;
        nextpos[i] = e < 0 ? UINT64_MAX : seen[x];
        if (e >= 0) seen[x] = i;
    }
    for (int x = 0; x < X; x++) s.next[x] = seen[x];
    int half = T / 2;
    uint64_t tick = 0;
    for (int tok = 0; tok < T; tok++) {
        if (tok == half && (p == POLICY_OURS || p == POLICY_OURS_PF)) {
            /* the hot set, chosen as the store does from the counts so far */
            for (int x = 0; x < X; x++) counts[x] = s.count[x] > UINT32_MAX ? UINT32_MAX : (uint32_t)s.count[x];
            model_hotset_choose(counts, L, E, max_pins, min_ratio, s.pin);
        }
        int measured = tok >= half;
        for (int l = 0; l < L; l++) {
            size_t row = ((size_t)tok * L + l) * K;
            if (p == POLICY_OURS_PF) {
                memset(s.fresh, 0, (size_t)X);
                for (int k = 0; k < K; k++) {
                    int e = t->pred[row + k];
                    if (e < 0) continue;
                    int x = l * E + e;
                    if (s.at[x] >= 0) { s.fresh[x] = 1; continue; }
                    if (!sim_insert(&s, x, p)) break;
                    s.fresh[x] = 1;
                    s.last[x] = ++tick;
                    if (measured) out->reads++;
                }
            }
            for (int k = 0; k < K; k++) {
                int e = t->sel[row + k];
                if (e < 0) continue;
                int x = l * E + e;
                s.next[x] = nextpos[row + k];
                int hit = s.at[x] >= 0;
                if (!hit) {
                    if (p == POLICY_OURS_PF) s.fresh[x] = 0;
                    if (!sim_insert(&s, x, p)) {   /* all slots hold this layer's prefetches */
                        memset(s.fresh, 0, (size_t)X);
                        sim_insert(&s, x, p);
                    }
                    if (measured) out->reads++;
                }
                s.fresh[x] = 1;                  /* this layer's experts stay until the layer is done */
                s.last[x] = ++tick;
                s.count[x]++;
                if (measured) {
                    out->accesses++;
                    out->hits += (uint64_t)hit;
                }
            }
            memset(s.fresh, 0, (size_t)X);
        }
    }
done:
    free(s.in);
    free(s.at);
    free(s.last);
    free(s.count);
    free(s.next);
    free(s.pin);
    free(s.fresh);
    free(nextpos);
    free(seen);
    free(counts);
    return rc;
}

void model_trace_layer_stats(const struct expert_trace *t, int l, struct expert_layer_stats *out)
{
    int L = t->n_layers, E = t->n_experts, K = t->k, T = t->n_tokens;
    memset(out, 0, sizeof *out);
    int *last = malloc((size_t)E * sizeof *last);
    if (!last) return;
    for (int e = 0; e < E; e++) last[e] = -1;
    double overlap = 0;
    uint64_t routed = 0, named = 0, pairs = 0;
    for (int tok = 0; tok < T; tok++) {
        const int16_t *sel = t->sel + ((size_t)tok * L + l) * K, *pred = t->pred + ((size_t)tok * L + l) * K;
        if (tok > 0) {
            const int16_t *prev = sel - (size_t)L * K;
            int same = 0;
            for (int a = 0; a < K; a++)
                for (int b = 0; b < K; b++) same += sel[a] >= 0 && sel[a] == prev[b];
            overlap += (double)same / K;
            pairs++;
        }
        int has_pred = pred[0] >= 0;
        for (int a = 0; a < K; a++) {
            int e = sel[a];
            if (e < 0) continue;
            int d = last[e] < 0 ? 0 : tok - last[e], b;
            if (!d) b = EXPERT_REUSE_BUCKETS - 1;
            else if (d == 1) b = 0;
            else if (d == 2) b = 1;
            else if (d <= 4) b = 2;
            else if (d <= 8) b = 3;
            else if (d <= 16) b = 4;
            else if (d <= 64) b = 5;
            else b = 6;
            out->reuse[b]++;
            last[e] = tok;
            if (has_pred) {
                routed++;
                for (int c = 0; c < K; c++) named += pred[c] == e;
            }
        }
    }
    out->overlap = pairs ? overlap / (double)pairs : 0;
    out->recall = routed ? (double)named / (double)routed : -1;
    free(last);
}
