/* model/moe_v4.c - DeepSeek-V4's MoE block (DeepseekV4SparseMoeBlock) as a
 * channel mixer (model/parts.h: model_ffn_moe_v4): the router is
 * sqrtsoftplus top-k with its correction bias, or on the config's hash
 * layers the fixed tid2eid[token] table (model/router_v4.h); the routed
 * experts run through the model's expert store with their SwiGLU clipped at
 * swiglu_limit, plus one shared expert.
 *
 * The shared expert is NOT clipped: DeepSeek's inference code clips only
 * the routed experts, while transformers' DeepseekV4MLP clips the shared
 * expert too; colibri follows DeepSeek (docs/ARCHITECTURE.md), and the
 * fixtures keep the shared expert's pre-activations inside the limit.
 *
 * Under --ram the routed experts are the streamed store's like any other
 * family's (read as stored: float, or MXFP4 codes with their e8m0 scales).
 * A hash layer's experts follow from the token ids alone, so
 * tokens_known names them to the store before the slice's first layer
 * runs (model/parts.h), and their reads overlap the layers before it; a
 * top-k layer's experts are predicted during the layer before it like any
 * MoE layer's (model/moe.h model_moe_predict, called from
 * model/residual_hyper.c).
 *
 * Tensor names (official; also under "model."): layers.N.ffn.gate.weight,
 * ffn.gate.bias (top-k layers), ffn.gate.tid2eid (I64 [vocab][K], hash
 * layers), ffn.experts.E.w1 / w3 / w2 .weight (gate, up, down),
 * ffn.shared_experts.w1 / w3 / w2 .weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/expert_store.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/mixer_v4.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/parts.h"
#include "model/router_v4.h"

void model_moe_route_sqrtsoftplus(const struct model_config *c, const float *logits, const float *bias, int *idx,
                                  float *wts)
{
    /* k and the expert count were checked at config parse: this cannot fail */
    model_router_v4_topk(logits, bias, c->n_routed_experts, c->num_experts_per_tok, c->routed_scaling_factor, idx, wts,
                         NULL);
}

static int v4_moe_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    const struct model *m = pr->m;
    const struct model_config *c = &m->cfg;
    const struct layer_weights *lw = &m->layers[pr->li];
    struct run_bufs *b = pr->b;
    int E = c->n_routed_experts, K = c->num_experts_per_tok, rc;
    if ((rc = model_linear(&lw->moe.router, in, n, b->moe_logits, &b->qs, err))) return rc;
    for (int t = 0; t < n; t++) {
        const float *lg = b->moe_logits + (int64_t)t * E;
        if (!lw->tid2eid) {
            rc = model_router_v4_topk(lg, lw->moe.score_bias, E, K, c->routed_scaling_factor, b->moe_idx + t * K,
                                      b->moe_wts + t * K, err);
        } else if (!b->tok) {
            rc = base_err_set(err, COLIBRI_EINVAL, "layer %d: hash routing needs the token ids of the rows", pr->li);
        } else {
            rc = model_router_v4_hash(lg, E, lw->tid2eid, c->vocab_size, K, b->tok[t], c->routed_scaling_factor,
                                      b->moe_idx + t * K, b->moe_wts + t * K, err);
        }
        if (rc) return rc;
    }
    return model_moe_run(pr->ex, m, pr->li, in, n, out, b, err);
}

/* A top-k layer predicts as any MoE layer (model/moe.h model_moe_predict:
 * its ffn norm, router, and moe_route, which is model_router_v4_topk with
 * the correction bias here). A hash layer predicts nothing: tokens_known
 * named its experts before the slice's first layer ran. */
static int v4_moe_predict(const struct model *m, int li, const float *resid, int n, struct run_bufs *b,
                          struct colibri_err *err)
{
    if (!m->layers[li].tid2eid) return model_moe_predict(m, li, resid, n, b, err);
    b->moe_pred_layer[li & 1] = -1;
    return 0;
}

/* A hash layer's experts for the slice are the union of tid2eid[tok[t]]:
 * named to the store before any layer runs (model/parts.h tokens_known),
 * ascending, as the layer's own start will name them again. */
