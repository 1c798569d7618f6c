/* model/mlp.h - the SwiGLU MLP (DeepseekV3MLP): down(silu(gate(x)) * up(x)),
 * optionally clipped (mlp_weights.clip),
 * used by the dense layers, the shared experts and every routed expert. */
#ifndef COLIBRI_MODEL_MLP_H
#define COLIBRI_MODEL_MLP_H

#include <stdint.h>

#include "quant/qtensor.h"

struct mlp_weights {
    struct qtensor gate, up, down;     /* [I, hid], [I, hid], [hid, I] */
    /* > 0: gate clipped from above and up on both sides at this value
     * before the product (DeepSeek-V4's swiglu_limit, model/v4_swiglu.h) */
    float clip;
};

struct fwd_exec;

/* out[n][hid] = mlp(x[n][hid]) on the CPU. g and u are scratch of n * I
 * floats each (I = gate.rows), s the products' working memory
 * (model_linear). 0, or model_linear's error. */
int model_mlp_forward(const struct mlp_weights *w, const float *x, int n, float *out, float *g, float *u,
                      struct quant_scratch *s, struct colibri_err *err);
/* The same through executor ex (model/fwd_ops.h): x, out, g, u are its buffers. */
int model_mlp_run(const struct fwd_exec *ex, const struct mlp_weights *w, const float *x, int n, float *out, float *g,
                  float *u, struct quant_scratch *s, struct colibri_err *err);

/* Bytes of the three matrices as held in memory (data + scales). */
int64_t model_mlp_bytes(const struct mlp_weights *w);
int64_t model_qtensor_bytes(const struct qtensor *w);

#endif
