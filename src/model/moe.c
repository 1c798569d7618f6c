#include "model/moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/fwd_ops.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/norm.h"
#include "model/parts.h"

/* keep[e] = 1 for the experts of the topk_group groups whose two best
 * scores sum highest (ties to the lower group), 0 for the rest: the group
 * choice of DeepseekV3TopkRouter and Mistral4TopkRouter. */
static void keep_top2_sum_groups(const struct model_config *c, const float *score, unsigned char *keep)
{
    int E = c->n_routed_experts, G = c->n_group, per = E / G;
    float gscore[G];
    unsigned char gkeep[G];
    for (int g = 0; g < G; g++) {
        float m1 = -INFINITY, m2 = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) {
            if (score[e] > m1) { m2 = m1; m1 = score[e]; }
            else if (score[e] > m2) m2 = score[e];
        }
        gscore[g] = m1 + m2;
        gkeep[g] = 0;
    }
    for (int k = 0; k < c->topk_group; k++) {
        int best = -1;
        for (int g = 0; g < G; g++)
            if (!gkeep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        gkeep[best] = 1;
    }
    for (int e = 0; e < E; e++) keep[e] = gkeep[e / per];
}

/* wts[k] / (sum + 1e-20) when norm_topk_prob, then times routed_scaling_factor. */
static void normalize_and_scale(const struct model_config *c, float *wts, float sum)
{
    for (int k = 0; k < c->num_experts_per_tok; k++) {
        if (c->norm_topk_prob) wts[k] /= (sum + 1e-20f);
        wts[k] *= c->routed_scaling_factor;
    }
}

/* DeepseekV3TopkRouter (noaux_tc). */
static void route_sigmoid_noaux_tc(const struct model_config *c, const float *logits, const float *bias, int *idx,
                                   float *wts)
{
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float s[E], b[E];
    unsigned char keep[E];
    for (int e = 0; e < E; e++) {
        s[e] = 1.0f / (1.0f + expf(-logits[e]));
        b[e] = s[e] + bias[e];
    }
    if (E <= 0) return;     /* config-checked; says so to the compiler, which sees b maybe unwritten */
    keep_top2_sum_groups(c, b, keep);
    for (int e = 0; e < E; e++)
        if (!keep[e]) b[e] = -INFINITY;
    float sum = 0.0f;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (b[e] != -INFINITY && (best < 0 || b[e] > b[best])) best = e;
        idx[k] = best;
        b[best] = -INFINITY;
        wts[k] = s[best];
        sum += s[best];
    }
    normalize_and_scale(c, wts, sum);
}

/* Softmax over all experts in f32, as torch's softmax(dtype=float32). */
static void softmax_scores(const float *logits, int E, float *s)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int e = 0; e < E; e++) mx = logits[e] > mx ? logits[e] : mx;
    for (int e = 0; e < E; e++) sum += (s[e] = expf(logits[e] - mx));
    for (int e = 0; e < E; e++) s[e] /= sum;
}

/* The K largest of s[] among the experts with keep[e] set (keep NULL: all);
 * weights are the scores times scale, not normalized (DeepseekV2TopkRouter:
 * scale is routed_scaling_factor). */
static void top_k_scaled(const struct model_config *c, const float *s, const unsigned char *keep, float scale, int *idx,
                         float *wts)
{
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    unsigned char taken[E];
    memset(taken, 0, sizeof taken);
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!taken[e] && (!keep || keep[e]) && (best < 0 || s[e] > s[best])) best = e;
        taken[best] = 1;
        idx[k] = best;
        wts[k] = s[best] * scale;
    }
}

/* DeepseekV2TopkRouter, topk_method "greedy": softmax, top-k. */
static void route_softmax_greedy(const struct model_config *c, const float *logits, const float *bias, int *idx,
                                 float *wts)
{
    (void)bias;
    float s[c->n_routed_experts];
    softmax_scores(logits, c->n_routed_experts, s);
    top_k_scaled(c, s, NULL, c->routed_scaling_factor, idx, wts);
}

/* DeepseekV2TopkRouter, topk_method "group_limited_greedy": softmax; a
 * group's score is its best expert's; top-k within the topk_group best
 * groups (transformers zeroes the others' scores, which no kept softmax
 * score is below). */
