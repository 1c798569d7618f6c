/* model/kda.h - GLM-5.3's KDA (Kimi Delta Attention) core, in f32
 * (Glm5NextTextLinearAttention in transformers 5.18.0, with its torch
 * fallbacks causal_conv1d_fn/_update, chunk_kimi_delta_attention and
 * recurrent_kimi_delta_attention). H heads of D channels (keys and values
 * alike), HD = H * D. For each row t, from the layer's projections:
 *
 *   conv:  the rows [q_proj | k_proj | v_proj] (3 HD channels) pass a depthwise
 *          causal convolution of K taps (no bias) and SiLU:
 *            c[t][ch] = silu(sum_j w[ch][j] * in[t - (K-1) + j][ch])
 *          with the rows before the first taken from the conv state (the K-1
 *          previous inputs, zeros at the start); c = [q | k | v].
 *   gates: f = f_b_proj(f_a_proj(x)) + dt_bias, per head a = exp(A_log[h]):
 *            g = lower_bound * sigmoid(a * f)         (bounded gate), or
 *            g = -a * softplus(f)  (softplus(f) = f above 20)  (unbounded)
 *          beta[h] = sigmoid(b_proj(x)[h]).
 *   core:  per head, q and k divided by sqrt(|.|^2 + 1e-6), q times
 *          1/sqrt(D), the state S[D][D] (key row, value column):
 *            S[i][:] *= exp(g[i]);  u = beta * (v - S^T k)
 *            S += k u^T;             o = S^T q
 *   norm:  per head o / sqrt(mean(o^2) + eps) * norm_w * sigmoid(gate),
 *          gate = g_b_proj(g_a_proj(x)); then o_proj (the caller's).
 *
 * The core has two forms with the same result (to rounding): the recurrent
 * one above, one row at a time (decode), and the chunked one of the prefill
 * (transformers' chunk form, KDA_CHUNK rows at a time: within a chunk the
 * rows' updates solved as one lower-triangular system, the state carried
 * between chunks). Both start from and leave the state in `state`, so a
 * prefill may continue a state and a decode may follow either.
 *
 * Layouts: rows of x-derived inputs are row-major; qkv rows hold 3 HD values
 * [q | k | v]; g rows HD, beta rows H, the core output rows HD; the conv state
 * (K-1) rows of 3 HD, oldest first; the recurrent state [H][D][D]. Nothing
 * here allocates: the chunked form takes the caller's scratch. Functions
 * return 0, or COLIBRI_EINVAL naming the bad argument. Reentrant. */
#ifndef COLIBRI_MODEL_KDA_H
#define COLIBRI_MODEL_KDA_H

#include <stddef.h>

#include "colibri.h"

#define KDA_CHUNK 64
#define KDA_MAX_CONV 16
#define KDA_MAX_HEAD_DIM 256

struct kda {
    int n_heads, head_dim;  /* config linear_num_heads, linear_head_dim (<= KDA_MAX_HEAD_DIM) */
    int conv_k;             /* config linear_conv_kernel_dim, 1..KDA_MAX_CONV */
    int bounded;            /* config linear_lower_bound is set */
    float lower_bound;      /* its value (negative) */
    float norm_eps;         /* config rms_norm_eps (the output norm's) */
    const float *conv_w;    /* [3 HD][conv_k] (conv1d.weight) */
    const float *dt_bias;   /* [HD] (forget_gate.dt_bias) */
    const float *a_log;     /* [H] (forget_gate.A_log) */
    const float *norm_w;    /* [D] (o_norm.weight) */
};

/* 0, or COLIBRI_EINVAL naming the field out of range. */
int model_kda_check(const struct kda *k, struct colibri_err *err);

/* Floats of the two per-layer states and of the chunked form's scratch (per thread). */
size_t model_kda_conv_state_floats(const struct kda *k);
size_t model_kda_rec_state_floats(const struct kda *k);
size_t model_kda_scratch_floats(const struct kda *k);

/* The convolution and SiLU of n rows `in` [n][3 HD] into `out` (not `in`),
 * advancing conv_state past them. */
void model_kda_conv(const struct kda *k, int n, const float *in, float *conv_state, float *out);

/* The forget gate g [n][HD] from f_b_proj's rows fproj [n][HD] and beta
 * [n][H] from b_proj's rows blog [n][H]. */
void model_kda_gates(const struct kda *k, int n, const float *fproj, const float *blog, float *g, float *beta);

/* The core over n rows from qkv [n][3 HD] (the conv's output), g and beta,
 * advancing state [H][D][D]; out [n][HD]. The recurrent form one row after
 * another; the chunked form KDA_CHUNK rows at a time with `scratch` of
 * n_threads x model_kda_scratch_floats(k) floats. The heads run on up to
 * n_threads threads (one inside a parallel region); the bits do not depend
 * on how many. */
void model_kda_recurrent(const struct kda *k, int n, const float *qkv, const float *g, const float *beta,
                         float *state, float *out, int n_threads);
void model_kda_chunked(const struct kda *k, int n, const float *qkv, const float *g, const float *beta,
                       float *state, float *out, float *scratch, int n_threads);

/* The gated RMSNorm of the core's rows core [n][HD] with gate [n][HD] into
 * out (may equal core). */
void model_kda_out_norm(const struct kda *k, int n, const float *core, const float *gate, float *out);

#endif
