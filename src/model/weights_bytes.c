/* model/weights_bytes.c - what a loaded model holds (model.h: model_bytes,
 * per kind of weight and per token) and which of its products may run on
 * bf16 activations (model_mark_bf16_act): both walk every loaded matrix. */
#include "model/expert_store.h"
#include "model/expert_store_stream.h"
#include "model/mixer_glm53_mla.h"
#include "model/mixer_v4.h"
#include "model/model.h"

void model_bytes(const struct model *m, struct model_bytes *out)
{
    const struct model_config *c = &m->cfg;
    int hid = c->hidden_size;
    int64_t emb = model_qtensor_bytes(&m->embed), head = model_qtensor_bytes(&m->lm_head);
    struct model_bytes b = { 0 };
    int64_t hc_head = model_qtensor_bytes(&m->hc_head_fn);
    b.dense = emb + (m->lm_head_tied ? 0 : head) + hc_head;
    b.token_read = head + emb / c->vocab_size + hc_head;
    b.small = 4 * (int64_t)hid + 4 * (int64_t)(c->qk_rope_head_dim / 2);
    int64_t mtp_read = 0, mtp_expert_read = 0;
    for (int li = 0; li < c->num_hidden_layers + m->n_mtp; li++) {
        const struct layer_weights *lw = &m->layers[li];
        const struct attn_weights *a = &lw->attn;
        int64_t kvb = model_qtensor_bytes(&a->kv_b);
        int64_t at = model_qtensor_bytes(&a->q_a) + model_qtensor_bytes(&a->q_b) + model_qtensor_bytes(&a->q) +
                     model_qtensor_bytes(&a->kv_a) + kvb + model_qtensor_bytes(&a->o) +
                     model_indexer_bytes(&a->indexer, &b.small) + model_v4_attn_bytes(lw->v4, c, li, &b.small) + model_glm53_layer_bytes(lw) +
                     model_qtensor_bytes(&lw->hc_fn[0]) + model_qtensor_bytes(&lw->hc_fn[1]);
        int64_t copy = a->kv_b_f32 ? (int64_t)a->kv_b.rows * a->kv_b.cols * 4 : 0;
        b.dense += at;
        b.copies += copy;
        /* the decode reads kv_b once per token, from the copy when there is one */
        int64_t *read = li < c->num_hidden_layers ? &b.token_read : &mtp_read;
        *read += at - (copy ? kvb : 0) + copy;
        if (li >= c->num_hidden_layers) b.mtp += at;
        b.small += 4 * (2 * (int64_t)hid + c->kv_lora_rank + (c->q_lora_rank ? c->q_lora_rank : 0));
        int64_t mlp = lw->is_moe ? model_qtensor_bytes(&lw->moe.router) + model_mlp_bytes(&lw->moe.shared)
                                 : model_mlp_bytes(&lw->dense);
        if (lw->is_moe) b.small += 4 * (int64_t)c->n_routed_experts;
        if (lw->tid2eid) b.small += 8 * (int64_t)c->vocab_size * c->num_experts_per_tok;
        b.dense += mlp;
        *read += mlp;
        if (li >= c->num_hidden_layers) b.mtp += mlp;
    }
    for (int i = 0; i < m->n_mtp; i++) {
        int64_t eh = model_qtensor_bytes(&m->mtp[i].eh_proj);
        b.dense += eh;
        b.mtp += eh;
        mtp_read += eh;
        b.small += 4 * 3 * (int64_t)hid;
        int64_t layer = 0, E = m->experts->n_experts;
        for (int e = 0; e < E; e++) layer += model_expert_bytes(m->experts, c->num_hidden_layers + i, e);
        b.mtp += layer;
        if (E) mtp_expert_read += layer / E * c->num_experts_per_tok;
    }
    b.experts = model_expert_resident_bytes(m->experts);
    b.experts_total = expert_store_total_bytes(m->experts);
    /* the store's per-token figure covers every MoE layer, the MTP ones included */
    b.token_read += expert_store_token_bytes(m->experts, c->num_experts_per_tok) - mtp_expert_read;
    if (m->n_mtp) b.mtp_token_read = mtp_read + mtp_expert_read + head + emb / c->vocab_size;
    b.resident = b.dense + b.experts + b.copies + b.small;
    *out = b;
}

static int mark_bf16(struct qtensor *w)
{
    if (w->fmt != QUANT_BF16 || !w->data) return 0;
    w->act_bf16 = 1;
    return 1;
}

static int mark_bf16_mlp(struct mlp_weights *w)
{
    return mark_bf16(&w->gate) + mark_bf16(&w->up) + mark_bf16(&w->down);
}

int model_mark_bf16_act(struct model *m)
{
    const struct model_config *c = &m->cfg;
    struct expert_store *e = m->experts;
    if (e && expert_store_stream_slots(e)) return -1;
    int n = mark_bf16(&m->lm_head);
    for (int li = 0; li < c->num_hidden_layers + m->n_mtp; li++) {
        struct layer_weights *lw = &m->layers[li];
        struct attn_weights *a = &lw->attn;
        n += mark_bf16(&a->q_a) + mark_bf16(&a->q_b) + mark_bf16(&a->q) + mark_bf16(&a->kv_a) +
             mark_bf16(&a->kv_b) + mark_bf16(&a->o) + mark_bf16(&a->indexer.wq_b) + mark_bf16(&a->indexer.wk) +
             mark_bf16(&a->indexer.weights_proj);
        if (!lw->is_moe) {
            n += mark_bf16_mlp(&lw->dense);
            continue;
        }
        n += mark_bf16(&lw->moe.router) + mark_bf16_mlp(&lw->moe.shared);
        for (int x = 0; e && x < e->n_experts; x++) {
            struct mlp_weights *w = expert_store_resident_slot(e, li, x);
            if (w) n += mark_bf16_mlp(w);
        }
    }
    for (int i = 0; i < m->n_mtp; i++) n += mark_bf16(&m->mtp[i].eh_proj);
    return n;
}
