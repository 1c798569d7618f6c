/* model/config.h - the hyperparameters of a DeepSeek-V3-family model, parsed
 * from a Hugging Face config.json.
 *
 * Accepts the model_types of the family table (struct model_family, one row
 * per model_type: deepseek_v3, kimi_k2, deepseek_v32, glm_moe_dsa,
 * deepseek_v2, kimi_k25, mistral4, glm4_moe_lite, deepseek_v4, glm5_next — the
 * last two with their own parsers, config_v4.c and config_glm53.c); what differs between them is a column
 * of that table, never
 * a string compare elsewhere; a routing or norm field left out takes the
 * family's transformers default. Config values that select behaviour colibri
 * does not implement (scoring_func, topk_method, hidden_act, mlp_bias,
 * moe_layer_freq, ...) are refused naming the field and the value. Both
 * RoPE spellings (top-level rope_theta + rope_scaling{type|rope_type}, and
 * transformers v5's rope_parameters{rope_type, rope_theta, ...}), q_lora_rank
 * null, torch_dtype or dtype; a RoPE parameter colibri does not read is
 * refused by name. Anything else is refused by name; booleans
 * must be true or false (null: the default). Derived RoPE
 * quantities (inverse frequencies, yarn attention factor, softmax scale) are
 * computed here, once, as model-spec.md §2.1-2.2 states them.
 * quantization_config is read by model/quant_config.h (refused by name unless
 * implemented). */
#ifndef COLIBRI_MODEL_CONFIG_H
#define COLIBRI_MODEL_CONFIG_H

#include "colibri.h"
#include "model/quant_config.h"

/* Upper bounds of the integer fields, each well above every shipped model
 * (DeepSeek-V2/V3/V3.2, Kimi-K2, GLM-5: vocabularies up to 163840, hidden
 * 7168, intermediate 18432, 27..78 layers, 128 heads, 384 routed experts, 2
 * shared, 8 per token, contexts up to 262144, index_topk 2048, one MTP
 * layer). A value past its bound, or a non-integer, is refused naming the
 * field, the value and the allowed range, before anything is sized by it. */
#define MODEL_MAX_ROPE_DIM 256          /* qk_rope_head_dim */
#define MODEL_MAX_LAYERS 1024           /* num_hidden_layers, first_k_dense_replace */
#define MODEL_MAX_VOCAB (1 << 24)       /* vocab_size */
#define MODEL_MAX_DIM 65536             /* hidden/intermediate sizes, LoRA ranks, head dims */
#define MODEL_MAX_HEADS 1024            /* num_attention_heads, index_n_heads */
#define MODEL_MAX_EXPERTS 4096          /* n_routed_experts, num_experts_per_tok, n_group */
#define MODEL_MAX_SHARED_EXPERTS 64     /* n_shared_experts */
#define MODEL_MAX_CONTEXT (1 << 24)     /* max_position_embeddings and yarn's original one */
#define MODEL_MAX_INDEX_TOPK 65536      /* index_topk (top-k larger than the context selects all) */
#define MODEL_MAX_MTP_LAYERS 16         /* num_nextn_predict_layers */

/* How the router picks experts (moe.c, one function each). */
enum model_router {
    MODEL_ROUTER_SIGMOID_NOAUX_TC = 0,      /* V3: sigmoid, correction bias, top-2-sum groups */
    MODEL_ROUTER_SOFTMAX_GREEDY = 1,        /* V2 topk_method greedy: softmax, top-k */
    MODEL_ROUTER_SOFTMAX_GROUP_LIMITED = 2, /* V2 group_limited_greedy: softmax, max-score groups */
    MODEL_ROUTER_SOFTMAX_TOP2_GROUPS = 3,   /* Mistral 4: softmax, top-2-sum groups, optional normalization */
    MODEL_ROUTER_SQRTSOFTPLUS = 4,          /* V4: sqrt(softplus), correction bias, top-k (model/router_v4.h) */
    MODEL_ROUTER_COUNT
};

/* DeepSeek Sparse Attention: which lightning indexer the attention has. */
enum model_dsa {
    MODEL_DSA_NONE = 0,
    MODEL_DSA_V32 = 1,          /* every layer its own indexer, half-split RoPE */
    MODEL_DSA_GLM5 = 2,         /* indexer_types full/shared, interleaved RoPE */
    MODEL_DSA_COUNT
};