static void route_softmax_group_limited(const struct model_config *c, const float *logits, const float *bias,
                                        int *idx, float *wts)
{
    (void)bias;
    int E = c->n_routed_experts, G = c->n_group, per = E / G;
    float s[E], gscore[G];
    unsigned char gkeep[G], keep[E];
    softmax_scores(logits, E, s);
    for (int g = 0; g < G; g++) {
        gscore[g] = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) gscore[g] = s[e] > gscore[g] ? s[e] : gscore[g];
        gkeep[g] = 0;
    }
    for (int k = 0; k < c->topk_group; k++) {
        int best = -1;
        for (int g = 0; g < G; g++)
            if (!gkeep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        gkeep[best] = 1;
    }
    for (int e = 0; e < E; e++) keep[e] = gkeep[e / per];
    top_k_scaled(c, s, keep, c->routed_scaling_factor, idx, wts);
}

/* Mistral4TopkRouter: softmax; a group's score is the sum of its two best
 * experts'; top-k within the topk_group best groups; weights are the
 * scores, normalized when norm_topk_prob, times routed_scaling_factor. */
static void route_softmax_top2_groups(const struct model_config *c, const float *logits, const float *bias, int *idx,
                                      float *wts)
{
    (void)bias;
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float s[E];
    unsigned char keep[E];
    softmax_scores(logits, E, s);
    keep_top2_sum_groups(c, s, keep);
    float sum = 0.0f;
    top_k_scaled(c, s, keep, 1.0f, idx, wts);
    for (int k = 0; k < K; k++) sum += wts[k];
    normalize_and_scale(c, wts, sum);
}

typedef void (*moe_router_fn)(const struct model_config *c, const float *logits, const float *bias, int *idx,
                              float *wts);
static const moe_router_fn ROUTERS[MODEL_ROUTER_COUNT] = {
    [MODEL_ROUTER_SIGMOID_NOAUX_TC] = route_sigmoid_noaux_tc,
    [MODEL_ROUTER_SOFTMAX_GREEDY] = route_softmax_greedy,
    [MODEL_ROUTER_SOFTMAX_GROUP_LIMITED] = route_softmax_group_limited,
    [MODEL_ROUTER_SOFTMAX_TOP2_GROUPS] = route_softmax_top2_groups,
    [MODEL_ROUTER_SQRTSOFTPLUS] = model_moe_route_sqrtsoftplus,
};

void moe_route(const struct model_config *c, const float *logits, const float *bias, int *idx, float *wts)
{
    ROUTERS[c->router_kind](c, logits, bias, idx, wts);
}

int moe_forward(const struct fwd_exec *ex, const struct model *m, int li, const float *x, int n, float *out,
                struct run_bufs *b, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    const struct moe_weights *w = &m->layers[li].moe;
    int E = c->n_routed_experts, K = c->num_experts_per_tok, rc = 0;
    /* the logits come to the host: routing runs here */
    if ((rc = ex->ops->linear_host(ex, &w->router, x, n, b->moe_logits, &b->qs, err))) return rc;
    for (int t = 0; t < n; t++)
        moe_route(c, b->moe_logits + (int64_t)t * E, w->score_bias, b->moe_idx + t * K, b->moe_wts + t * K);
    return model_moe_run(ex, m, li, x, n, out, b, err);
}

int model_moe_run(const struct fwd_exec *ex, const struct model *m, int li, const float *x, int n, float *out, struct run_bufs *b,
                  struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    const struct moe_weights *w = &m->layers[li].moe;
    int E = c->n_routed_experts, K = c->num_experts_per_tok, hid = c->hidden_size, rc = 0;
    /* which experts this batch needs, in ascending order: the batch the store runs */
    memset(b->moe_used, 0, (size_t)E * sizeof *b->moe_used);
    for (int i = 0; i < n * K; i++) b->moe_used[b->moe_idx[i]] = 1;
    int n_used = 0;
    for (int e = 0; e < E; e++)
        if (b->moe_used[e]) b->moe_list[n_used++] = e;
    struct expert_batch eb = { li, n, K, hid, x, b->moe_idx, b->moe_wts, b->moe_list, n_used,
                               b->moe_in, b->moe_res, b->mlp_g, b->mlp_u, b->moe_tok, b->moe_tw, &b->qs, ex };
    if ((rc = expert_store_start(m->experts, &eb, err))) return rc;
    int slot = li & 1;
    if (b->moe_pred_layer[slot] == li) {
        const unsigned char *pred = b->moe_pred + (size_t)slot * E;
        /* recall over the routed experts; precision per rank over the predicted ones */
        int hit = 0, n_r[K], hit_r[K];
        for (int j = 0; j < n_used; j++) hit += pred[b->moe_list[j]] != 0;
        model_expert_note_prediction(m->experts, li, n_used, hit);
        memset(n_r, 0, sizeof n_r);
        memset(hit_r, 0, sizeof hit_r);
        for (int e = 0; e < E; e++)
            if (pred[e]) {
                n_r[pred[e] - 1]++;
                hit_r[pred[e] - 1] += b->moe_used[e];
            }
        float *prec = b->moe_pred_prec + (size_t)li * K;
        for (int r = 0; r < K; r++)
            if (n_r[r]) prec[r] += ((float)hit_r[r] / (float)n_r[r] - prec[r]) * 0.125f;
        b->moe_pred_layer[slot] = -1;
    }

    int shared = 0;
    if (c->n_shared_experts) shared = model_mlp_run(ex, &w->shared, x, n, out, b->mlp_g, b->mlp_u, &b->qs, err);
    else shared = ex->ops->zero(ex, out, (int64_t)n * hid, err);
    /* finish runs even then: a store may hold a lock or messages in flight until it does */
    struct colibri_err later = { 0 };
    rc = expert_store_finish(m->experts, &eb, out, shared ? &later : err);
    return shared ? shared : rc;
}

