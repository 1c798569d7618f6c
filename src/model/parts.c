/* Choosing a layer's parts, and the plain residual scheme (model/parts.h). */
#include "model/parts.h"

#include <stdio.h>

#include "model/forward.h"
#include "model/loader.h"
#include "model/model.h"

void model_layer_parts(const struct model_config *c, int li, struct layer_parts *out)
{
    int main_layer = li < c->num_hidden_layers;
    out->residual = c->residual_kind == MODEL_RESIDUAL_HYPER ? &model_residual_hyper : &model_residual_plain;
    out->mixer = c->attn_kind == MODEL_ATTN_V4                                ? &model_mixer_v4
                 : c->attn_kind == MODEL_ATTN_GLM53 && main_layer ? (c->kda_layer[li] ? &model_mixer_kda
                                                                                      : &model_mixer_glm53_mla)
                 : main_layer && c->dsa_kind != MODEL_DSA_NONE                ? &model_mixer_mla_dsa
                                                                              : &model_mixer_mla;
    /* MTP layers are MoE layers in every family that has them */
    int dense = main_layer && (li < c->first_k_dense_replace || c->mlp_dense[li]);
    out->ffn = c->router_kind == MODEL_ROUTER_SQRTSOFTPLUS ? &model_ffn_moe_v4 : dense ? &model_ffn_mlp : &model_ffn_moe;
}

/* x += mixer(norm x); x += ffn(norm x), as DeepseekV3DecoderLayer. */
static int plain_forward(const struct part_run *pr, const struct layer_parts *p, float *x, int n,
                         struct colibri_err *err)
{
    const struct model *m = pr->m;
    const struct model_config *c = &m->cfg;
    const struct layer_weights *lw = &m->layers[pr->li];
    const struct fwd_exec *ex = pr->ex;
    struct run_bufs *b = pr->b;
    int hid = c->hidden_size, rc;
    int64_t nx = (int64_t)n * hid;
    if ((rc = ex->ops->rmsnorm(ex, b->h, x, lw->attn_norm, n, hid, c->rms_norm_eps, err)) ||
        (rc = p->mixer->forward(pr, b->h, n, b->y, err)) || (rc = ex->ops->add(ex, x, b->y, nx, err)))
        return rc;
    /* the next layer's channel mixer may start reading its experts now (a
     * store that reads from disk: never one behind a device executor) */
    int next = pr->li + 1;
    if (next < c->num_hidden_layers) {
        const struct channel_mixer *nf = m->layers[next].parts.ffn;
        if (nf->predict && (rc = nf->predict(m, next, x, n, b, err))) return rc;
    }
    if ((rc = ex->ops->rmsnorm(ex, b->h, x, lw->mlp_norm, n, hid, c->rms_norm_eps, err)) ||
        (rc = p->ffn->forward(pr, b->h, n, b->y, err)))
        return rc;
    return ex->ops->add(ex, x, b->y, nx, err);
}

static int plain_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    int hid = model_loader_model(L)->cfg.hidden_size, rc;
    char name[256];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", li);
    if ((rc = model_loader_vec(L, name, hid, &lw->attn_norm, err))) return rc;
    snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", li);
    return model_loader_vec(L, name, hid, &lw->mlp_norm, err);
}

const struct residual_scheme model_residual_plain = { "plain", plain_load, plain_forward, NULL, NULL };
