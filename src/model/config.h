/* model/config.h - the hyperparameters of a DeepSeek-V3-family model, parsed
 * from a Hugging Face config.json.
 *
 * Accepts model_type deepseek_v3 and kimi_k2 (both DeepseekV3ForCausalLM), both
 * RoPE spellings (top-level rope_theta + rope_scaling{type|rope_type}, and
 * transformers v5's rope_parameters{rope_type, rope_theta, ...}), q_lora_rank
 * null, torch_dtype or dtype. Anything else is refused by name. Derived RoPE
 * quantities (inverse frequencies, yarn attention factor, softmax scale) are
 * computed here, once, as model-spec.md §2.1-2.2 states them. */
#ifndef COLIBRI_MODEL_CONFIG_H
#define COLIBRI_MODEL_CONFIG_H

#include "colibri.h"

#define MODEL_MAX_ROPE_DIM 256

struct model_config {
    char model_type[32];
    int vocab_size, hidden_size, intermediate_size, moe_intermediate_size;
    int num_hidden_layers, num_attention_heads;
    int q_lora_rank;            /* 0 = no low-rank query (q_proj) */
    int kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int n_routed_experts, n_shared_experts, num_experts_per_tok;
    int n_group, topk_group, first_k_dense_replace;
    float routed_scaling_factor;
    int norm_topk_prob;
    float rms_norm_eps;
    int max_position_embeddings;
    int tie_word_embeddings;
    int attention_bias;

    /* RoPE */
    char rope_type[16];         /* "default" or "yarn" */
    double rope_theta;
    double rope_factor;
    int rope_original_max_pos;
    double rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim;
    float inv_freq[MODEL_MAX_ROPE_DIM / 2];
    float rope_attention_factor;    /* multiplies cos and sin */
    float softmax_scale;            /* dqk^-0.5, times mscale^2 under yarn */
};

/* Parses config.json text; `path` is only used in messages. */
int model_config_parse(const char *json, const char *path, struct model_config *cfg,
                       struct colibri_err *err);

/* Reads and parses DIR/config.json. */
int model_config_load(const char *dir, struct model_config *cfg, struct colibri_err *err);

#endif
