/* api/trace_api.c - colibri_trace_routing (include/colibri_dev.h): records
 * the routing of a token sequence and prints what it says about caching
 * experts. */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "base/err.h"
#include "colibri_dev.h"
#include "model/expert_hotset.h"
#include "model/expert_store.h"
#include "dev/expert_trace.h"

static void print_tables(const struct expert_trace *t, const int *budgets, int n_budgets, FILE *out)
{
    static const char *const BUCKET[EXPERT_REUSE_BUCKETS] = { "1", "2", "3-4", "5-8", "9-16", "17-64", ">64",
                                                               "first" };
    fprintf(out, "Routing of %d tokens (forwarded one at a time), %d MoE layers x %d experts, top-%d.\n\n",
            t->n_tokens, t->n_layers, t->n_experts, t->k);
    fprintf(out, "| layer | adjacent-token overlap | reuse distance in tokens: ");
    for (int b = 0; b < EXPERT_REUSE_BUCKETS; b++) fprintf(out, "%s%s", b ? " / " : "", BUCKET[b]);
    fprintf(out, " | next-layer prediction recall |\n|---|---|---|---|\n");
    for (int l = 0; l < t->n_layers; l++) {
        struct expert_layer_stats st;
        model_trace_layer_stats(t, l, &st);
        uint64_t all = 0;
        for (int b = 0; b < EXPERT_REUSE_BUCKETS; b++) all += st.reuse[b];
        fprintf(out, "| %d | %.1f%% | ", t->first_moe_layer + l, 100 * st.overlap);
        for (int b = 0; b < EXPERT_REUSE_BUCKETS; b++)
            fprintf(out, "%s%.0f%%", b ? " / " : "", all ? 100.0 * (double)st.reuse[b] / (double)all : 0.0);
        if (st.recall >= 0) fprintf(out, " | %.1f%% |\n", 100 * st.recall);
        else fprintf(out, " | - |\n");
    }
    fprintf(out, "\nHit rate of a cache of N experts shared by all layers over the second half of the tokens, "
                 "experts read per token in brackets (ours+pf: wrong predictions included):\n\n| budget |");
    for (int p = 0; p < POLICY_COUNT; p++) fprintf(out, " %s |", model_trace_policy_name((enum expert_policy)p));
    fprintf(out, "\n|---|");
    for (int p = 0; p < POLICY_COUNT; p++) fprintf(out, "---|");
    fprintf(out, "\n");
    int total = t->n_layers * t->n_experts, measured = t->n_tokens - t->n_tokens / 2;
    for (int i = 0; i < n_budgets; i++) {
        fprintf(out, "| %d (%.0f%%) |", budgets[i], 100.0 * budgets[i] / total);
        for (int p = 0; p < POLICY_COUNT; p++) {
            struct expert_replay r;
            struct colibri_err err = { 0 };
            if (model_trace_replay(t, (enum expert_policy)p, budgets[i], &r, &err) || !r.accesses) {
                fprintf(out, " - |");
                continue;
            }
            fprintf(out, " %.1f%% (%.2f) |", 100.0 * (double)r.hits / (double)r.accesses,
                    measured ? (double)r.reads / measured : 0.0);
        }
        fprintf(out, "\n");
    }
    /* the hot set's size: fixed shares of the slots, and the store's rule */
    static const struct { const char *name; double share, min_ratio; } HOT[] = {
        { "none", 0, 0 }, { "1/8", 0.125, 0 }, { "1/4", 0.25, 0 }, { "1/2", 0.5, 0 }, { "3/4", 0.75, 0 },
        { "<=1/2, >=1.5x mean", 0.5, 1.5 }, { "<=1/2, >=2x mean", 0.5, 2.0 },
    };
    int n_hot = (int)(sizeof HOT / sizeof HOT[0]);
    fprintf(out, "\nours+pf by hot-set size (share of the slots pinned; \">=Rx mean\": only experts used R times "
                 "their layer's mean), hit rate and experts read per token; the store's rule: at most %g of the "
                 "slots, >= %gx mean:\n\n| budget |", HOTSET_MAX_SHARE, HOTSET_MIN_RATIO);
    for (int h = 0; h < n_hot; h++) fprintf(out, " %s |", HOT[h].name);
    fprintf(out, "\n|---|");
    for (int h = 0; h < n_hot; h++) fprintf(out, "---|");
    fprintf(out, "\n");
    for (int i = 0; i < n_budgets; i++) {
        fprintf(out, "| %d slots |", budgets[i]);
        for (int h = 0; h < n_hot; h++) {
            struct expert_replay r;
            struct colibri_err err = { 0 };
            if (model_trace_replay_hot(t, POLICY_OURS_PF, budgets[i], (int)(budgets[i] * HOT[h].share),
                                       HOT[h].min_ratio, &r, &err) || !r.accesses) {
                fprintf(out, " - |");
                continue;
            }
            fprintf(out, " %.1f%% (%.2f) |", 100.0 * (double)r.hits / (double)r.accesses,
                    measured ? (double)r.reads / measured : 0.0);
        }
        fprintf(out, "\n");
    }
}

int colibri_trace_routing(colibri_model *cm, const int32_t *tokens, int n, const int *budgets, int n_budgets,
                          FILE *out, struct colibri_err *err)
{
    struct model *m = &cm->m;
    const struct model_config *c = &m->cfg;
    struct expert_store *es = m->experts;
    /* The main model's MoE layers: an MTP layer (stored after them) is not run here. */
    int L = c->num_hidden_layers - es->first_moe_layer;
    if (L < 1) return base_err_set(err, COLIBRI_EINVAL, "trace: the model has no MoE layer");
    if (n < 4) return base_err_set(err, COLIBRI_EINVAL, "trace: %d tokens; at least 4 are needed", n);
    if (n > c->max_position_embeddings) n = c->max_position_embeddings;
    for (int i = 0; i < n_budgets; i++)
        if (budgets[i] < c->num_experts_per_tok)
            return base_err_set(err, COLIBRI_EINVAL, "trace: budget %d is below one token's %d experts of a layer",
                                budgets[i], c->num_experts_per_tok);
    struct expert_trace t;
    int rc = model_trace_init(&t, L, es->first_moe_layer, es->n_experts, c->num_experts_per_tok, n, err);
    if (rc) return rc;
    struct colibri_session_opts so = { .n_ctx = n };
    colibri_session *s = NULL;
    if ((rc = colibri_session_new(cm, &so, &s, err))) goto done;
    es->route_hook = model_trace_hook;
    es->route_user = &t;
    for (int i = 0; i < n && !rc; i++) {
        model_trace_next_token(&t);
        rc = colibri_session_decode(s, tokens[i], NULL, err);
    }
    es->route_hook = NULL;
    es->route_user = NULL;
    colibri_session_free(s);
    if (rc) goto done;
    int def[6], nd = 0, total = L * es->n_experts;
    if (n_budgets <= 0) {   /* 10%, 25%, 50%, 75% of all experts, at least one token's */
        static const int PCT[] = { 10, 25, 50, 75 };
        for (int i = 0; i < 4; i++) {
            int b = total * PCT[i] / 100;
            if (b < t.k) b = t.k;
            if (!nd || b > def[nd - 1]) def[nd++] = b;
        }
        budgets = def;
        n_budgets = nd;
    }
    print_tables(&t, budgets, n_budgets, out);
done:
    model_trace_free(&t);
    return rc;
}
