/* model/fwd_cpu.c - the CPU executor of model/fwd_ops.h: each operation is
 * the CPU function the forward called before the table existed. */
#include <limits.h>
#include <string.h>

#include "base/err.h"
#include "model/expert_store.h"
#include "model/fwd_ops.h"
#include "model/linear.h"
#include "model/mla.h"
#include "model/norm.h"
#include "model/v4_swiglu.h"

static int cpu_linear(const struct fwd_exec *ex, const struct qtensor *W, const float *x, int n, float *y,
                      struct quant_scratch *qs, struct colibri_err *err)
{
    return model_linear(W, x, n, y, qs, err);
}

static int cpu_rmsnorm(const struct fwd_exec *ex, float *y, const float *x, const float *w, int n, int d, float eps,
                       struct colibri_err *err)
{
    model_rmsnorm(y, x, w, n, d, eps);
    return 0;
}

static int cpu_add(const struct fwd_exec *ex, float *x, const float *y, int64_t n, struct colibri_err *err)
{
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
    return 0;
}

static int cpu_zero(const struct fwd_exec *ex, float *x, int64_t n, struct colibri_err *err)
{
    memset(x, 0, (size_t)n * sizeof *x);
    return 0;
}

static int cpu_swiglu(const struct fwd_exec *ex, float *g, const float *u, int64_t n, float limit,
                      struct colibri_err *err)
{
    if (limit > 0) {
        if (n > INT_MAX)
            return base_err_set(err, COLIBRI_EINVAL, "clipped SwiGLU over %lld values (at most %d)", (long long)n,
                                INT_MAX);
        model_v4_swiglu_clip(g, u, (int)n, limit, g);
    } else {
        model_swiglu(g, u, n);
    }
    return 0;
}

static int cpu_embed(const struct fwd_exec *ex, const struct qtensor *E, int32_t token, float *x,
                     struct colibri_err *err)
{
    quant_dequant_rows(E, token, 1, x);
    return 0;
}

static int cpu_mla_row(const struct fwd_exec *ex, const struct model_config *c, const float *kv_a_norm,
                       struct fwd_state *st, int kl, int pos, float *kv_a, float *q, struct colibri_err *err)
{
    return model_mla_cache_row(c, kv_a_norm, st, kl, pos, kv_a, q, err);
}

static int cpu_attend_absorbed(const struct fwd_exec *ex, const struct model_config *c, const struct attn_weights *w,
                               struct fwd_state *st, int kl, const float *q, int S, int pos0,
                               const struct mla_sel *sel, float *o, struct run_bufs *b, struct colibri_err *err)
{
    return model_mla_attend_absorbed(c, w, st, kl, q, S, pos0, sel, o, b, err);
}

static int cpu_expert_add(const struct fwd_exec *ex, float *out, const int *tok, const float *tw, const float *res,
                          int cnt, int hid, struct colibri_err *err)
{
    model_expert_batch_add(out, tok, tw, res, cnt, hid);
    return 0;
}

static const struct fwd_ops cpu_ops = {
    .name = "cpu",
    .linear = cpu_linear,
    .linear_host = cpu_linear,
    .rmsnorm = cpu_rmsnorm,
    .add = cpu_add,
    .zero = cpu_zero,
    .swiglu = cpu_swiglu,
    .embed = cpu_embed,
    .mla_row = cpu_mla_row,
    .attend_absorbed = cpu_attend_absorbed,
    .expert_add = cpu_expert_add,
};

const struct fwd_exec model_fwd_cpu = { &cpu_ops, NULL };