/* How a layer carries its residual (model/parts.h residual schemes). */
enum model_residual {
    MODEL_RESIDUAL_PLAIN = 0,   /* one stream: x += block(norm x) */
    MODEL_RESIDUAL_HYPER = 1,   /* V4: hc_mult streams mixed by hyper-connections (model/hyper.h) */
};

/* A V4 layer's attention (config layer_types). */
enum model_v4_layer { MODEL_V4_SLIDING = 0, MODEL_V4_CSA = 1, MODEL_V4_HCA = 2 };

/* Which token mixer a layer has. */
enum model_attn {
    MODEL_ATTN_MLA = 0,         /* multi-head latent attention (with DSA when dsa_kind says) */
    MODEL_ATTN_V4 = 1,          /* V4: one shared KV head, window, compressed entries (model/mixer_v4.h) */
    MODEL_ATTN_GLM53 = 2,       /* GLM-5.3: KDA layers (kda_layer[li], model/mixer_kda.h), else indexed
                                 * MLA layers (model/mixer_glm53_mla.h) */
};

/* Groups of config fields beyond the base set that the model fingerprint
 * (docs/FORMATS.md) hashes for a family; a family without them hashes the
 * base text alone, so the fingerprints of existing models do not change. */
enum model_fp_fields {
    MODEL_FP_ROUTER = 1 << 0,   /* router_kind */
    MODEL_FP_DSA = 1 << 1,      /* dsa_kind, index_n_heads/head_dim/topk, indexer RoPE, indexer_full */
    MODEL_FP_V4 = 1 << 2,       /* the V4 fields (head_dim, window, streams, compress ratios, hash layers, ropes) */
};

/* Checkpoint tensor names, relative to "model.layers.N.", that differ by
 * family or exist only in some; NULL: the family has no such tensor. */
struct model_tensor_names {
    /* Whole names of the model-level tensors, each a '|'-separated list of
     * spellings tried in order (NULL: model.embed_tokens.weight,
     * model.norm.weight, lm_head.weight). */
    const char *embed, *final_norm, *lm_head;
    /* Prefix of a multi-token-prediction module colibri does not load (NULL:
     * none); its tensors are accepted and named once in the log. */
    const char *mtp_unloaded;
    const char *router_bias;            /* mlp.gate.e_score_correction_bias */
    const char *indexer_wq_b, *indexer_wk, *indexer_k_norm_weight, *indexer_k_norm_bias, *indexer_weights_proj;
};

/* What transformers' configuration class assumes for a field config.json
 * leaves out, where a different value would change the output silently. */
struct model_family_defaults {
    int n_group, topk_group, first_k_dense_replace, norm_topk_prob, max_position_embeddings;
    double routed_scaling_factor, rms_norm_eps;
};

struct model_config;
struct cJSON;

/* One row of the family table: everything that differs by model_type. */
struct model_family {
    const char *model_type;
    const char *hf_class;               /* the transformers class that is the oracle */
    int router_kind;                    /* MODEL_ROUTER_*, or -1: chosen by topk_method */
    const char *scoring_func;           /* the one value accepted (absent means this) */
    const char *topk_method_default;    /* topk_method when absent */
    int reads_rope_interleave;          /* 1: rope_interleave=false is refused; 0: transformers ignores it */
    int reads_mlp_layer_types;          /* mlp_layer_types is the dense/sparse pattern (must be dense prefix) */
    int dsa_kind;                       /* MODEL_DSA_* */
    int indexer_rope_interleaved;       /* DSA: RoPE pairs of the indexer (1 interleaved, 0 half-split) */
    int q_lora_required;                /* q_lora_rank null is refused */
    int has_mtp;                        /* reads num_nextn_predict_layers (0: the family has no MTP module) */
    /* mlp_layer_types may put dense layers anywhere (default: the first
     * layer dense, as Glm4MoeLiteConfig); first_k_dense_replace is ignored */
    int mlp_layer_types_anywhere;
    /* reads rope_parameters.llama_4_scaling_beta: the query times
     * 1 + beta * log(1 + floor(pos / original_max_position_embeddings)) */
    int reads_llama4_scale;
    /* partial_rotary_factor is a fraction of qk_nope + qk_rope (the config's
     * head_dim), not of qk_rope_head_dim; it must give qk_rope_head_dim */
    int rope_fraction_of_qk_head;
    /* the model's config is the text_config object (its model_type one of
     * deepseek_v3, kimi_k2), and its tensors are under tensor_prefix; those
     * under skip_prefixes (a vision tower) are recognised and not loaded */
    int text_config;
    const char *tensor_prefix;
    /* the language model's "model." tensors live under this prefix instead
     * (GLM-5.3: model.language_model.), lm_head.weight at the top */
    const char *model_prefix;
    const char *skip_prefixes[4];
    float latent_norm_eps;              /* q_a_layernorm/kv_a_layernorm eps: the modeling file's constant */
    unsigned fingerprint;               /* MODEL_FP_* groups */
    struct model_family_defaults defaults;
    struct model_tensor_names names;
    /* A family whose config has another field set (DeepSeek-V4): parses it
     * all, after model_type (NULL: the V3-family fields). */
    int (*parse)(const struct cJSON *root, struct model_config *c, const char *path, struct colibri_err *err);
};

