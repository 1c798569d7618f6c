/* model/v4_swiglu.h - DeepSeek-V4's clipped SwiGLU (DeepseekV4Experts._apply_gate
 * in transformers, config swiglu_limit), in f32:
 *
 *   out[i] = silu(min(gate[i], limit)) * clamp(up[i], -limit, limit)
 *
 * gate is clipped from above only, up on both sides. limit <= 0 turns the
 * clipping off (DeepSeek's code clips only for a positive swiglu_limit).
 *
 * Which experts clip: transformers clips the routed experts and the shared
 * expert (DeepseekV4MLP) alike; DeepSeek's inference code clips only the
 * routed experts. The fixtures hold the routed experts to transformers and
 * leave the shared expert out. Reentrant; out may equal gate or up. */
#ifndef COLIBRI_MODEL_V4_SWIGLU_H
#define COLIBRI_MODEL_V4_SWIGLU_H

void model_v4_swiglu_clip(const float *gate, const float *up, int n, float limit, float *out);

#endif