int model_moe_predict(const struct model *m, int li, const float *resid, int n, struct run_bufs *b,
                      struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    const struct layer_weights *lw = &m->layers[li];
    int slot = li & 1;
    b->moe_pred_layer[slot] = -1;
    if (!lw->is_moe || !expert_store_predicts(m->experts) || n > MOE_PREDICT_ROWS) return 0;
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    unsigned char *pred = b->moe_pred + (size_t)slot * E;
    model_rmsnorm(b->moe_in, resid, lw->mlp_norm, n, c->hidden_size, c->rms_norm_eps);
    int rc = model_linear(&lw->moe.router, b->moe_in, n, b->moe_logits, &b->qs, err);
    if (rc) return rc;
    memset(pred, 0, (size_t)E);
    for (int t = 0; t < n; t++) {
        moe_route(c, b->moe_logits + (int64_t)t * E, lw->moe.score_bias, b->moe_idx, b->moe_wts);
        for (int k = 0; k < K; k++) {
            unsigned char *p = &pred[b->moe_idx[k]];
            if (!*p || *p > k + 1) *p = (unsigned char)(k + 1);
        }
    }
    /* every predicted expert, ascending (pred[e]: its best rank + 1 over the
     * rows); then those whose rank's precision lets them read */
    const float *prec = b->moe_pred_prec + (size_t)li * K;
    int n_pred = 0, n_read = 0;
    for (int e = 0; e < E; e++)
        if (pred[e]) b->moe_list[n_pred++] = e;
    for (int j = 0; j < n_pred; j++)
        if (prec[pred[b->moe_list[j]] - 1] >= MOE_PREDICT_MIN_PRECISION) b->moe_pred_read[n_read++] = b->moe_list[j];
    expert_store_predict(m->experts, li, b->moe_list, n_pred, b->moe_pred_read, n_read);
    model_expert_note_predict_step(m->experts, li, n_read == 0);
    b->moe_pred_layer[slot] = li;
    b->moe_pred_n[slot] = n_pred;
    return 0;
}

static int moe_ffn_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    return moe_forward(pr->ex, pr->m, pr->li, in, n, out, pr->b, err);
}

/* Router (mlp.gate), its correction bias when the family names one (zeros
 * otherwise), the routed experts into the expert store, the shared experts. */
static int moe_ffn_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model_config *c = &model_loader_model(L)->cfg;
    struct moe_weights *moe = &lw->moe;
    int E = c->n_routed_experts, rc;
    char p[64], name[256];
    snprintf(p, sizeof p, "model.layers.%d.mlp", li);
    snprintf(name, sizeof name, "%s.gate.weight", p);
    if ((rc = model_loader_mat(L, name, E, c->hidden_size, MODEL_ROLE_F32, &moe->router, err))) return rc;
    const char *bias_name = c->family->names.router_bias;
    if (bias_name && (snprintf(name, sizeof name, "model.layers.%d.%s", li, bias_name), model_loader_has(L, name))) {
        if ((rc = model_loader_vec(L, name, E, &moe->score_bias, err))) return rc;
    } else if (!(moe->score_bias = calloc((size_t)E, sizeof(float)))) {
        return base_err_set(err, COLIBRI_ENOMEM, "layer %d: out of memory for the router bias", li);
    }
    if ((rc = model_loader_routed_experts(L, p, li, err))) return rc;
    if (!c->n_shared_experts) return 0;
    snprintf(name, sizeof name, "%s.shared_experts", p);
    return model_loader_mlp(L, name, c->moe_intermediate_size * c->n_shared_experts, MODEL_ROLE_DENSE, &moe->shared,
                            err);
}

const struct channel_mixer model_ffn_moe = { "moe", 1, moe_ffn_load, moe_ffn_forward, model_moe_predict };
