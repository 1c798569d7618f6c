/* model/model.h - a loaded DeepSeek-V3-family model: its config and its
 * weights, read-only after model_load().
 *
 * Tensor names follow the Hugging Face checkpoint (model-spec.md §2). Routed
 * experts may be stored per expert (`mlp.experts.E.gate_proj.weight`, ...) or
 * fused (`mlp.experts.gate_up_proj`, `mlp.experts.down_proj`); both load into
 * the same per-expert matrices.
 *
 * Every Linear weight is a quant/ qtensor. By default a weight keeps the format
 * it is stored in: F32 -> f32, BF16 -> bf16, F16 -> f16, and F8_E4M3 with its
 * 128x128 `weight_scale_inv` blocks -> fp8b, used as shipped (borrowed from the
 * mapped file, never re-quantized). struct model_load_opts asks for another
 * format per role (routed experts, dense weights, embeddings + lm_head), which
 * is then quantized at load from the f32 values. Norms, the router and biases
 * stay f32. */
#ifndef COLIBRI_MODEL_MODEL_H
#define COLIBRI_MODEL_MODEL_H

#include "colibri.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/expert_store.h"
#include "model/indexer.h"
#include "model/mlp.h"
#include "model/parts.h"

struct attn_weights {
    struct qtensor q_a, q_b, q;    /* q_a/q_b with q_lora_rank, else q */
    float *q_a_norm;            /* [q_lora_rank] */
    struct qtensor kv_a;           /* [r + dr, hidden] */
    float *kv_a_norm;           /* [r] */
    struct qtensor kv_b;           /* [H*(dn+dv), r] */
    /* The absorbed decode reads kv_b per head every token (W_UK, W_UV) in
     * f32. When kv_b is not f32 it either dequantizes each row as it reads
     * it (the default), or, with model_load_opts.kv_b_f32, reads this copy
     * made at load (H*(dn+dv)*r floats, counted in model_bytes().copies).
     * Both read the same f32 values, so the output is the same either way. */
    float *kv_b_f32;
    struct qtensor o;              /* [hidden, H*dv] */
    struct indexer_weights indexer; /* DSA lightning indexer (present = 0 without one) */
};

struct moe_weights {
    struct qtensor router;         /* mlp.gate.weight [E, hidden] */
    float *score_bias;          /* e_score_correction_bias [E] (zeros if absent) */
    struct mlp_weights shared;  /* width moe_intermediate * n_shared (absent if 0) */
    /* routed experts: only through model.experts (model/expert_store.h) */
};

struct v4_attn_weights;
struct kda_weights;
struct glm53_mla_weights;

struct layer_weights {
    struct layer_parts parts;   /* chosen by model_layer_parts (model/parts.h) */
    float *attn_norm, *mlp_norm;
    /* hyper-connection residual (model/hyper.h): [0] around the token mixer,
     * [1] around the channel mixer; fn f32 [(2+n)*n][n*hidden] */
    struct qtensor hc_fn[2];
    float *hc_base[2], *hc_scale[2];
    struct v4_attn_weights *v4;     /* a V4 token mixer's weights (model/mixer_v4.h), else NULL */
    struct kda_weights *kda;        /* a KDA token mixer's weights (model/mixer_kda.h), else NULL */
    struct glm53_mla_weights *glm53_mla;    /* GLM-5.3's indexed attention (model/mixer_glm53_mla.h) */
    int64_t *tid2eid;               /* a hash-routed MoE layer's [vocab][K] table, else NULL */
    struct attn_weights attn;
    int is_moe;                 /* parts.ffn->routed */
    struct mlp_weights dense;
    struct moe_weights moe;
};

/* A multi-token-prediction layer's own weights (DeepSeek-V3's
 * model.layers.L.*, HF's MtpLayer): its decoder block is a struct
 * layer_weights at model.layers[L + i], its routed experts are in the model's
 * expert store at layer L + i. The checkpoint's shared_head.head and
 * embed_tokens copies are checked for shape and not loaded: HF's MtpModel
 * uses the main model's lm_head and embedding. */