/* The row for model_type, or NULL. */
const struct model_family *model_family_find(const char *model_type);

struct model_config {
    char model_type[32];
    int vocab_size, hidden_size, intermediate_size, moe_intermediate_size;
    int num_hidden_layers, num_attention_heads;
    int q_lora_rank;            /* 0 = no low-rank query (q_proj) */
    int kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int n_routed_experts, n_shared_experts, num_experts_per_tok;
    int n_group, topk_group, first_k_dense_replace;
    /* Layers before first_k_dense_replace (the first MoE layer) are dense;
     * so is a later layer li with mlp_dense[li] (a family with
     * mlp_layer_types_anywhere: a dense layer between MoE ones). */
    unsigned char mlp_dense[MODEL_MAX_LAYERS];
    float routed_scaling_factor;
    int norm_topk_prob;
    float rms_norm_eps;
    int max_position_embeddings;
    int tie_word_embeddings;
    int attention_bias;
    const struct model_family *family;  /* the family table's row for model_type */
    int router_kind;            /* enum model_router */
    /* q_a_layernorm / kv_a_layernorm eps. Every family's modeling file builds
     * these norms with the RMSNorm default 1e-6, not rms_norm_eps (GLM-5:
     * rms_norm_eps 1e-5, latent norms 1e-6). */
    float latent_norm_eps;
    /* Multi-token prediction: layers num_hidden_layers ..
     * num_hidden_layers + num_nextn_predict_layers - 1 of the checkpoint. */
    int num_nextn_predict_layers;

    /* DeepSeek Sparse Attention (dsa_kind != MODEL_DSA_NONE) */
    int dsa_kind;               /* enum model_dsa */
    int index_n_heads, index_head_dim, index_topk;
    int indexer_rope_interleaved;   /* 1: GLM-5 interleaved pairs; 0: V3.2 half-split */
    /* 1: layer has its own indexer; 0: a GLM-5 'shared' layer reusing the
     * most recent full layer's selection. All 1 for V3.2, all 0 without DSA. */
    unsigned char indexer_full[MODEL_MAX_LAYERS];

    /* RoPE */
    char rope_type[16];         /* "default" or "yarn" */
    double rope_theta;
    double rope_factor;
    int rope_original_max_pos;
    double rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim;
    int rope_no_truncate;       /* yarn 'truncate: false': the correction range is not rounded outwards */
    double rope_attention_factor_cfg;   /* yarn 'attention_factor' as given; 0: derived from the mscales */
    int rope_half_split;        /* rope_interleave false: RoPE pairs (x[i], x[i + dr/2]) (rotate_half), not
                                 * (x[2i], x[2i+1]) */
    float llama4_beta;          /* 0: no position-dependent query scale */
    int llama4_max_pos;         /* its original_max_position_embeddings */
    float inv_freq[MODEL_MAX_ROPE_DIM / 2];
    float rope_attention_factor;    /* multiplies cos and sin */
    float softmax_scale;            /* dqk^-0.5, times mscale^2 under yarn */

    /* Layer parts beyond MLA + plain residual (model/parts.h) */
    int residual_kind;          /* enum model_residual */
    int attn_kind;              /* enum model_attn */
    int hc_mult;                /* residual streams per row: 1, or V4's hc_mult */

