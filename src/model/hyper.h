/* model/hyper.h - DeepSeek-V4 manifold-constrained hyper-connections
 * (DeepseekV4HyperConnection, DeepseekV4HyperHead in transformers), in f32.
 *
 * The residual of a V4 layer is n streams of `hidden` values per token,
 * laid out [n_tokens][n][hidden]. Around each block (attention, then the
 * MoE) one hyper-connection, for each token with streams x[n][hidden]:
 *
 *   f      = x flattened to n * hidden values, divided by
 *            sqrt(mean(f^2) + norm_eps)                (unweighted RMSNorm)
 *   m      = fn . f                  fn: [(2 + n) * n][n * hidden]
 *   pre[i] = sigmoid(m[i] * scale[0] + base[i]) + hc_eps
 *   post[i]= 2 * sigmoid(m[n + i] * scale[1] + base[n + i])
 *   comb   = softmax_rows(m[2n + i*n + j] * scale[2] + base[2n + i*n + j])
 *            + hc_eps, then divided by its column sums (+ hc_eps), then
 *            (sinkhorn_iters - 1) times: rows, then columns, each sum + hc_eps
 *   collapsed[d] = sum_i pre[i] * x[i][d]       -> the block's input
 *
 * and after the block's output y[hidden]:
 *
 *   out[k][d] = post[k] * y[d] + sum_j comb[j][k] * x[j][d]
 *
 * (comb is applied transposed: the sum runs over its first index.) The hyper
 * head before the final norm collapses the streams once more with its own
 * fn [n][n * hidden], base [n] and one scale: pre as above, sum_i pre[i] x[i].
 *
 * Weights are plain f32 arrays the caller owns (the checkpoint's hc_*_fn,
 * hc_*_base, hc_*_scale). Nothing here allocates: per-token scratch is the
 * caller's. Functions return 0, or COLIBRI_EINVAL naming the bad argument.
 * Reentrant: no state beyond the arguments. */
#ifndef COLIBRI_MODEL_HYPER_H
#define COLIBRI_MODEL_HYPER_H

#include "colibri.h"

#define HYPER_MAX_STREAMS 16

struct hyper_conn {
    int n;                 /* streams, 1..HYPER_MAX_STREAMS (config hc_mult) */
    int hidden;
    int sinkhorn_iters;    /* >= 1 (config hc_sinkhorn_iters) */
    float hc_eps;          /* config hc_eps */
    float norm_eps;        /* config rms_norm_eps (the input norm's) */
    const float *fn;       /* [(2 + n) * n][n * hidden] */
    const float *base;     /* [(2 + n) * n] */
    const float *scale;    /* [3]: pre, post, comb */
};

struct hyper_head {
    int n, hidden;
    float hc_eps, norm_eps;
    const float *fn;       /* [n][n * hidden] */
    const float *base;     /* [n] */
    const float *scale;    /* [1] */
};

/* The pre-mix of n_tokens tokens: collapsed [n_tokens][hidden], post
 * [n_tokens][n] and comb [n_tokens][n][n] (row i, column j as above), from x
 * [n_tokens][n][hidden]. No scratch needed beyond the outputs. */
int model_hyper_pre(const struct hyper_conn *hc, int n_tokens, const float *x, float *collapsed,
                    float *post, float *comb, struct colibri_err *err);

/* The post/residual mix: out [n_tokens][n][hidden] from the block output y
 * [n_tokens][hidden], the streams x the pre-mix saw, and its post and comb.
 * out may equal x (each hidden column is read before it is written). */
int model_hyper_post(const struct hyper_conn *hc, int n_tokens, const float *x, const float *y,
                     const float *post, const float *comb, float *out, struct colibri_err *err);

/* The hyper head: out [n_tokens][hidden] from x [n_tokens][n][hidden]. */
int model_hyper_head(const struct hyper_head *hh, int n_tokens, const float *x, float *out,
                     struct colibri_err *err);

#endif
