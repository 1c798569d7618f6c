/* model/norm.h - RMSNorm (DeepseekV3RMSNorm): y = x / sqrt(mean(x²) + eps) * w,
 * in f32 as transformers computes it for f32 weights. */
#ifndef COLIBRI_MODEL_NORM_H
#define COLIBRI_MODEL_NORM_H

/* The latent norms (q_a_layernorm, kv_a_layernorm) take their eps from the
 * family table (model_config.latent_norm_eps), not rms_norm_eps. */

/* n rows of width d; y may equal x. */
void model_rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps);

#endif
