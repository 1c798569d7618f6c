#include "model/runstate.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/indexer.h"
#include "model/mixer_glm53_mla.h"
#include "model/mixer_kda.h"
#include "model/mixer_v4.h"

static void *take(struct run_bufs *b, size_t n, size_t size, int *ok)
{
    size_t bytes = (n ? n : 1) * size;
    void *p = malloc(bytes);
    if (!p) *ok = 0;
    else b->bytes += bytes;
    return p;
}

int run_bufs_init(struct run_bufs *b, const struct model_config *c, int cap, const struct compute_ctx *cc,
                  struct colibri_err *err)
{
    memset(b, 0, sizeof *b);
    if (cap < 1) return base_err_set(err, COLIBRI_EINVAL, "run buffers: %d rows", cap);
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, hid = c->hidden_size, E = c->n_routed_experts, K = c->num_experts_per_tok;
    int inter = c->intermediate_size;
    if (c->moe_intermediate_size * (c->n_shared_experts > 1 ? c->n_shared_experts : 1) > inter)
        inter = c->moe_intermediate_size * (c->n_shared_experts > 1 ? c->n_shared_experts : 1);
    size_t n = (size_t)cap;
    int ok = 1;
    b->cap = cap;
    b->n_threads = cc->n_threads;
    int ns = c->hc_mult > 1 ? c->hc_mult : 1;
    b->x = take(b, n * ns * hid, sizeof(float), &ok);
    if (c->residual_kind == MODEL_RESIDUAL_HYPER) {
        b->hc_post = take(b, n * ns, sizeof(float), &ok);
        b->hc_comb = take(b, n * ns * ns, sizeof(float), &ok);
    }
    b->h = take(b, n * hid, sizeof(float), &ok);
    b->y = take(b, n * hid, sizeof(float), &ok);
    b->q = take(b, n * H * (dn + dr), sizeof(float), &ok);
    b->q_a = take(b, n * c->q_lora_rank, sizeof(float), &ok);
    b->kv_a = take(b, n * (r + dr), sizeof(float), &ok);
    b->attn = take(b, n * H * dv, sizeof(float), &ok);
    b->abs_q = take(b, (size_t)H * r, sizeof(float), &ok);
    b->abs_qpe = take(b, (size_t)H * dr, sizeof(float), &ok);
    b->abs_lat = take(b, (size_t)H * r, sizeof(float), &ok);
    b->kvb_row = take(b, (size_t)cc->n_threads * r, sizeof(float), &ok);
    b->mlp_g = take(b, n * inter, sizeof(float), &ok);
    b->mlp_u = take(b, n * inter, sizeof(float), &ok);
    b->moe_logits = take(b, n * E, sizeof(float), &ok);
    b->moe_idx = take(b, n * K, sizeof(int), &ok);
    b->moe_wts = take(b, n * K, sizeof(float), &ok);
    b->moe_tok = take(b, n, sizeof(int), &ok);
    b->moe_tw = take(b, n, sizeof(float), &ok);
    b->moe_in = take(b, n * hid, sizeof(float), &ok);
    b->moe_res = take(b, n * hid, sizeof(float), &ok);
    b->moe_used = take(b, (size_t)E, 1, &ok);
    b->moe_list = take(b, (size_t)E, sizeof(int), &ok);
    b->moe_pred = take(b, 2 * (size_t)E, 1, &ok);
    b->moe_pred_layer[0] = b->moe_pred_layer[1] = -1;
    b->moe_pred_prec = take(b, (size_t)c->num_hidden_layers * K, sizeof(float), &ok);
    for (int l = 0; ok && l < c->num_hidden_layers * K; l++) b->moe_pred_prec[l] = 1.0f;
    b->moe_pred_read = take(b, (size_t)E, sizeof(int), &ok);
    if (ok && model_indexer_bufs_new(c, cap, &b->dsa, NULL)) ok = 0;
    if (ok && model_v4_bufs_new(c, cap, &b->v4, &b->bytes)) ok = 0;
    if (ok && model_kda_bufs_new(c, cap, cc->n_threads, &b->kda, &b->bytes)) ok = 0;
    if (ok && model_glm53_mla_bufs_new(c, cap, cc->n_threads, &b->glm53_mla, &b->bytes)) ok = 0;
    if (!ok) {
        size_t bytes = b->bytes;
        run_bufs_free(b);
        return base_err_set(err, COLIBRI_ENOMEM, "run buffers: out of memory after %zu bytes (%d rows)", bytes, cap);
    }
    return 0;
}

void run_bufs_free(struct run_bufs *b)
{
    void *all[] = { b->x, b->h, b->y, b->q, b->q_a, b->kv_a, b->attn, b->abs_q, b->abs_qpe, b->abs_lat,
                    b->kvb_row, b->mlp_g, b->mlp_u, b->moe_logits, b->moe_idx, b->moe_wts, b->moe_tok,
                    b->moe_tw, b->moe_in, b->moe_res, b->moe_used, b->moe_list, b->moe_pred, b->moe_pred_prec, b->moe_pred_read, b->exp_kv,
                    b->exp_lat, b->exp_rows, b->exp_p, b->exp_kvb, b->hc_post, b->hc_comb };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    model_indexer_bufs_free(b->dsa);
    model_v4_bufs_free(b->v4);
    model_kda_bufs_free(b->kda);
    model_glm53_mla_bufs_free(b->glm53_mla);
    quant_scratch_free(&b->qs);
    memset(b, 0, sizeof *b);
}

int run_bufs_grow(struct run_bufs *b, float **buf, size_t *cap, size_t n, struct colibri_err *err)
{
    if (n <= *cap) return 0;
    size_t want = *cap + *cap / 2 > n ? *cap + *cap / 2 : n;
    float *p = malloc(want * sizeof *p);
    if (!p) return base_err_set(err, COLIBRI_ENOMEM, "run buffers: out of memory for %zu floats", want);
    free(*buf);
    b->bytes += (want - *cap) * sizeof *p;
    *buf = p;
    *cap = want;
    return 0;
}
