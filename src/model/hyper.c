/* model/hyper.c - hyper-connections of DeepSeek-V4 (see hyper.h). Mirrors
 * DeepseekV4HyperConnection.forward and DeepseekV4HyperHead.forward; dot
 * products and sums accumulate in double so the f32 results sit within
 * rounding of torch's f32 ones whatever its summation order. */
#include "model/hyper.h"

#include <math.h>
#include <stddef.h>

#include "base/err.h"

static int check_dims(int n, int hidden, int n_tokens, const void *fn, const void *base, const void *scale,
                      const char *what, struct colibri_err *err)
{
    if (n < 1 || n > HYPER_MAX_STREAMS)
        return base_err_set(err, COLIBRI_EINVAL, "%s: %d streams, want 1..%d", what, n, HYPER_MAX_STREAMS);
    if (hidden < 1 || n_tokens < 0)
        return base_err_set(err, COLIBRI_EINVAL, "%s: hidden %d, tokens %d", what, hidden, n_tokens);
    if (!fn || !base || !scale)
        return base_err_set(err, COLIBRI_EINVAL, "%s: fn, base or scale missing", what);
    return 0;
}

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

/* The unweighted RMSNorm's factor over the flattened streams, then m[r] =
 * fn[r] . (x * factor) for rows r < rows. */
static void mix_logits(const float *x, int width, const float *fn, int rows, float eps, float *m)
{
    double ss = 0;
    for (int i = 0; i < width; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / width) + eps);
    for (int r = 0; r < rows; r++) {
        const float *w = fn + (size_t)r * width;
        double acc = 0;
        for (int i = 0; i < width; i++) acc += (double)w[i] * (x[i] * inv);
        m[r] = (float)acc;
    }
}

/* Softmax of each row, + eps, then Sinkhorn: columns once, then
 * (iters - 1) times rows and columns, each divided by its sum + eps. */
static void sinkhorn(float *c, int n, int iters, float eps)
{
    for (int i = 0; i < n; i++) {
        float *row = c + i * n, mx = row[0];
        for (int j = 1; j < n; j++) mx = fmaxf(mx, row[j]);
        double s = 0;
        for (int j = 0; j < n; j++) s += row[j] = expf(row[j] - mx);
        for (int j = 0; j < n; j++) row[j] = (float)(row[j] / s) + eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int i = 0; i < n; i++) {
                double s = 0;
                for (int j = 0; j < n; j++) s += c[i * n + j];
                float d = (float)s + eps;
                for (int j = 0; j < n; j++) c[i * n + j] /= d;
            }
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += c[i * n + j];
            float d = (float)s + eps;
            for (int i = 0; i < n; i++) c[i * n + j] /= d;
        }
    }
}

int model_hyper_pre(const struct hyper_conn *hc, int n_tokens, const float *x, float *collapsed,
                    float *post, float *comb, struct colibri_err *err)
{
    int rc = check_dims(hc->n, hc->hidden, n_tokens, hc->fn, hc->base, hc->scale, "model_hyper_pre", err);
    if (rc) return rc;
    if (hc->sinkhorn_iters < 1)
        return base_err_set(err, COLIBRI_EINVAL, "model_hyper_pre: sinkhorn_iters %d, want >= 1", hc->sinkhorn_iters);
    const int n = hc->n, D = hc->hidden, rows = (2 + n) * n;
    for (int t = 0; t < n_tokens; t++) {
        const float *xt = x + (size_t)t * n * D;
        float m[(2 + HYPER_MAX_STREAMS) * HYPER_MAX_STREAMS];
        mix_logits(xt, n * D, hc->fn, rows, hc->norm_eps, m);
        float pre[HYPER_MAX_STREAMS];
        for (int i = 0; i < n; i++) {
            pre[i] = sigmoidf(m[i] * hc->scale[0] + hc->base[i]) + hc->hc_eps;
            post[(size_t)t * n + i] = 2.0f * sigmoidf(m[n + i] * hc->scale[1] + hc->base[n + i]);
        }
        float *c = comb + (size_t)t * n * n;
        for (int k = 0; k < n * n; k++) c[k] = m[2 * n + k] * hc->scale[2] + hc->base[2 * n + k];
        sinkhorn(c, n, hc->sinkhorn_iters, hc->hc_eps);
        float *y = collapsed + (size_t)t * D;
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (int i = 0; i < n; i++) acc += (double)pre[i] * xt[(size_t)i * D + d];
            y[d] = (float)acc;
        }
    }
    return 0;
}

int model_hyper_post(const struct hyper_conn *hc, int n_tokens, const float *x, const float *y,
                     const float *post, const float *comb, float *out, struct colibri_err *err)
{
    int rc = check_dims(hc->n, hc->hidden, n_tokens, hc->fn, hc->base, hc->scale, "model_hyper_post", err);
    if (rc) return rc;
    const int n = hc->n, D = hc->hidden;
    for (int t = 0; t < n_tokens; t++) {
        const float *xt = x + (size_t)t * n * D, *c = comb + (size_t)t * n * n, *p = post + (size_t)t * n;
        float *ot = out + (size_t)t * n * D;
        for (int d = 0; d < D; d++) {
            float col[HYPER_MAX_STREAMS];
            for (int j = 0; j < n; j++) col[j] = xt[(size_t)j * D + d];
            for (int k = 0; k < n; k++) {
                double acc = (double)p[k] * y[(size_t)t * D + d];
                for (int j = 0; j < n; j++) acc += (double)c[j * n + k] * col[j];
                ot[(size_t)k * D + d] = (float)acc;
            }
        }
    }
    return 0;
}

int model_hyper_head(const struct hyper_head *hh, int n_tokens, const float *x, float *out,
                     struct colibri_err *err)
{
    int rc = check_dims(hh->n, hh->hidden, n_tokens, hh->fn, hh->base, hh->scale, "model_hyper_head", err);
    if (rc) return rc;
    const int n = hh->n, D = hh->hidden;
    for (int t = 0; t < n_tokens; t++) {
        const float *xt = x + (size_t)t * n * D;
        float m[HYPER_MAX_STREAMS], pre[HYPER_MAX_STREAMS];
        mix_logits(xt, n * D, hh->fn, n, hh->norm_eps, m);
        for (int i = 0; i < n; i++) pre[i] = sigmoidf(m[i] * hh->scale[0] + hh->base[i]) + hh->hc_eps;
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (int i = 0; i < n; i++) acc += (double)pre[i] * xt[(size_t)i * D + d];
            out[(size_t)t * D + d] = (float)acc;
        }
    }
    return 0;
}