    /* DeepSeek-V4 (attn_kind MODEL_ATTN_V4; model/config_v4.c) */
    int hc_sinkhorn_iters;
    float hc_eps;
    int head_dim;               /* the one KV head's width (also each query head's) */
    int sliding_window, o_groups, o_lora_rank;
    float swiglu_limit;         /* routed experts' SwiGLU clip (0: none) */
    int compress_ratio[MODEL_MAX_LAYERS];       /* 0 sliding only, else tokens per compressed entry */
    unsigned char hash_layer[MODEL_MAX_LAYERS]; /* 1: experts from tid2eid[token] */
    unsigned char v4_layer_type[MODEL_MAX_LAYERS];  /* enum model_v4_layer */
    double v4_theta[2], v4_yarn_factor, v4_yarn_orig, v4_yarn_beta_fast, v4_yarn_beta_slow, v4_yarn_attn_factor;
    int v4_yarn;                /* 1: the compress rope is yarn (the main one never is) */
    float v4_inv_freq[2][MODEL_MAX_ROPE_DIM / 2];   /* [0] main rope, [1] compress rope */
    float v4_rope_scale[2];
    /* 1: the routed experts are FP4 (config.json's expert_dtype "fp4"), 0:
     * FP8 like the dense Linears ("fp8", transformers' default); read only
     * with a quantization_config (model/shipped.h, model_shipped_v4_kind) */
    int v4_expert_fp4;

    /* GLM-5.3 (attn_kind MODEL_ATTN_GLM53; model/config_glm53.c) */
    unsigned char kda_layer[MODEL_MAX_LAYERS];  /* 1: a KDA (linear_attention) layer */
    int linear_num_heads, linear_head_dim, linear_conv_k;
    int linear_bounded;         /* 1: forget gate lower_bound * sigmoid; 0: softplus */
    float linear_lower_bound;
    int hc_glm53;               /* hyper-connection names hc_attn_/hc_ffn_, head = the streams' mean */
    int glm53_kv_lora_rank;     /* indexed layers' latent width (kv_lora_rank is 0: no shared KV cache) */
    int index_kpool, index_kpool_tail;  /* pooled DSA selection (model/pool_index.h) */
    int swiglu_clip_all;        /* swiglu_limit clips every SwiGLU (dense, shared, routed), not only routed */

    /* quantization_config (model/quant_config.h) */
    struct model_quant_config quant;
};

/* Parses config.json text; `path` is only used in messages. */
int model_config_parse(const char *json, const char *path, struct model_config *cfg,
                       struct colibri_err *err);

/* The config fields the model fingerprint hashes, as `key=value;` text
 * (docs/FORMATS.md, "Model fingerprint"): the base fields, then the groups
 * the family's row names. Returns the length written (truncated to n - 1). */
int model_config_fingerprint_text(const struct model_config *c, char *out, size_t n);

/* The JSON readers model_config_parse checks fields with, for a family's
 * own parser (struct model_family.parse): each refuses a bad value naming
 * path and key, absent (or null) gives dflt. */
int model_cfg_int(const struct cJSON *o, const char *key, int required, int dflt, double lo, double hi, int *out,
                  const char *path, struct colibri_err *err);
int model_cfg_num(const struct cJSON *o, const char *key, double dflt, double lo, int lo_open, double hi, double *out,
                  const char *path, struct colibri_err *err);
int model_cfg_bool(const struct cJSON *o, const char *key, int dflt, int *out, const char *path,
                   struct colibri_err *err);
int model_cfg_str(const struct cJSON *o, const char *key, const char *dflt, const char **out, const char *path,
                  struct colibri_err *err);
int model_cfg_check_keys(const struct cJSON *o, const char *what, const char *path, struct colibri_err *err);

/* DeepSeek-V4's parser (model/config_v4.c). */
int model_config_parse_v4(const struct cJSON *root, struct model_config *c, const char *path,
                          struct colibri_err *err);
/* GLM-5.3's parser (model/config_glm53.c). */
int model_config_parse_glm53(const struct cJSON *root, struct model_config *c, const char *path,
                             struct colibri_err *err);

/* Reads and parses DIR/config.json. */
int model_config_load(const char *dir, struct model_config *cfg, struct colibri_err *err);

#endif
