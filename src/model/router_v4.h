/* model/router_v4.h - the two routers of DeepSeek-V4's MoE layers
 * (DeepseekV4TopKRouter, DeepseekV4HashRouter in transformers), as pure
 * functions from one token's router logits (gate.weight . x, computed by the
 * caller) to k expert indices and their weights, in f32.
 *
 *   score[e] = sqrt(softplus(logit[e]))   softplus(v) = v for v > 20, else
 *                                         log1p(exp(v)), as torch's default
 *   top-k:  the k experts with the largest score[e] + bias[e]
 *           (e_score_correction_bias), ordered by that, largest first
 *   hash:   the k experts tid2eid[token][0..k) in the table's order
 *   weight[i] = score[idx[i]] / (sum_i score[idx[i]] + 1e-20)
 *               * routed_scaling_factor
 *
 * The correction bias only chooses; the weights use the unbiased scores,
 * normalised over the chosen k. Both return 0, or COLIBRI_EINVAL (bad k or
 * expert count) / COLIBRI_ERANGE (a token or table entry out of range), with a
 * message naming the value. Reentrant; nothing allocated. */
#ifndef COLIBRI_MODEL_ROUTER_V4_H
#define COLIBRI_MODEL_ROUTER_V4_H

#include <stdint.h>

#include "colibri.h"

#define ROUTER_V4_MAX_K 64

/* One token: logits [n_experts], bias [n_experts] (NULL: zeros) -> idx[k],
 * weight[k]. Ties in score + bias go to the lower expert index. */
int model_router_v4_topk(const float *logits, const float *bias, int n_experts, int k, float routed_scaling,
                         int32_t *idx, float *weight, struct colibri_err *err);

/* One token of id `token`: tid2eid is the [vocab][k] table (the checkpoint's
 * I64 tid2eid); idx and weights as above. */
int model_router_v4_hash(const float *logits, int n_experts, const int64_t *tid2eid, int vocab, int k, int token,
                         float routed_scaling, int32_t *idx, float *weight, struct colibri_err *err);

/* sqrt(softplus(v)) as transformers' "sqrtsoftplus" scoring. */
float model_router_v4_sqrtsoftplus(float v);

#endif
