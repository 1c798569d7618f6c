/* model/fwd_ops.h - the operations the forward runs, as one table: the one
 * forward (model/forward.c and the parts it calls: parts.c, mla.c, mlp.c,
 * moe.c, the expert store's loop) calls every product, norm, add and cache
 * write of a layer through a struct fwd_exec, never a kernel directly, so the
 * same code runs on the CPU and on a compute device.
 *
 * Two executors implement it:
 *  - model_fwd_cpu (model/fwd_cpu.c): each operation is the CPU function
 *    named beside it below, called as the forward called it before (same
 *    arguments, same threads), so the CPU forward's bits are those functions'.
 *    It is the default: every forward runs on it unless asked otherwise.
 *  - a device executor (model/fwd_device.h) over a driver of model/backend.h:
 *    it runs a session's one-row absorbed decode; its buffers are device
 *    memory, its weights the device copies of the host tensors passed in.
 *
 * Contract (both):
 *  - Activation pointers are the executor's own buffers (the run_bufs the
 *    forward was given with it); weight pointers are the model's host tensors
 *    and vectors, which an executor maps to its own copies.
 *  - "host" arguments are host memory whatever the executor.
 *  - Every operation returns 0 or a negative COLIBRI_E* with a message; one
 *    the executor does not implement for its input is COLIBRI_EUNSUPPORTED
 *    naming it. None allocates.
 *  - Operations run in call order; a host result (linear_host) is ready when
 *    the call returns. */
#ifndef COLIBRI_MODEL_FWD_OPS_H
#define COLIBRI_MODEL_FWD_OPS_H

#include <stdint.h>

#include "colibri.h"
#include "quant/qtensor.h"

struct fwd_exec;
struct fwd_state;
struct model_config;
struct attn_weights;
struct run_bufs;

/* A DSA selection of one group: row s attends pos[s * stride + j], j < n[s]. */
struct mla_sel {
    const int32_t *pos;
    const int *n;
    int stride;
};

struct fwd_ops {
    const char *name;
    /* y[n][rows] = x[n][cols] . W^T (model_linear); qs the CPU's working memory. */
    int (*linear)(const struct fwd_exec *ex, const struct qtensor *W, const float *x, int n, float *y,
                  struct quant_scratch *qs, struct colibri_err *err);
    /* The same with y in host memory (router logits, the model's logits). */
    int (*linear_host)(const struct fwd_exec *ex, const struct qtensor *W, const float *x, int n, float *y,
                       struct quant_scratch *qs, struct colibri_err *err);
    /* model_rmsnorm: n rows of width d, w a model vector; y may equal x. */
    int (*rmsnorm)(const struct fwd_exec *ex, float *y, const float *x, const float *w, int n, int d, float eps,
                   struct colibri_err *err);
    /* x[i] += y[i] for i < n (the residual adds). */
    int (*add)(const struct fwd_exec *ex, float *x, const float *y, int64_t n, struct colibri_err *err);
    /* x[i] = 0 for i < n. */
    int (*zero)(const struct fwd_exec *ex, float *x, int64_t n, struct colibri_err *err);
    /* g[i] = silu(g[i]) * u[i] for i < n (model_swiglu); limit > 0: the
     * clipped form of DeepSeek-V4's routed experts (model_v4_swiglu_clip). */
    int (*swiglu)(const struct fwd_exec *ex, float *g, const float *u, int64_t n, float limit,
                  struct colibri_err *err);
    /* x = row `token` of the embedding E (quant_dequant_rows). */
    int (*embed)(const struct fwd_exec *ex, const struct qtensor *E, int32_t token, float *x,
                 struct colibri_err *err);
    /* One position's MLA row (model_mla_cache_row): the latent of kv_a (r
     * values, then dr RoPE values) normed by kv_a_norm, its RoPE part and
     * the H query heads' (q: H x (dn + dr)) rotated at pos, the row written
     * to cache layer kl of st (the host cache: kv_cache_write). */
    int (*mla_row)(const struct fwd_exec *ex, const struct model_config *c, const float *kv_a_norm,
                   struct fwd_state *st, int kl, int pos, float *kv_a, float *q, struct colibri_err *err);
    /* The absorbed attention of S rows at positions pos0.. over cache layer
     * kl (model_mla_attend_absorbed): q [S][H][dn + dr] in, o [S][H][dv]
     * out, sel a DSA selection or NULL; scratch from b. */
    int (*attend_absorbed)(const struct fwd_exec *ex, const struct model_config *c, const struct attn_weights *w,
                           struct fwd_state *st, int kl, const float *q, int S, int pos0, const struct mla_sel *sel,
                           float *o, struct run_bufs *b, struct colibri_err *err);
    /* out[tok[i]] += tw[i] * res[i] for i < cnt (model_expert_batch_add);
     * tok and tw host memory. */
    int (*expert_add)(const struct fwd_exec *ex, float *out, const int *tok, const float *tw, const float *res,
                      int cnt, int hid, struct colibri_err *err);
};

/* An executor: its table and its state (NULL for the CPU). */
struct fwd_exec {
    const struct fwd_ops *ops;
    void *ctx;
};

/* The CPU executor (model/fwd_cpu.c). */
extern const struct fwd_exec model_fwd_cpu;

/* g[i] = silu(g[i]) * u[i], threaded over large n (the CPU's swiglu). */
void model_swiglu(float *g, const float *u, int64_t n);

#endif
