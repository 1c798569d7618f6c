/* model/moe.h - the DeepseekV3MoE block: router, routed experts (through the
 * model's expert store, model/expert_store.h), shared experts.
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
 * After routing, the layer's routed batch goes to the store: start, the
 * shared experts, finish (which adds the routed experts' rows); whatever the
 * store, the routed experts run grouped (the rows routed to an expert are
 * gathered and multiplied together, so each expert's weights are read once
 * per batch) and each row's sum is taken in ascending expert order after the
 * shared experts, so a row's result does not depend on the other rows of its
 * batch nor on the store. */
#ifndef COLIBRI_MODEL_MOE_H
#define COLIBRI_MODEL_MOE_H

#include "colibri.h"
#include "model/model.h"
#include "model/runstate.h"

/* idx[K], wts[K] for one row of router logits[E]; bias[E] is the correction
 * bias (read by the sigmoid router only). */
void moe_route(const struct model_config *c, const float *logits, const float *bias, int *idx, float *wts);

/* out[n][hid] = MoE(x[n][hid]) for layer li (an MoE layer); n <= b->cap.
 * Its products run through ex (model/fwd_ops.h), b being ex's buffers; the
 * router's logits come to the host (b->moe_logits is host memory) and the
 * routing runs there. 0, or an operation's or the expert store's error. The
 * store's scratch is b's (moe_in, moe_res, mlp_g, mlp_u, moe_tok, moe_tw). */
struct fwd_exec;
int moe_forward(const struct fwd_exec *ex, const struct model *m, int li, const float *x, int n, float *out,
                struct run_bufs *b, struct colibri_err *err);

/* moe_forward after routing: runs the experts b->moe_idx / b->moe_wts name
 * for each row (K per row) and the shared experts into out. */
int model_moe_run(const struct fwd_exec *ex, const struct model *m, int li, const float *x, int n, float *out, struct run_bufs *b,
                  struct colibri_err *err);

/* The V4 top-k router (model/moe_v4.c) in moe_route's form. */
void model_moe_route_sqrtsoftplus(const struct model_config *c, const float *logits, const float *bias, int *idx,
                                  float *wts);

/* Next-layer prefetch: layer li's router (after its mlp_norm) applied to
 * resid[n][hid], the estimate of its FFN input that model/parts.h's
 * predict hook is given (taken before layer li - 1's MoE block), names
 * the experts layer li will likely route to; the store may start reading
 * them (expert_store_predict). Skipped when the store takes no prediction or
 * n > MOE_PREDICT_ROWS (a long prefill routes to most experts anyway). Uses
 * moe_in, moe_logits, moe_idx and moe_wts of b as scratch, the experts let
 * read go to b->moe_pred_read; moe_forward of layer li scores the prediction
 * (the store counts its recall; a step whose every expert was withheld
 * counts as withheld). Changes no output. 0, or the
 * router product's error.
 *
 * The precision gate: a speculative read that routing does not use costs a
 * needed read's disk time, and the experts a prediction ranks low are the
 * ones it gets wrong (DeepSeek-style top-6 on the V2-Lite synthetic: running
 * precision about 0.9 for rank 0 down to 0.4-0.5 for rank 5; colibri-tiny's
 * top-2: about 0.9 and 0.6). So each layer keeps a running precision per
 * rank k (b->moe_pred_prec[li * K + k]: the share of its predicted experts of
 * rank k, an expert taking its best rank over the rows, that the routing
 * used; weight 1/8 per step, starting at 1), and an expert's read is
 * withheld while its rank's precision is below MOE_PREDICT_MIN_PRECISION.
 * The prediction is still computed and scored every step, so a rank reads
 * again once it predicts well. On routing no better than chance every rank
 * closes within a few tokens; on DeepSeek-style routing the top ranks stay
 * open. */
#define MOE_PREDICT_ROWS 16
#define MOE_PREDICT_MIN_PRECISION 0.7f
int model_moe_predict(const struct model *m, int li, const float *resid, int n, struct run_bufs *b,
                      struct colibri_err *err);

#endif