static void v4_moe_tokens_known(const struct model *m, int li, const int32_t *tok, int n, int *room)
{
    const struct model_config *c = &m->cfg;
    const int64_t *t2e = m->layers[li].tid2eid;
    struct expert_store *s = m->experts;
    /* a store running experts elsewhere (no prefetch of its own) reads nothing here */
    if (!t2e || !s->ops->prefetch || *room <= 0) return;
    int E = c->n_routed_experts, K = c->num_experts_per_tok, cnt = 0;
    unsigned char used[E];
    int list[E];
    memset(used, 0, sizeof used);
    for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) used[t2e[(int64_t)tok[t] * K + k]] = 1;
    for (int e = 0; e < E; e++)
        if (used[e]) list[cnt++] = e;
    if (cnt > *room) {
        *room = 0;
        return;
    }
    *room -= cnt;
    expert_store_prefetch(s, li, list, cnt);
}

static int load_expert(const struct model_loader *L, const char *pre, int inter, enum model_weight_role role,
                       float clip, struct mlp_weights *w, struct colibri_err *err)
{
    int hid = model_loader_model(L)->cfg.hidden_size, rc;
    char name[256];
    snprintf(name, sizeof name, "%s.w1.weight", pre);
    if ((rc = model_loader_mat(L, name, inter, hid, role, &w->gate, err))) return rc;
    snprintf(name, sizeof name, "%s.w3.weight", pre);
    if ((rc = model_loader_mat(L, name, inter, hid, role, &w->up, err))) return rc;
    snprintf(name, sizeof name, "%s.w2.weight", pre);
    if ((rc = model_loader_mat(L, name, hid, inter, role, &w->down, err))) return rc;
    w->clip = clip;
    return 0;
}

static int v4_moe_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    struct model *m = model_loader_model(L);
    const struct model_config *c = &m->cfg;
    int E = c->n_routed_experts, I = c->moe_intermediate_size, rc;
    char name[256], pre[200];
    model_v4_name(L, name, sizeof name, "layers.%d.ffn.gate.weight", li);
    if ((rc = model_loader_mat(L, name, E, c->hidden_size, MODEL_ROLE_F32, &lw->moe.router, err))) return rc;
    if (c->hash_layer[li]) {
        model_v4_name(L, name, sizeof name, "layers.%d.ffn.gate.tid2eid", li);
        if ((rc = model_loader_i64(L, name, c->vocab_size, c->num_experts_per_tok, &lw->tid2eid, err))) return rc;
        for (int64_t i = 0; i < (int64_t)c->vocab_size * c->num_experts_per_tok; i++)
            if (lw->tid2eid[i] < 0 || lw->tid2eid[i] >= E)
                return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s': entry %lld is expert %lld, outside 0..%d", name,
                                    (long long)i, (long long)lw->tid2eid[i], E - 1);
    } else {
        model_v4_name(L, name, sizeof name, "layers.%d.ffn.gate.bias", li);
        if ((rc = model_loader_vec(L, name, E, &lw->moe.score_bias, err))) return rc;
    }
    for (int e = 0; e < E; e++) {
        model_v4_name(L, pre, sizeof pre, "layers.%d.ffn.experts.%d.w1.weight", li, e);
        pre[strlen(pre) - strlen(".w1.weight")] = 0;
        if ((rc = load_expert(L, pre, I, MODEL_ROLE_EXPERT, c->swiglu_limit, expert_store_resident_slot(m->experts, li, e),
                              err)))
            return rc;
    }
    model_v4_name(L, pre, sizeof pre, "layers.%d.ffn.shared_experts.w1.weight", li);
    pre[strlen(pre) - strlen(".w1.weight")] = 0;
    return load_expert(L, pre, I, MODEL_ROLE_DENSE, 0, &lw->moe.shared, err);
}

const struct channel_mixer model_ffn_moe_v4 = { "moe-v4", 1, v4_moe_load, v4_moe_forward, v4_moe_predict,
                                                 v4_moe_tokens_known };
