/* model/moe.h - the DeepseekV3MoE block: router, routed experts (through the
 * model's expert store), shared experts.
 *
 * Routing, one function per model_config.router_kind:
 *   sigmoid_noaux_tc (DeepseekV3TopkRouter + route_tokens_to_experts): sigmoid
 *     scores in f32, the correction bias for selection only, top-2-sum group
 *     scores, -inf outside the kept groups, top-k, weights from the unbiased
 *     scores normalized with +1e-20, times routed_scaling_factor.
 *   softmax_greedy / softmax_group_limited (DeepseekV2TopkRouter): softmax
 *     scores in f32; top-k over all experts, or within the topk_group groups
 *     with the best max score; weights are the scores times
 *     routed_scaling_factor (never normalized; no correction bias).
 *
 * The routed experts run grouped: the rows routed to an expert are gathered
 * and multiplied together, so each expert's weights are read once per batch.
 * Experts are visited in ascending order and each row's sum is taken in that
 * order after the shared experts, so a row's result does not depend on the
 * other rows of its batch. */
#ifndef COLIBRI_MODEL_MOE_H
#define COLIBRI_MODEL_MOE_H

#include "colibri.h"
#include "model/model.h"
#include "model/runstate.h"

/* One MoE layer's routing over a batch: what a remote runner of the routed
 * experts is given. list holds the n_used experts any row routes to, in
 * ascending order; idx/wts are [n][K]. Valid until the layer returns. */
struct moe_routed_batch {
    int layer, n, K, hid;
    const float *x;             /* [n][hid]: the MoE block's input rows */
    const int *idx;
    const float *wts;
    const int *list;
    int n_used;
};

/* The routed-expert hook (model.remote; NULL runs every routed expert here,
 * through model.experts). start() is called as soon as routing is known and
 * before the shared experts, so that work sent elsewhere overlaps them (and
 * it gives the prefetch hint for the experts it runs here); finish() then
 * adds every routed expert's rows into out, which holds the shared experts'
 * output: for each expert of list in ascending order,
 * model_moe_add_weighted(out, rows of model_moe_expert_rows, that expert's SwiGLU output
 * of those rows), the operations of the local loop in the same order, so the
 * output is bit-identical wherever the experts ran. 0 or a negative
 * COLIBRI_E* naming what failed; after a failed start() finish() is not
 * called. Calls of different threads may interleave (the hook serializes). */
struct moe_remote;
struct moe_remote_ops {
    int (*start)(struct moe_remote *r, const struct model *m, const struct moe_routed_batch *rb,
                 struct colibri_err *err);
    int (*finish)(struct moe_remote *r, const struct model *m, const struct moe_routed_batch *rb, float *out,
                  struct colibri_err *err);
};
struct moe_remote {
    const struct moe_remote_ops *ops;
};

/* The rows of a batch routed to expert e, in row order: tok[i] the row,
 * tw[i] its routing weight; returns the count (tok, tw hold n entries). */
int model_moe_expert_rows(const int *idx, const float *wts, int n, int K, int e, int *tok, float *tw);

/* out[tok[i]] += tw[i] * res[i] for i < cnt, element by element (res is
 * [cnt][hid]): the one place a routed expert's output is summed in. */
void model_moe_add_weighted(float *out, const int *tok, const float *tw, const float *res, int cnt, int hid);

/* idx[K], wts[K] for one row of router logits[E]; bias[E] is the correction
 * bias (read by the sigmoid router only). */
void moe_route(const struct model_config *c, const float *logits, const float *bias, int *idx, float *wts);

/* out[n][hid] = MoE(x[n][hid]) for layer li (an MoE layer); n <= b->cap.
 * 0, or the expert store's error (nothing else can fail). */
int moe_forward(const struct model *m, int li, const float *x, int n, float *out, struct run_bufs *b,
                struct colibri_err *err);

/* Next-layer prefetch: layer li's router (after its mlp_norm) applied to
 * resid[n][hid], the residual stream before layer li - 1's MoE block, names
 * the experts layer li will likely route to; the store may start reading
 * them (expert_store_predict). Skipped when the store does not read or
 * n > MOE_PREDICT_ROWS (a long prefill routes to most experts anyway). Uses
 * moe_in, moe_logits, moe_idx and moe_wts of b as scratch; moe_forward of
 * layer li counts the prediction's recall. Changes no output. 0, or the
 * router product's error. */
#define MOE_PREDICT_ROWS 16
int model_moe_predict(const struct model *m, int li, const float *resid, int n, struct run_bufs *b,
                      struct colibri_err *err);

#endif
