/* model/v4_attn.c - V4's attention core for one query (see v4_attn.h),
 * mirroring DeepseekV4Attention.forward with eager_attention_forward. */
#include "model/v4_attn.h"

#include <math.h>
#include <stddef.h>

#include "base/err.h"

static int check(const struct v4_attn *a, const char *what, struct colibri_err *err)
{
    if (a->n_heads < 1 || a->head_dim < 1 || a->window < 1)
        return base_err_set(err, COLIBRI_EINVAL, "%s: %d heads of %d, window %d", what, a->n_heads, a->head_dim,
                            a->window);
    if (a->rope.dr < 0 || a->rope.dr > a->head_dim || a->rope.dr % 2 || (a->rope.dr && !a->rope.inv_freq))
        return base_err_set(err, COLIBRI_EINVAL, "%s: rope dims %d for head_dim %d", what, a->rope.dr, a->head_dim);
    return 0;
}

/* x / sqrt(mean(x^2) + eps), times w when given. */
static void rms(float *x, int n, const float *w, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) x[i] = w ? w[i] * (x[i] * inv) : x[i] * inv;
}

int model_v4_attn_prep_q(const struct v4_attn *a, int pos, float *q, struct colibri_err *err)
{
    int rc = check(a, "model_v4_attn_prep_q", err);
    if (rc) return rc;
    for (int h = 0; h < a->n_heads; h++) {
        float *qh = q + (size_t)h * a->head_dim;
        rms(qh, a->head_dim, NULL, a->norm_eps);
        if (a->rope.dr) model_v4_rope_tail(qh, a->head_dim, &a->rope, pos, 0);
    }
    return 0;
}

int model_v4_attn_prep_kv(const struct v4_attn *a, int pos, float *kv, struct colibri_err *err)
{
    int rc = check(a, "model_v4_attn_prep_kv", err);
    if (rc) return rc;
    if (!a->kv_norm_w) return base_err_set(err, COLIBRI_EINVAL, "model_v4_attn_prep_kv: kv_norm weight missing");
    rms(kv, a->head_dim, a->kv_norm_w, a->norm_eps);
    if (a->rope.dr) model_v4_rope_tail(kv, a->head_dim, &a->rope, pos, 0);
    return 0;
}

static double dot(const float *x, const float *y, int n)
{
    double acc = 0;
    for (int i = 0; i < n; i++) acc += (double)x[i] * y[i];
    return acc;
}

int model_v4_attn_query(const struct v4_attn *a, int pos, const float *q, const float *win, int n_win,
                        const float *comp, const int32_t *sel, int n_sel, float *out, float *scratch,
                        struct colibri_err *err)
{
    int rc = check(a, "model_v4_attn_query", err);
    if (rc) return rc;
    if (n_win < 0 || n_win > a->window || n_win > pos + 1 || n_sel < 0 || !a->sinks)
        return base_err_set(err, COLIBRI_EINVAL,
                            "model_v4_attn_query: %d window rows at pos %d (window %d), %d entries%s", n_win, pos,
                            a->window, n_sel, a->sinks ? "" : ", sinks missing");
    const int hd = a->head_dim, n = n_win + n_sel;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < a->n_heads; h++) {
        const float *qh = q + (size_t)h * hd;
        float *oh = out + (size_t)h * hd;
        float mx = a->sinks[h];
        for (int j = 0; j < n; j++) {
            const float *k = j < n_win ? win + (size_t)j * hd
                                       : comp + (size_t)(sel ? sel[j - n_win] : j - n_win) * hd;
            scratch[j] = (float)dot(qh, k, hd) * scale;
            mx = fmaxf(mx, scratch[j]);
        }
        double den = exp((double)a->sinks[h] - mx);
        for (int j = 0; j < n; j++) den += scratch[j] = (float)exp((double)scratch[j] - mx);
        for (int i = 0; i < hd; i++) oh[i] = 0;
        for (int j = 0; j < n; j++) {
            const float *k = j < n_win ? win + (size_t)j * hd
                                       : comp + (size_t)(sel ? sel[j - n_win] : j - n_win) * hd;
            float p = (float)(scratch[j] / den);
            for (int i = 0; i < hd; i++) oh[i] += p * k[i];
        }
        if (a->rope.dr) model_v4_rope_tail(oh, hd, &a->rope, pos, 1);
    }
    return 0;
}

int model_v4_attn_out_proj(int in_dim, int groups, int o_rank, int hidden, const float *o_a, const float *o_b,
                           const float *in, float *mid, float *out, struct colibri_err *err)
{
    if (groups < 1 || in_dim < groups || in_dim % groups || o_rank < 1 || hidden < 1)
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_attn_out_proj: %d inputs in %d groups, o_rank %d, hidden %d",
                            in_dim, groups, o_rank, hidden);
    const int per = in_dim / groups, R = groups * o_rank;
    for (int g = 0; g < groups; g++)
        for (int r = 0; r < o_rank; r++)
            mid[g * o_rank + r] = (float)dot(o_a + ((size_t)g * o_rank + r) * per, in + (size_t)g * per, per);
    for (int o = 0; o < hidden; o++) out[o] = (float)dot(o_b + (size_t)o * R, mid, R);
    return 0;
}
