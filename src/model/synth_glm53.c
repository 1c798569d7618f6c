/* model/synth_glm53.c - a synthetic GLM-5.3 checkpoint's tensors (contract in
 * synth_glm53.h). */
#include "model/synth_glm53.h"

#include <stdio.h>

#include "quant/format.h"

#define PRE "model.language_model.layers.%d."

int model_synth_glm53(const struct model_config *c, int ef, int df, int xf, synth_add_fn add, void *ctx)
{
    const int hid = c->hidden_size, L = c->num_hidden_layers, ns = c->hc_mult, mix = (2 + ns) * ns;
    const int KH = c->linear_num_heads, KD = c->linear_head_dim, KHD = KH * KD, K = c->linear_conv_k;
    const int H = c->num_attention_heads, Q = c->q_lora_rank, r = c->glm53_kv_lora_rank, dn = c->qk_nope_head_dim;
    const int dv = c->v_head_dim, nI = c->index_n_heads, dI = c->index_head_dim, E = c->n_routed_experts;
    const int I = c->moe_intermediate_size, IS = c->moe_intermediate_size * c->n_shared_experts, F = QUANT_F32;
    int n = 0;
    char nm[256];
    add(ctx, "model.language_model.embed_tokens.weight", c->vocab_size, hid, ef, SYNTH_EMBED), n++;
    add(ctx, "model.language_model.norm.weight", hid, 0, F, SYNTH_NORM), n++;
    add(ctx, "lm_head.weight", c->vocab_size, hid, ef, SYNTH_LINEAR), n++;
#define A(rows, cols, fmt, draw, ...) (snprintf(nm, sizeof nm, PRE __VA_ARGS__), add(ctx, nm, rows, cols, fmt, draw), n++)
    for (int l = 0; l < L; l++) {
        A(hid, 0, F, SYNTH_NORM, "input_layernorm.weight", l);
        A(hid, 0, F, SYNTH_NORM, "post_attention_layernorm.weight", l);
        const char *hc[2] = { "attn", "ffn" };
        for (int k = 0; k < 2; k++) {
            A(mix, ns * hid, F, SYNTH_LINEAR, "hc_%s_fn", l, hc[k]);
            A(mix, 0, F, SYNTH_BIAS, "hc_%s_base", l, hc[k]);
            A(3, 0, F, SYNTH_NORM, "hc_%s_scale", l, hc[k]);
        }
        if (c->kda_layer[l]) {
            const char *qkv[3] = { "q", "k", "v" };
            for (int j = 0; j < 3; j++) {
                A(KHD, hid, df, SYNTH_LINEAR, "self_attn.%s_proj.weight", l, qkv[j]);
                A(KHD, K, F, SYNTH_LINEAR, "self_attn.%s_conv1d.weight", l, qkv[j]);
            }
            A(KD, hid, df, SYNTH_LINEAR, "self_attn.f_a_proj.weight", l);
            A(KHD, KD, df, SYNTH_LINEAR, "self_attn.f_b_proj.weight", l);
            A(KHD, 0, F, SYNTH_BIAS, "self_attn.dt_bias", l);
            A(KH, 0, F, SYNTH_BIAS, "self_attn.A_log", l);
            A(KH, hid, df, SYNTH_LINEAR, "self_attn.b_proj.weight", l);
            A(KD, hid, df, SYNTH_LINEAR, "self_attn.g_a_proj.weight", l);
            A(KHD, KD, df, SYNTH_LINEAR, "self_attn.g_b_proj.weight", l);
            A(KD, 0, F, SYNTH_NORM, "self_attn.o_norm.weight", l);
            A(hid, KHD, df, SYNTH_LINEAR, "self_attn.o_proj.weight", l);
        } else {
            A(Q, hid, df, SYNTH_LINEAR, "self_attn.q_a_proj.weight", l);
            A(Q, 0, F, SYNTH_NORM, "self_attn.q_a_layernorm.weight", l);
            A(H * dn, Q, df, SYNTH_LINEAR, "self_attn.q_b_proj.weight", l);
            A(r, hid, df, SYNTH_LINEAR, "self_attn.kv_a_proj_with_mqa.weight", l);
            A(r, 0, F, SYNTH_NORM, "self_attn.kv_a_layernorm.weight", l);
            A(H * (dn + dv), r, df, SYNTH_LINEAR, "self_attn.kv_b_proj.weight", l);
            A(hid, H * dv, df, SYNTH_LINEAR, "self_attn.o_proj.weight", l);
            if (c->indexer_full[l]) {
                A(nI * dI, Q, df, SYNTH_LINEAR, "self_attn.indexer.wq_b.weight", l);
                A(dI, hid, df, SYNTH_LINEAR, "self_attn.indexer.wk.weight", l);
                A(dI, 0, F, SYNTH_NORM, "self_attn.indexer.k_norm.weight", l);
                A(dI, 0, F, SYNTH_BIAS, "self_attn.indexer.k_norm.bias", l);
                A(nI, hid, F, SYNTH_LINEAR, "self_attn.indexer.weights_proj.weight", l);
                A(c->index_kpool, dI, F, SYNTH_LINEAR, "self_attn.indexer.index_kpool_compress_ape", l);
                A(dI, hid, F, SYNTH_LINEAR, "self_attn.indexer.index_kpool_compress_gate", l);
            }
        }
        if (c->mlp_dense[l]) {
            A(c->intermediate_size, hid, df, SYNTH_LINEAR, "mlp.gate_proj.weight", l);
            A(c->intermediate_size, hid, df, SYNTH_LINEAR, "mlp.up_proj.weight", l);
            A(hid, c->intermediate_size, df, SYNTH_LINEAR, "mlp.down_proj.weight", l);
            continue;
        }
        A(E, hid, F, SYNTH_LINEAR, "mlp.gate.weight", l);
        A(E, 0, F, SYNTH_BIAS, "mlp.gate.e_score_correction_bias", l);
        for (int e = 0; e < E; e++) {
            A(I, hid, xf, SYNTH_LINEAR, "mlp.experts.%d.gate_proj.weight", l, e);
            A(I, hid, xf, SYNTH_LINEAR, "mlp.experts.%d.up_proj.weight", l, e);
            A(hid, I, xf, SYNTH_LINEAR, "mlp.experts.%d.down_proj.weight", l, e);
        }
        if (IS) {
            A(IS, hid, df, SYNTH_LINEAR, "mlp.shared_experts.gate_proj.weight", l);
            A(IS, hid, df, SYNTH_LINEAR, "mlp.shared_experts.up_proj.weight", l);
            A(hid, IS, df, SYNTH_LINEAR, "mlp.shared_experts.down_proj.weight", l);
        }
    }
#undef A
    return n;
}
