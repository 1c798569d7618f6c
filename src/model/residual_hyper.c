/* model/residual_hyper.c - the hyper-connection residual scheme of
 * DeepSeek-V4 (DeepseekV4DecoderLayer with its attn_hc / ffn_hc, and
 * DeepseekV4HyperHead before the final norm) as a layer part
 * (model/parts.h: model_residual_hyper), over model/hyper.h.
 *
 * A row of the residual is hc_mult streams of hidden values. Around each
 * block the streams are collapsed (pre), the block runs on the RMSNorm of
 * the collapse, and its output is expanded back (post) onto the streams
 * mixed by the Sinkhorn-projected comb. Tensor names: layers.N.attn_norm /
 * ffn_norm .weight, layers.N.hc_{attn,ffn}_{fn,base,scale}, hc_head_{fn,
 * base,scale} (transformers: model.hc_head.hc_{fn,base,scale}). GLM-5.3
 * (Glm5NextTextDecoderLayer, config hc_glm53) is the same mix under the names
 * model.layers.N.input_layernorm / post_attention_layernorm and hc_attn_ /
 * hc_ffn_ {fn,base,scale}, and its head is the streams' unweighted mean. */
#include <stdio.h>

#include "base/err.h"
#include "model/expert_store.h"
#include "model/forward.h"
#include "model/hyper.h"
#include "model/loader.h"
#include "model/mixer_v4.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/norm.h"
#include "model/parts.h"

static struct hyper_conn conn(const struct model_config *c, const struct layer_weights *lw, int k)
{
    return (struct hyper_conn){ c->hc_mult, c->hidden_size, c->hc_sinkhorn_iters, c->hc_eps, c->rms_norm_eps,
                                (const float *)lw->hc_fn[k].data, lw->hc_base[k], lw->hc_scale[k] };
}

/* One block around the hyper-connection k: x [n][streams][hidden] in place. */
static int block(const struct part_run *pr, int k, const float *norm_w, float *x, int n, struct colibri_err *err)
{
    const struct model *m = pr->m;
    const struct model_config *c = &m->cfg;
    const struct layer_weights *lw = &m->layers[pr->li];
    const struct layer_parts *p = &lw->parts;
    struct run_bufs *b = pr->b;
    struct hyper_conn hc = conn(c, lw, k);
    int rc = model_hyper_pre(&hc, n, x, b->y, b->hc_post, b->hc_comb, err);
    if (rc) return rc;
    model_rmsnorm(b->h, b->y, norm_w, n, c->hidden_size, c->rms_norm_eps);
    rc = k == 0 ? p->mixer->forward(pr, b->h, n, b->y, err) : p->ffn->forward(pr, b->h, n, b->y, err);
    return rc ? rc : model_hyper_post(&hc, n, x, b->y, b->hc_post, b->hc_comb, x, err);
}

/* Layer li + 1's FFN input is not known before layer li ends, so its
 * prediction (model/parts.h predict) gets the nearest thing: the streams as
 * they stand before layer li's FFN, collapsed by layer li + 1's own FFN
 * pre-mix. Only when the store takes predictions and n is decode-sized, so
 * that a resident run or a long prefill spends nothing on it. The collapse
 * goes to b->y and its mixes to b->hc_post / b->hc_comb: block 0 is done
 * with them (its post has folded them into x) and block 1's pre-mix writes
 * all three again before reading them. */
static int predict_next(const struct part_run *pr, const float *x, int n, struct colibri_err *err)
{
    const struct model *m = pr->m;
    int next = pr->li + 1;
    if (next >= m->cfg.num_hidden_layers || n > MOE_PREDICT_ROWS || !expert_store_predicts(m->experts)) return 0;
    const struct layer_weights *nw = &m->layers[next];
    if (!nw->parts.ffn->predict) return 0;
    struct run_bufs *b = pr->b;
    struct hyper_conn hc = conn(&m->cfg, nw, 1);
    int rc = model_hyper_pre(&hc, n, x, b->y, b->hc_post, b->hc_comb, err);
    return rc ? rc : nw->parts.ffn->predict(m, next, b->y, n, b, err);
}

static int hyper_forward(const struct part_run *pr, const struct layer_parts *p, float *x, int n,
                         struct colibri_err *err)
{
    (void)p;
    const struct layer_weights *lw = &pr->m->layers[pr->li];
    int rc = block(pr, 0, lw->attn_norm, x, n, err);
    if (!rc) rc = predict_next(pr, x, n, err);
    return rc ? rc : block(pr, 1, lw->mlp_norm, x, n, err);
}

/* GLM-5.3's spelling (the release's, which transformers reads as
 * Glm5NextTextDecoderLayer's attn_hc / ffn_hc): input_layernorm /
 * post_attention_layernorm, hc_attn_ / hc_ffn_ {fn,base,scale}. */
