#include "model/mlp.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "base/par.h"
#include "model/fwd_ops.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/model.h"
#include "model/parts.h"
#include "model/runstate.h"
#include "model/v4_swiglu.h"
#include "quant/format.h"

static float silu(float x) { return x / (1.0f + expf(-x)); }

void model_swiglu(float *g, const float *u, int64_t n)
{
    /* elementwise, so the threads change no bit; one thread's expf over a
     * prompt's intermediates was most of what a 2-thread prefill left serial */
    BASE_PAR_FOR(!omp_in_parallel() && n >= MODEL_PAR_MIN_ELEMS, for (int64_t i = 0; i < n; i++) g[i] = silu(g[i]) * u[i];);
}

int model_mlp_run(const struct fwd_exec *ex, const struct mlp_weights *w, const float *x, int n, float *out, float *g,
                  float *u, struct quant_scratch *s, struct colibri_err *err)
{
    int rc;
    if ((rc = ex->ops->linear(ex, &w->gate, x, n, g, s, err)) || (rc = ex->ops->linear(ex, &w->up, x, n, u, s, err)) ||
        (rc = ex->ops->swiglu(ex, g, u, (int64_t)n * w->gate.rows, w->clip, err)))
        return rc;
    return ex->ops->linear(ex, &w->down, g, n, out, s, err);
}

int model_mlp_forward(const struct mlp_weights *w, const float *x, int n, float *out, float *g, float *u,
                      struct quant_scratch *s, struct colibri_err *err)
{
    return model_mlp_run(&model_fwd_cpu, w, x, n, out, g, u, s, err);
}

int64_t model_qtensor_bytes(const struct qtensor *w)
{
    if (!w->rows) return 0;
    return (int64_t)quant_fmt_data_bytes(w->fmt, w->rows, w->cols) +
           (int64_t)quant_fmt_scale_bytes(w->fmt, w->rows, w->cols);
}

int64_t model_mlp_bytes(const struct mlp_weights *w)
{
    return model_qtensor_bytes(&w->gate) + model_qtensor_bytes(&w->up) + model_qtensor_bytes(&w->down);
}

static int mlp_ffn_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    return model_mlp_run(pr->ex, &pr->m->layers[pr->li].dense, in, n, out, pr->b->mlp_g, pr->b->mlp_u, &pr->b->qs,
                         err);
}

static int mlp_ffn_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "model.layers.%d.mlp", li);
    return model_loader_mlp(L, prefix, model_loader_model(L)->cfg.intermediate_size, MODEL_ROLE_DENSE, &lw->dense, err);
}

const struct channel_mixer model_ffn_mlp = { "mlp", 0, mlp_ffn_load, mlp_ffn_forward, NULL };