struct mtp_weights {
    float *enorm, *hnorm;       /* [hidden] */
    struct qtensor eh_proj;     /* [hidden, 2 hidden]: cat(enorm(embedding), hnorm(hidden)) */
    float *head_norm;           /* shared_head.norm [hidden] (HF: post_norm) */
};

/* Target formats per role: a quant_fmt id, or MODEL_FMT_AS_STORED. */
#define MODEL_FMT_AS_STORED (-1)
struct model_load_opts {
    int experts_fmt;            /* routed experts */
    int dense_fmt;              /* attention, shared experts, dense MLPs */
    int embed_fmt;              /* embed_tokens and lm_head */
    int kv_b_f32;               /* keep an f32 copy of kv_b for the absorbed decode */
    int lazy_load;              /* leave borrowed weights mapped on demand */
    int64_t ram_bytes;          /* weights budget (0: none); routed experts are streamed to stay under it */
    int skip_mtp;               /* leave the MTP layers of the checkpoint unloaded */
    /* The checkpoint's files are opened, mapped and (streamed experts) read
     * through io (io/file.h; NULL: the real file system); it must outlive
     * the model. */
    const struct io_fs *io;
};

struct model {
    struct model_config cfg;
    struct model_load_opts fmt;
    struct st_set st;           /* kept mapped: as-stored tensors borrow from it */
    struct qtensor embed;       /* [vocab, hidden] */
    float *final_norm;          /* [hidden] */
    struct qtensor lm_head;
    int lm_head_tied;
    /* the hyper head before the final norm (several residual streams) */
    struct qtensor hc_head_fn;  /* f32 [n][n * hidden] */
    float *hc_head_base, *hc_head_scale;           /* lm_head is embed (not freed twice) */
    struct layer_weights *layers;   /* num_hidden_layers, then n_mtp MTP decoder blocks */
    int n_mtp;                  /* MTP layers loaded (0: none in the checkpoint) */
    struct mtp_weights *mtp;    /* [n_mtp] */
    /* Why the checkpoint's MTP layer was left out at load (the tensor at
     * fault); empty when it loaded or the checkpoint has none. */
    char mtp_left_out[COLIBRI_ERR_MSG_MAX];
    /* Routed experts of every MoE layer: where they run and where their
     * weights come from (resident, streamed, or over MPI ranks). */
    struct expert_store *experts;
    int64_t n_params;
    int64_t bytes_by_dtype[ST_DTYPE_COUNT];
};

/* Loads DIR (config.json + safetensors). opts may be NULL (all as stored). On
 * failure *m is left freed. */
int model_load(const char *dir, const struct model_load_opts *opts, struct model *m, struct colibri_err *err);
void model_free(struct model *m);

/* What a loaded model holds in memory, in bytes. */
struct model_bytes {
    int64_t dense;              /* every weight outside the routed experts (data + scales) */
    int64_t experts;            /* routed experts in memory: all (resident) or the cache (streamed) */
    int64_t experts_total;      /* every routed expert, in memory or on disk */
    int64_t copies;             /* made at load for speed: the f32 kv_b copies */
    int64_t small;              /* norms, biases, RoPE tables */
    int64_t resident;           /* dense + experts + copies + small */
    int64_t token_read;         /* weight bytes one decoded token reads (main model) */
    int64_t mtp;                /* the MTP layers' weights (dense + routed experts; in dense/experts too) */
    int64_t mtp_token_read;     /* weight bytes one MTP draft reads */
};
void model_bytes(const struct model *m, struct model_bytes *out);

/* The opt-in bf16-activation products (colibri_model_opts.bf16_act): marks
 * every bf16 weight the forward pass multiplies with (qtensor.act_bf16), the
 * resident routed experts included. Returns how many it marked, or -1 when
 * the routed experts are streamed (their tensors are made per read, so they
 * cannot carry the mark; nothing is marked then). Call before any forward. */
int model_mark_bf16_act(struct model *m);

/* Tensor t viewed as [rows, cols], widened to a new malloc'd f32 array (F32,
 * BF16, F16, and F8_E4M3 with its `<name>_scale_inv` 128x128 block scales). */
int model_tensor_to_f32(const struct st_set *st, const struct st_tensor *t, int64_t rows, int64_t cols, float **out,
                        struct colibri_err *err);

#endif
