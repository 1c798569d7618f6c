/* model/model.h - a loaded DeepSeek-V3-family model: its config and its
 * weights, read-only after model_load().
 *
 * Tensor names follow the Hugging Face checkpoint (model-spec.md §2). Routed
 * experts may be stored per expert (`mlp.experts.E.gate_proj.weight`, ...) or
 * fused (`mlp.experts.gate_up_proj`, `mlp.experts.down_proj`); both load into
 * the same per-expert matrices. Weights are widened to f32 at load (bf16, f16,
 * and fp8 e4m3 with 128x128 `weight_scale_inv` blocks). */
#ifndef COLIBRI_MODEL_MODEL_H
#define COLIBRI_MODEL_MODEL_H

#include "colibri.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/linear.h"

struct mlp_weights {            /* SwiGLU: down(silu(gate(x)) * up(x)) */
    struct wmat gate, up, down;
};

struct attn_weights {
    struct wmat q_a, q_b, q;    /* q_a/q_b with q_lora_rank, else q */
    float *q_a_norm;            /* [q_lora_rank] */
    struct wmat kv_a;           /* [r + dr, hidden] */
    float *kv_a_norm;           /* [r] */
    struct wmat kv_b;           /* [H*(dn+dv), r] */
    struct wmat o;              /* [hidden, H*dv] */
};

struct moe_weights {
    struct wmat router;         /* mlp.gate.weight [E, hidden] */
    float *score_bias;          /* e_score_correction_bias [E] (zeros if absent) */
    struct mlp_weights *experts;/* [E] */
    struct mlp_weights shared;  /* width moe_intermediate * n_shared (absent if 0) */
};

struct layer_weights {
    float *attn_norm, *mlp_norm;
    struct attn_weights attn;
    int is_moe;
    struct mlp_weights dense;
    struct moe_weights moe;
};

struct model {
    struct model_config cfg;
    float *embed;               /* [vocab, hidden] */
    float *final_norm;          /* [hidden] */
    struct wmat lm_head;        /* shares embed's memory when tied */
    struct layer_weights *layers;
    int64_t n_params;
    int64_t bytes_by_dtype[ST_DTYPE_COUNT];
};

/* Loads DIR (config.json + safetensors). *m must be zeroed; on failure it is
 * left freed. */
int model_load(const char *dir, struct model *m, struct colibri_err *err);
void model_free(struct model *m);

#endif