static int hyper_load_glm53(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model_config *c = &model_loader_model(L)->cfg;
    int hid = c->hidden_size, ns = c->hc_mult, mix = (2 + ns) * ns, rc;
    char name[256];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", li);
    if ((rc = model_loader_vec(L, name, hid, &lw->attn_norm, err))) return rc;
    snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", li);
    if ((rc = model_loader_vec(L, name, hid, &lw->mlp_norm, err))) return rc;
    const char *which[2] = { "attn", "ffn" };
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "model.layers.%d.hc_%s_fn", li, which[k]);
        if ((rc = model_loader_mat(L, name, mix, ns * hid, MODEL_ROLE_F32, &lw->hc_fn[k], err))) return rc;
        snprintf(name, sizeof name, "model.layers.%d.hc_%s_base", li, which[k]);
        if ((rc = model_loader_vec(L, name, mix, &lw->hc_base[k], err))) return rc;
        snprintf(name, sizeof name, "model.layers.%d.hc_%s_scale", li, which[k]);
        if ((rc = model_loader_vec(L, name, 3, &lw->hc_scale[k], err))) return rc;
    }
    return 0;
}

static int hyper_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model_config *c = &model_loader_model(L)->cfg;
    int hid = c->hidden_size, ns = c->hc_mult, mix = (2 + ns) * ns, rc;
    char name[256];
    if (c->hc_glm53) return hyper_load_glm53(L, li, lw, err);
    model_v4_name(L, name, sizeof name, "layers.%d.attn_norm.weight", li);
    if ((rc = model_loader_vec(L, name, hid, &lw->attn_norm, err))) return rc;
    model_v4_name(L, name, sizeof name, "layers.%d.ffn_norm.weight", li);
    if ((rc = model_loader_vec(L, name, hid, &lw->mlp_norm, err))) return rc;
    const char *which[2] = { "attn", "ffn" };
    for (int k = 0; k < 2; k++) {
        model_v4_name(L, name, sizeof name, "layers.%d.hc_%s_fn", li, which[k]);
        if ((rc = model_loader_mat(L, name, mix, ns * hid, MODEL_ROLE_F32, &lw->hc_fn[k], err))) return rc;
        model_v4_name(L, name, sizeof name, "layers.%d.hc_%s_base", li, which[k]);
        if ((rc = model_loader_vec(L, name, mix, &lw->hc_base[k], err))) return rc;
        model_v4_name(L, name, sizeof name, "layers.%d.hc_%s_scale", li, which[k]);
        if ((rc = model_loader_vec(L, name, 3, &lw->hc_scale[k], err))) return rc;
    }
    return 0;
}

/* The official name, else transformers' (model.hc_head.hc_<what>). */
static void head_name(const struct model_loader *L, const char *what, char *out, size_t n)
{
    snprintf(out, n, "hc_head_%s", what);
    if (model_loader_has(L, out)) return;
    snprintf(out, n, "model.hc_head.hc_%s", what);
    if (!model_loader_has(L, out)) snprintf(out, n, "hc_head_%s", what);
}

static int hyper_head_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    (void)li;
    (void)lw;
    struct model *m = model_loader_model(L);
    int ns = m->cfg.hc_mult, rc;
    char name[128];
    if (m->cfg.hc_glm53) return 0; /* GLM-5.3's head is a plain mean: no weights */
    head_name(L, "fn", name, sizeof name);
    if ((rc = model_loader_mat(L, name, ns, ns * m->cfg.hidden_size, MODEL_ROLE_F32, &m->hc_head_fn, err))) return rc;
    head_name(L, "base", name, sizeof name);
    if ((rc = model_loader_vec(L, name, ns, &m->hc_head_base, err))) return rc;
    head_name(L, "scale", name, sizeof name);
    return model_loader_vec(L, name, 1, &m->hc_head_scale, err);
}

static int hyper_head(const struct model *m, float *x, int n, float *out, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    if (c->hc_glm53) {
        /* Glm5NextTextHyperHead: the streams' unweighted mean; token t's
         * output ends before token t + 1's streams begin, so in place works */
        int ns = c->hc_mult, hid = c->hidden_size;
        for (int t = 0; t < n; t++) {
            const float *xs = x + (size_t)t * ns * hid;
            float *o = out + (size_t)t * hid;
            for (int d = 0; d < hid; d++) {
                float s = 0;
                for (int i = 0; i < ns; i++) s += xs[(size_t)i * hid + d];
                o[d] = s / (float)ns;
            }
        }
        return 0;
    }
    struct hyper_head hh = { c->hc_mult, c->hidden_size, c->hc_eps, c->rms_norm_eps,
                             (const float *)m->hc_head_fn.data, m->hc_head_base, m->hc_head_scale };
    /* in place: token t's output ends before token t + 1's streams begin */
    return model_hyper_head(&hh, n, x, out, err);
}

const struct residual_scheme model_residual_hyper = { "hyper", hyper_load, hyper_forward, hyper_head_load,
                                                      hyper_head };
