/* model/norm.h - RMSNorm (DeepseekV3RMSNorm): y = x / sqrt(mean(x²) + eps) * w,
 * in f32 as transformers computes it for f32 weights. */
#ifndef COLIBRI_MODEL_NORM_H
#define COLIBRI_MODEL_NORM_H

/* The latent norms (q_a_layernorm, kv_a_layernorm) are built without the
 * config's eps in HF, so they keep the class default (model-spec Q5). */
#define MODEL_LATENT_NORM_EPS 1e-6f

/* n rows of width d; y may equal x. */
void model_rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps);

#endif
